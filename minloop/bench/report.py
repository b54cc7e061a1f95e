"""What ``python -m minloop bench`` shows: progress, the table, notes, JSON, plot."""

from __future__ import annotations

import json
import math
import statistics
import sys
import textwrap
import time

from . import loops

REF = "minloop"
NOISY = 0.20  # rounds' spread (max - min) / median above which a figure gets '~'
SATURATED = 0.90  # load generator CPU, share of one core, from which a row is flagged
BUSY = 0.10  # other processes' share of the two CPUs above which the notes warn


class Progress:
    """One live status line on stderr, rewritten with \\r on a terminal; plain
    lines (one per row) otherwise, so that logs do not fill with \\r."""

    def __init__(self, total: int, stream=None):
        self.stream = stream or sys.stderr
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.live = self.stream.isatty()
        self._last_row = None

    def show(self, row: str, round_: int, rounds: int, loop: str) -> None:
        elapsed = time.monotonic() - self.started
        text = (f"[{self.done + 1:>3}/{self.total}] {elapsed:5.1f}s  "
                f"{row:<24} round {round_}/{rounds}  {loop:<8}")
        if self.live:
            self.stream.write("\r" + text + "\x1b[K")
            self.stream.flush()
        elif row != self._last_row:
            print(text, file=self.stream, flush=True)
        self._last_row = row

    def step(self) -> None:
        self.done += 1

    def finish(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[K")
        elapsed = time.monotonic() - self.started
        print(f"{self.done} runs in {elapsed:.1f} s", file=self.stream, flush=True)

    def interrupted(self, rows_kept: int) -> None:
        """The one line Ctrl-C gets (no traceback)."""
        if self.live:
            self.stream.write("\r\x1b[K")
        print(f"interrupted after {self.done} of {self.total} runs: reporting the "
              f"{rows_kept} row(s) with finished rounds", file=self.stream, flush=True)


def list_line(rid: str, mark: str, doc: str) -> str:
    """One row of --list, its description wrapped under it to 80 columns."""
    return textwrap.fill(doc, width=WIDTH, initial_indent=f"{rid:<24}{mark} ",
                         subsequent_indent=" " * 26, break_on_hyphens=False)


def si(value: float) -> str:
    """Three significant digits and a k/M/G suffix: 999.7k shows as 1M."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale * 0.9995:
            return f"{float(f'{value / scale:.3g}'):g}{suffix}"
    return f"{float(f'{value:.3g}'):g}"


def others(names) -> list[str]:
    """The columns minloop's ratios are against: every loop but minloop, in
    the order given (not a script's baseline column, such as a C server)."""
    return [n for n in names if n != REF and loops.is_loop(n)]


def short_of_rounds(cell: dict) -> bool:
    """Whether a cell finished fewer rounds than planned (an interrupted run)."""
    return not cell.get("na") and cell.get("runs", 0) < cell.get("planned", 0)


def _median(cell: dict, key: str):
    return cell.get("median", {}).get(key) if cell.get("samples") else None


def _lower_better(entry: dict) -> bool:
    return bool(entry["row"].get("lower_better"))


def ratios(entry: dict, key: str = "rate", lower_better: bool | None = None) -> dict:
    """minloop's median figure over each other loop's (the inverse where a
    lower figure is better: the row's lower_better, unless given): above 1,
    minloop is ahead.  key "server_us" (lower_better): the server's CPU per
    round trip, the other loop's over minloop's."""
    cells = entry["cells"]
    lower = _lower_better(entry) if lower_better is None else lower_better
    ref = _median(cells[REF], key) if REF in cells else None
    out = {}
    for other in others(cells):
        theirs = _median(cells[other], key)
        if ref and theirs:
            out[other] = theirs / ref if lower else ref / theirs
    return out


def ratio_ranges(entry: dict) -> dict:
    """Per other loop, the lowest and highest of the rounds' own ratios (the
    loops take turns within a round, so a round's figures pair up)."""
    cells = entry["cells"]
    if REF not in cells:
        return {}
    mine = {s["round"]: s["rate"] for s in cells[REF]["samples"] if s.get("rate")}
    out = {}
    for other in others(cells):
        per_round = []
        for s in cells[other]["samples"]:
            if s.get("rate") and s["round"] in mine:
                a, b = mine[s["round"]], s["rate"]
                per_round.append(b / a if _lower_better(entry) else a / b)
        if per_round:
            out[other] = [min(per_round), max(per_round)]
    return out


def ok(results: dict) -> bool:
    """False if minloop failed or misbehaved on some row (n/a is not a failure)."""
    return not any(e["cells"][REF]["errors"] or e["cells"][REF]["problems"]
                   for e in results.values() if REF in e["cells"])


WIDTH = 80  # every line of the report fits an 80-column terminal


def fill(text: str, indent: str = "", subsequent: str | None = None) -> str:
    return textwrap.fill(text, width=WIDTH, initial_indent=indent,
                         subsequent_indent=indent + "  " if subsequent is None else subsequent,
                         break_on_hyphens=False)


def header(machine: dict, probes: dict, names: list[str], settings, rows) -> str:
    cpus = machine["cpu_count"]
    if machine.get("cpus_usable", cpus) != cpus:
        cpus = f"{cpus} ({machine['cpus_usable']} usable)"
    lines = [
        "minloop bench: median of {} rounds, every run in a fresh process, loops taking "
        "turns{}".format(settings.rounds, " (--quick)" if settings.quick else ""),
        f"python: {machine['python']} on {machine['platform']}",
        f"cpu: {machine['cpu']}, {cpus} CPUs"
        + (f"; load average {machine['loadavg']:.2f}" if "loadavg" in machine else ""),
        "loops: " + ", ".join(f"{n} {probes[n]['version']}" for n in names
                              if probes[n]["available"]),
    ]
    if any(row.group == "scale" for row in rows):
        pin = settings.pin
        lines.append("scale rows: " + (f"each run pinned to CPU {pin.server}"
                                       if pin.server is not None else pin.describe))
    if any(row.group in ("net", "memory") or row.kind == "tls" for row in rows):
        lines.append(f"network rows: {settings.duration:g} s timed after {settings.warmup:g} s "
                     f"warm-up; {settings.pin.describe}")
    for n in names:
        if not probes[n]["available"]:
            lines.append(f"skipped: {n}: {probes[n]['reason']}")
    return "\n".join(fill(line) for line in lines) + "\n"


def _cell_text(cell: dict) -> str:
    value = _median(cell, "rate")
    if value is None:
        if cell.get("na"):
            return "n/a"
        return "FAILED" if cell["errors"] else "-"
    mark = " "
    if cell["errors"] or cell["problems"]:
        mark = "!"
    elif short_of_rounds(cell):
        mark = "<"
    elif cell["spread"] is not None and cell["spread"] > NOISY:
        mark = "~"
    return si(value) + mark


def client_peak(entry: dict) -> tuple[float, str] | None:
    """The highest median load-generator CPU over the loops, and whose."""
    peaks = [(_median(c, "client_util"), name) for name, c in entry["cells"].items()
             if _median(c, "client_util") is not None]
    return max(peaks) if peaks else None


# What each group's figure is, for its heading in the table.
GROUP_TITLES = {
    "core": "core: operations per second",
    "scale": "scale: tasks, timers or callbacks per second (collector on)",
    "memory": "memory: server RSS bytes per idle connection (lower is better)",
    "net": "net: round trips (HTTP: requests) per second",
    "other": "other: TLS round trips/s, spawn processes/s, sendfile MB/s, ospipe MiB/s",
    "interpreters": "interpreters: aggregate rate of N sub-interpreters at once (1 vs N: "
                    "below)",
}


def _group_title(group: str, results: dict) -> str:
    """GROUP_TITLES' heading; other's names the unit of each kind present."""
    if group != "other":
        return GROUP_TITLES.get(group, group)
    units = {}
    for e in results.values():
        if e["row"]["group"] == "other":
            units.setdefault(e["row"]["kind"], e["row"]["unit"])
    return "other: " + ", ".join(f"{'TLS' if kind == 'tls' else kind} {unit}"
                                 for kind, unit in units.items())


def _columns(rows: list[list[str]], right_from: int, gaps: list[int],
             widths_out: list | None = None) -> list[str]:
    """Rows of cells as aligned lines: left-aligned up to right_from, then
    right-aligned; gaps[i] spaces before column i."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    if widths_out is not None:
        widths_out[:] = widths
    out = []
    for r in rows:
        parts = []
        for i, (c, w) in enumerate(zip(r, widths)):
            text = c.ljust(w) if i < right_from else c.rjust(w)
            parts.append((" " * gaps[i] if i else "") + text)
        out.append("".join(parts).rstrip())
    return out


def table(results: dict, loop_names: list[str]) -> str:
    """The main table: per row, each loop's median and minloop's ratios, under
    a heading per group (which says what the figures count)."""
    against = others(loop_names) if REF in loop_names else []
    head = ["row"] + loop_names + against
    body = []
    for rid, entry in results.items():
        line = [rid] + [_cell_text(entry["cells"][n]) for n in loop_names]
        line += [f"{entry['ratios'][n]:.2f}x" if n in entry["ratios"] else "-"
                 for n in against]
        body.append(line)
    gaps = ([0] + [1] * len(loop_names) + [3] + [1] * len(against))[:len(head)]
    widths: list = []
    lines = _columns([head] + body, 1, gaps, widths)
    out = []
    if against:
        # "minloop vs" centred over the ratio columns.
        span = sum(widths[-len(against):]) + sum(gaps[-len(against) + 1:])
        start = sum(widths) + sum(gaps) - span
        out.append(" " * start + f"{REF} vs".center(span).rstrip())
    out += [lines[0], "-" * max(len(x) for x in lines)]
    group = None
    for rid, line in zip(results, lines[1:]):
        g = results[rid]["row"]["group"]
        if g != group:
            if group is not None:
                out.append("")
            out.append(_group_title(g, results))
            group = g
        out.append(line)
    return "\n".join(out)


def _ms(ms: float) -> str:
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 1 else f"{ms:.3f}"


def _gc_text(counts) -> str:
    return "/".join(f"{c:g}" for c in counts) if counts is not None else "-"


def details(results: dict, loop_names: list[str]) -> str:
    """The figures behind the main table where they matter: GC collections
    (scale rows), phases of the held-timers row, the per-timer firing cost at
    1k and 200k live timers, and the CPU of the network rows."""
    out = []
    scale = {rid: e for rid, e in results.items()
             if any(_median(c, "gc") is not None for c in e["cells"].values())}
    if scale:
        out.append("GC collections during each run (set-up excluded), gen 0/1/2, medians:")
        rows = [["row"] + loop_names]
        for rid, e in scale.items():
            rows.append([rid] + [_gc_text(_median(e["cells"][n], "gc")) for n in loop_names])
        out += _columns(rows, 1, [0] + [2] * len(loop_names))
    timed = {rid: e for rid, e in results.items() if e["row"]["group"] in ("core", "scale")}
    if timed:
        out.append("")
        out.append(", ".join(sorted({e["row"]["group"] for e in timed.values()}))
                   + " rows: milliseconds of the timed part (medians):")
        rows = [["row"] + loop_names]
        for rid, e in timed.items():
            cells = []
            for n in loop_names:
                sec = _median(e["cells"][n], "seconds")
                cells.append("-" if sec is None else _ms(sec * 1e3))
            rows.append([rid] + cells)
        out += _columns(rows, 1, [0] + [2] * len(loop_names))
    phased = {rid: e for rid, e in results.items()
              if any(_median(c, "phases_ms") for c in e["cells"].values())}
    for rid, e in phased.items():
        out.append("")
        out.append(f"{rid} by phase, ms (medians); GC collections while firing:")
        rows = [["loop", "schedule", "cancel", "fire", "GC firing"]]
        for n in loop_names:
            ph = _median(e["cells"][n], "phases_ms")
            if ph:
                rows.append([n] + [f"{ph[k]:.1f}" for k in ("schedule", "cancel", "fire")]
                            + [_gc_text(_median(e["cells"][n], "gc_fire"))])
        out += _columns(rows, 1, [0, 2, 2, 2, 3])
    small, large = results.get("timers-1k-fire"), results.get("timers-200k-fire")
    if small and large:
        out.append("")
        out.append("per-timer firing cost in ns, handles held, at 1k and at 200k live "
                   "timers:")
        rows = [["loop", "1k", "200k", "200k/1k", "GC firing 200k"]]
        for n in loop_names:
            a, b = _median(small["cells"][n], "rate"), _median(large["cells"][n], "rate")
            if a and b:
                rows.append([n, f"{1e9 / a:.0f}", f"{1e9 / b:.0f}", f"{a / b:.2f}x",
                             _gc_text(_median(large["cells"][n], "gc_fire"))])
        out += _columns(rows, 1, [0, 2, 2, 2, 3])
    net = {rid: e for rid, e in results.items() if e["row"]["group"] == "net"
           and any(_median(c, "server_us") is not None for c in e["cells"].values())}
    if net:
        out.append("")
        out.append(fill("net rows: server CPU per round trip, microseconds (medians); "
                         "client: the load generator's highest CPU share"))
        rows = [["row"] + loop_names + ["client"]]
        for rid, e in net.items():
            peak = client_peak(e)
            cells = []
            for n in loop_names:
                us = _median(e["cells"][n], "server_us")
                cells.append("-" if us is None else f"{us:.1f}")
            rows.append([rid] + cells + ["-" if peak is None else
                                         f"{peak[0]:.0%}" + (" sat" if peak[0] >= SATURATED
                                                             else "")])
        out += _columns(rows, 1, [0] + [2] * len(loop_names) + [2])
        out += _user_cpu_table(net, loop_names)
    out += _net_figures(results, loop_names)
    out += _other_details(results, loop_names)
    return "\n".join(out).strip("\n")


USER_CPU_GOOD = 0.10  # user_err above which a user-CPU figure gets '~'


def _user_cpu_table(net: dict, loop_names: list[str]) -> list[str]:
    """The server's user CPU per round trip: its total less the kernel's time
    (the system calls and the network stack, most of the total on the echo
    rows), so what is left is the loop's and the interpreter's own cost;
    pooled over the rounds (runner._pool_user_cpu), with what it is good to."""
    rows = [["row"] + loop_names]
    errors = []
    for rid, e in net.items():
        cells = []
        for n in loop_names:
            cell = e["cells"][n]
            us = _median(cell, "server_user_us")
            if us is None:
                cells.append("-")
                continue
            err = cell.get("user_err", 0.0)
            errors.append(err if err is not None else math.inf)
            rough = err is None or err > USER_CPU_GOOD
            cells.append(f"{us:.2f}" + ("~" if rough else " "))
        if any(c != "-" for c in cells):
            rows.append([rid] + cells)
    if len(rows) == 1:
        return []
    from .procs import tick_hz

    hz, known = tick_hz()
    worst = max(errors) if errors else 0.0
    good = ("unknown (a window with no user tick)" if math.isinf(worst)
            else f"within {worst:.0%}")
    text = ("net rows: the server's user CPU per round trip, microseconds, over all "
            "rounds together: its CPU less the kernel's part, the loop's and the "
            "interpreter's own cost. From /proc/PID/stat, where the kernel charges each "
            f"clock tick ({hz} Hz{'' if known else ' or faster'}) to user or system by "
            "what it interrupted and counts in 10 ms units: "
            f"here good to {good} (two standard deviations) at worst; '~': worse than "
            f"{USER_CPU_GOOD:.0%}; longer windows (--duration) narrow it.")
    return ["", fill(text)] + _columns(rows, 1, [0] + [2] * len(loop_names))


def _net_figures(results: dict, loop_names: list[str]) -> list[str]:
    """MB/s echoed for the rows of 64 KiB messages and more, and the latency
    percentiles where the load generator gave them (wrk)."""
    out = []
    big = {rid: e for rid, e in results.items() if e["row"]["group"] == "net"
           and e["row"].get("size", 0) >= 64 * 1024
           and any(_median(c, "mb_s") is not None for c in e["cells"].values())}
    if big:
        out += ["", "net rows: MB/s echoed (bytes back per second, medians):"]
        rows = [["row"] + loop_names]
        for rid, e in big.items():
            mb = [_median(e["cells"][n], "mb_s") for n in loop_names]
            rows.append([rid] + ["-" if v is None else f"{v:.0f}" for v in mb])
        out += _columns(rows, 1, [0] + [2] * len(loop_names))
    timed = {rid: e for rid, e in results.items()
             if any(_median(c, "p50") is not None for c in e["cells"].values())}
    if timed:
        out += ["", "latency, p50 / p99 in ms (medians over rounds):"]
        rows = [["row"] + loop_names]
        for rid, e in timed.items():
            cells = []
            for n in loop_names:
                p50, p99 = _median(e["cells"][n], "p50"), _median(e["cells"][n], "p99")
                cells.append("-" if p50 is None or p99 is None
                             else f"{p50 * 1e3:.2f}/{p99 * 1e3:.2f}")
            rows.append([rid] + cells)
        out += _columns(rows, 1, [0] + [2] * len(loop_names))
    return out


# The CPU figure each kind of other row reports: the sample key, its scale, its heading.
OTHER_CPU = {"tls": ("server_us", 1, "TLS: server CPU per round trip, us"),
             "spawn": ("cpu_us", 1, "spawn: the loop's process's CPU per process, us"),
             "sendfile": ("cpu", 1e3, "sendfile: the sender's CPU for the whole file, ms"),
             "ospipe": ("seconds", 1e3, "ospipe: milliseconds for the whole transfer")}


def _other_cpu(kind: str) -> tuple:
    """OTHER_CPU's entry for a kind; a script's own kind: its process's CPU."""
    return OTHER_CPU.get(kind, ("cpu", 1e3, f"{kind}: the measuring process's CPU, ms"))


def _other_details(results: dict, loop_names: list[str]) -> list[str]:
    """The other rows' CPU per unit of work (medians), and the path each loop
    took for sendfile (rw: read + write, where the loop has no loop.sendfile)."""
    other = {rid: e for rid, e in results.items() if e["row"]["group"] == "other"
             and any(c.get("samples") for c in e["cells"].values())}
    if not other:
        return []
    kinds = dict.fromkeys(e["row"]["kind"] for e in other.values())
    out = ["", fill("other rows, medians: " + "; ".join(_other_cpu(k)[2] for k in kinds)
        + ("; rw: sent with read + write (no loop.sendfile)"
           if any(s.get("how") == "read+write" for e in other.values()
                  for c in e["cells"].values() for s in c["samples"]) else ""))]
    rows = [["row"] + loop_names]
    for rid, e in other.items():
        key, scale, _ = _other_cpu(e["row"]["kind"])
        cells = []
        for n in loop_names:
            cell = e["cells"][n]
            value = _median(cell, key)
            text = "-" if value is None else _ms(value * scale)
            if any(s.get("how") == "read+write" for s in cell["samples"]):
                text += " rw"
            cells.append(text)
        rows.append([rid] + cells)
    return out + _columns(rows, 1, [0] + [2] * len(loop_names))


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summary(results: dict, loop_names: list[str], subsets: dict | None = None) -> str:
    """One line per group, and per subset (name -> predicate(row id, entry)),
    of the geometric mean of minloop's ratios against each loop; and of its
    CPU ratios (server CPU per round trip, theirs over minloop's) where the
    rows have them."""
    against = others(loop_names)
    if REF not in loop_names or not against:
        return ""
    sets: dict = {}
    for e in results.values():
        sets.setdefault(_summary_group(e["row"]), []).append(e)
    for name, wanted in (subsets or {}).items():
        chosen = [e for rid, e in results.items() if wanted(rid, e)]
        ids = {id(e) for e in chosen}
        if chosen and all(ids != {id(e) for e in v} for v in sets.values()):
            sets[name] = chosen  # unless it is a whole group again
    lines = []
    for name, entries in sets.items():
        parts = []
        for other in against:
            rs = [e["ratios"][other] for e in entries if other in e["ratios"]]
            cpu = [e["cpu_ratios"][other] for e in entries
                   if other in e.get("cpu_ratios", {})]
            if rs:
                parts.append(f"{_geomean(rs):.2f}x vs {other}"
                             + (f" ({_geomean(cpu):.2f}x by CPU)" if cpu else ""))
        rated = [e for e in entries if e["ratios"]]
        if parts:
            lines.append(fill(f"{name:<8} " + ", ".join(parts)
                              + f" ({len(rated)} row{'s' if len(rated) > 1 else ''})",
                              "  ", "    "))
    if not lines:
        return ""
    by_cpu = any(e.get("cpu_ratios") for e in results.values())
    head = (f"summary: geometric mean per group of {REF}'s ratios (above 1: {REF} ahead"
            + (f"; by CPU: the server's CPU per round trip, the other loop's over "
               f"{REF}'s)" if by_cpu else ")"))
    if PIPELINED in sets:
        head += (f". '{PIPELINED}': network rows with many messages in flight per "
                 f"connection, where a loop's per-message cost shows most; README's "
                 f"TCP echo figure is a full run's 'tcp echo' line")
    return "\n".join([fill(head)] + lines)


# The network rows with several messages in flight on each connection (the
# --quick set's are all such): their ratios run well above those of one
# message in flight, so they are summed up apart, under a name that says so.
PIPELINED = "pipelined"


def _summary_group(row: dict) -> str:
    if row["group"] == "net" and row.get("depth", 1) > 1:
        return PIPELINED
    return row["group"]


# What each kind of other row measures, for the notes; a script's own kind
# is named by itself (its docstring says more).
OTHER_NOTES = {"tls": "TLS echo through create_server(ssl=), measured by a TLS load "
                      "generator in its own process",
               "spawn": "processes spawned and waited for",
               "sendfile": "a file sent to a receiver process",
               "ospipe": "bytes through an os.pipe()"}
OTHER_QUICK = {"spawn", "sendfile", "ospipe"}  # the kinds --quick shrinks


def notes(results: dict, loop_names: list[str], settings) -> str:
    out = []
    groups = {e["row"]["group"] for e in results.values()}
    if "core" in groups:
        out.append("core rows: operations per second of one loop-core workload (sizes: "
                   + ", ".join(f"{rid} {si(e['n'])}" for rid, e in results.items()
                               if "n" in e and e["row"]["group"] == "core") + ").")
    if "scale" in groups:
        out.append("scale rows: the same with the cyclic GC on at its default thresholds, "
                   "as programs run (sizes: "
                   + ", ".join(f"{rid} {si(e['n'])}" for rid, e in results.items()
                               if "n" in e and e["row"]["group"] == "scale") + ").")
    if "memory" in groups:
        out.append(f"memory rows: growth of the server's resident set (VmRSS) per "
                   f"connection, from before the connections to after, each read after "
                   f"a full collection in the server and a settle time.")
    if "net" in groups:
        out.append("net rows: round trips (HTTP requests) per second through a server on "
                   "the loop, measured by the load generator.")
    if "other" in groups:
        kinds = dict.fromkeys(e["row"]["kind"] for e in results.values()
                              if e["row"]["group"] == "other")
        out.append("other rows: " + "; ".join(OTHER_NOTES.get(k, k) for k in kinds)
                   + ". Each run in a fresh process."
                   + (" --quick: spawn, sendfile and ospipe at a fifth of the size their "
                      "names give." if settings.quick and OTHER_QUICK & set(kinds) else ""))
    if REF in loop_names:
        out.append(f"{REF} vs X: {REF}'s figure over X's (X's over {REF}'s where lower "
                   f"is better); above 1, {REF} is ahead.")
    out.append(f"'~': rounds spread by more than {NOISY:.0%} (max-min over median); "
               "'!': some round failed or misbehaved (listed below); "
               + ("'<': fewer rounds than planned (the run was interrupted); "
                  if any(_rounds_short(e) for e in results.values()) else "")
               + "n/a: the loop cannot run that row.")
    loads = sorted(s["other_load"] for e in results.values() for c in e["cells"].values()
                   for s in c["samples"] if s.get("other_load") is not None)
    busy = bool(loads) and statistics.median(loads) > BUSY
    out += _load_generator_notes(results, settings, busy)
    if busy:
        out.append(f"WARNING: the machine was busy: other processes took a median "
                   f"{statistics.median(loads):.0%} (worst {loads[-1]:.0%}) of the two "
                   f"benchmark CPUs during the network runs; expect noise.")
    out = [fill(line) for line in out]

    na = {}
    for rid, entry in results.items():
        for name, cell in entry["cells"].items():
            if cell["na"]:
                na.setdefault((name, cell["na"]), []).append(rid)
    if na:
        out.append("n/a:")
        for (name, reason), rids in na.items():
            out.append(fill(f"{name}: {reason} [{', '.join(rids)}]", "  ", "    "))
    out += _failure_lines(results, settings)
    return "\n".join(out)


def _failure_lines(results: dict, settings) -> list[str]:
    """Failures and misbehaviour, under the loop they belong to: another loop's
    are its own (a row it fails says nothing about minloop)."""
    by_loop: dict = {}
    for rid, entry in results.items():
        for name, cell in entry["cells"].items():
            for kind, label in (("errors", "failed"), ("problems", "misbehaved")):
                # Rounds usually fail the same way: each distinct message once.
                seen: dict = {}
                for line in cell[kind]:
                    where, message = line.split(": ", 1)
                    seen.setdefault(message, []).append(where)
                for message, where in seen.items():
                    by_loop.setdefault(name, []).append(
                        f"{rid}: {label} in {len(where)} of {settings.rounds} rounds: "
                        f"{message}")
    if not by_loop:
        return []
    out = [fill("failures and misbehaviour, by loop ('failed': no figure; 'misbehaved': "
                 "the figure is kept, marked '!'):")]
    for name in sorted(by_loop, key=lambda n: n != REF):
        whose = (f"{name} (minloop's own: a bug to fix)" if name == REF
                 else f"{name} (its own behaviour, not minloop's)")
        out.append(f"  {whose}:")
        out += [fill(line, "    ", "      ") for line in by_loop[name]]
    return out


def _load_generator_notes(results: dict, settings, busy: bool = False) -> list[str]:
    net = {rid: e for rid, e in results.items()
           if e["row"]["group"] == "net" or e["row"].get("kind") == "tls"}
    peaks = {rid: client_peak(e) for rid, e in net.items()}
    peaks = {rid: p for rid, p in peaks.items() if p is not None}
    if not peaks:
        return []
    pin = settings.pin
    where = f"pinned, {pin.describe}" if pin.client is not None else pin.describe
    lines = [f"load generator: its own process (non-blocking sockets on epoll, no event "
             f"loop; {where}); its CPU time was read at the edges of every timed window. "
             f"client: its highest median CPU over the loops, in % of one core."]
    saturated = {rid: p for rid, p in peaks.items() if p[0] >= SATURATED}
    worst_rid, (worst, who) = max(peaks.items(), key=lambda kv: kv[1][0])
    if getattr(pin, "shared", False):
        # One CPU for both: every round trip costs the server's CPU plus the
        # generator's, so the generator is always part of the bottleneck.
        lines.append(f"the server and the load generator shared one CPU: each rate is "
                     f"bounded by their CPU time together, and the load generator took up "
                     f"to {worst:.0%} of it ({worst_rid} on {who}); compare the loops by "
                     f"the server CPU per round trip.")
    elif not saturated:
        lines.append(f"client CPU at most {worst:.0%} of a core ({worst_rid} on {who}): "
                     f"below {SATURATED:.0%} on every row, so the load generator was not "
                     f"the bottleneck"
                     + (" (though other processes competed with it for its CPU: see the "
                        "warning below)." if busy else "."))
    else:
        lines.append(
            f"'sat': the load generator used {SATURATED:.0%} or more of its core on "
            + ", ".join(f"{rid} ({p[0]:.0%}, on {p[1]})" for rid, p in saturated.items())
            + ": there it, not the server, may have set the pace, so those rows can "
              "understate how much faster the faster loops are; compare the server CPU "
              "per round trip.")
        fine = len(peaks) - len(saturated)
        if fine:
            lines.append(f"the other {fine} network row(s) stayed below {SATURATED:.0%}.")
    return lines


def write_json(path: str, machine: dict, probes: dict, settings, results: dict,
               interrupted: bool = False) -> None:
    from .. import __version__

    environment = dict(machine, minloop=__version__, loops=probes,
                       pinning=settings.pin.describe, quick=settings.quick,
                       rounds=settings.rounds, net_duration=settings.duration,
                       net_warmup=settings.warmup, interrupted=interrupted)
    rows = {}
    for rid, entry in results.items():
        rows[rid] = dict(entry, client_cpu_peak=(client_peak(entry) or (None,))[0])
    with open(path, "w") as f:
        json.dump({"environment": environment, "ref": REF, "rows": rows}, f, indent=2)


class PlotUnavailable(Exception):
    """matplotlib cannot be imported."""


def plot_formats() -> set:
    """The file name extensions matplotlib can write (raises PlotUnavailable)."""
    try:
        import matplotlib
        matplotlib.use("Agg")  # a file, no display needed
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError as exc:
        raise PlotUnavailable(str(exc) or "not installed") from None
    return set(FigureCanvasBase.get_supported_filetypes())


# The plot shows ratios, not figures: say which way they point.
PLOT_TITLES = {
    "memory": "memory: server RSS per idle connection (bars: the other loop's bytes over "
              "minloop's)",
}
COLOURS = {"asyncio": "#8c8c8c", "uvloop": "#4477aa", "rloop": "#ee7733",
           "zuvloop": "#228833", "rsloop": "#aa3377", "talyn": "#ccbb44"}


def _rounds_short(entry: dict) -> tuple[int, int] | None:
    """(rounds finished, rounds planned) of the row's shortest cell, if an
    interrupt left some cell short of its rounds."""
    short = [c for c in entry["cells"].values() if short_of_rounds(c)]
    if not short:
        return None
    fewest = min(short, key=lambda c: c["runs"])
    return fewest["runs"], fewest["planned"]


def _short_label(rid: str, entry: dict) -> str:
    """A row's name, and the rounds it has where an interrupt left it short."""
    short = _rounds_short(entry)
    return rid if short is None else f"{rid} ({short[0]} of {short[1]} rounds)"


def interrupted_line(results: dict, done: int, total: int) -> str:
    """The report's first line after Ctrl-C: what it holds, and which rows
    have fewer rounds than the header says."""
    short = {rid: _rounds_short(e) for rid, e in results.items()}
    short = [f"{rid} ({s[0]} of {s[1]})" for rid, s in short.items() if s is not None]
    text = (f"INTERRUPTED after {done} of {total} runs: the medians below are of the "
            f"rounds that finished")
    if short:
        text += ("; '<' marks a figure of fewer rounds than the header says: "
                 + ", ".join(short))
    return fill(text + "; rows not reached are missing.")


def plot(path: str, results: dict, loop_names: list[str], machine: dict) -> None:
    """minloop's ratio against each other loop, one horizontal bar per row and
    loop, a panel per group, on a shared log axis; each bar labelled with its
    value, whiskers from the rounds' lowest to highest ratio, and a caption
    saying where and when it was measured."""
    plot_formats()
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from .. import __version__

    others_ = others(loop_names)
    groups: dict = {}
    for rid, e in results.items():
        if e["ratios"]:
            groups.setdefault(e["row"]["group"], []).append(rid)
    if not groups:
        groups = {"(no ratios)": []}
    heights = [max(1, len(rids)) for rids in groups.values()]
    fig, axes = plt.subplots(len(groups), 1, sharex=True, squeeze=False,
                             figsize=(9.0, 1.3 + 0.42 * sum(heights) * max(1, len(others_)) / 2
                                      + 0.5 * len(groups)),
                             gridspec_kw={"height_ratios": heights})
    values = [v for e in results.values() for v in e["ratios"].values()]
    values += [v for e in results.values() for r in e.get("ratio_ranges", {}).values()
               for v in r]
    lo, hi = (min(values), max(values)) if values else (0.5, 2.0)
    lo, hi = min(lo, 1.0) / 1.6, max(hi, 1.0) * 1.6  # room for the labels
    bar = 0.8 / max(1, len(others_))
    for ax, (group, rids) in zip(axes[:, 0], groups.items()):
        for i, other in enumerate(others_):
            ys = [j - 0.4 + bar * (i + 0.5) for j in range(len(rids))]
            xs = [results[r]["ratios"].get(other) for r in rids]
            ranges = [results[r].get("ratio_ranges", {}).get(other) for r in rids]
            shown = [(y, x, rg) for y, x, rg in zip(ys, xs, ranges) if x]
            if not shown:
                continue
            ys_, xs_, rgs = zip(*shown)
            # The median of the medians can lie outside the paired rounds'
            # range where the loops have different rounds (a failed round,
            # Ctrl-C): the whisker then starts at the bar's end.
            err = [[max(0.0, x - (rg or (x, x))[0]) for _, x, rg in shown],
                   [max(0.0, (rg or (x, x))[1] - x) for _, x, rg in shown]]
            # Bars grow from 1x, so a ratio below 1 points left.
            ax.barh(ys_, [x - 1.0 for x in xs_], bar * 0.9, left=1.0,
                    color=COLOURS.get(other, f"C{i}"), label=f"vs {other}",
                    xerr=err, error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#333"})
            for y, x, rg in shown:
                # The label beyond the bar's end and its whisker.
                if x >= 1.0:
                    ax.text(max(x, (rg or (x, x))[1]) * 1.04, y, f"{x:.2f}x",
                            va="center", ha="left", fontsize=7)
                else:
                    ax.text(min(x, (rg or (x, x))[0]) / 1.04, y, f"{x:.2f}x",
                            va="center", ha="right", fontsize=7)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(rids)))
        ax.set_yticklabels([_short_label(rid, results[rid]) for rid in rids], fontsize=8)
        ax.invert_yaxis()
        ax.set_title(PLOT_TITLES.get(group, GROUP_TITLES.get(group, group)), fontsize=9,
                     loc="left")
        ax.grid(axis="x", which="both", color="#dddddd", linewidth=0.5)
        ax.set_axisbelow(True)
    ax = axes[-1, 0]
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    label = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x")
    ax.xaxis.set_major_formatter(label)
    def minor(v, _):
        # Label 0.2x, 0.5x, 2x, 5x, 20x ...: enough to read a bar between decades.
        mantissa = round(v / 10 ** math.floor(math.log10(v)), 6)
        return f"{v:g}x" if mantissa in (2, 5) else ""

    ax.xaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(minor))
    ax.tick_params(axis="x", which="both", labelsize=8)
    ax.set_xlabel(f"{REF}'s figure over the other loop's (log scale; right of 1x: "
                  f"{REF} ahead)", fontsize=8)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper right", fontsize=8, ncol=len(others_),
                   frameon=False)
    interrupted = machine.get("interrupted")
    fig.suptitle(f"{REF} against other event loops"
                 + (" (interrupted run: fewer rounds where a row says so)" if interrupted
                    else ""), x=0.01, ha="left", fontsize=11)
    versions = machine.get("versions") or {}
    caption = (f"{machine.get('python', '')}, {machine.get('cpu', '')}, "
               f"{machine.get('cpus_usable', machine.get('cpu_count', '?'))} CPUs; "
               f"{machine.get('date', '')}; {REF} {__version__}"
               + "".join(f", {n} {v}" for n, v in versions.items() if n in others_)
               + f". Median of {machine.get('rounds', '?')} rounds"
               + (" (the run was interrupted: a row of fewer rounds says how many it has, "
                  "rows not reached are missing)" if interrupted else "")
               + "; whiskers: the rounds' lowest and highest ratio (loops take turns "
               "within a round).")
    fig.text(0.01, 0.005, textwrap.fill(caption, 160), fontsize=7, va="bottom",
             color="#444")
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    fig.savefig(path, dpi=130)
    plt.close(fig)
