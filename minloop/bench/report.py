"""What ``python -m minloop bench`` shows: progress, the table, notes, JSON, plot."""

from __future__ import annotations

import json
import statistics
import sys
import textwrap
import time

REF = "minloop"
OTHERS = ("asyncio", "uvloop", "rloop")  # the loops minloop's ratios are against
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


def si(value: float) -> str:
    """Three significant digits and a k/M/G suffix: 999.7k shows as 1M."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale * 0.9995:
            return f"{float(f'{value / scale:.3g}'):g}{suffix}"
    return f"{float(f'{value:.3g}'):g}"


def _median(cell: dict, key: str):
    return cell.get("median", {}).get(key) if cell.get("samples") else None


def ratios(entry: dict) -> dict:
    """minloop's median figure over each other loop's: above 1, minloop is faster."""
    cells = entry["cells"]
    ref = _median(cells[REF], "rate") if REF in cells else None
    out = {}
    for other in OTHERS:
        theirs = _median(cells[other], "rate") if other in cells else None
        if ref and theirs:
            out[other] = ref / theirs
    return out


def ok(results: dict) -> bool:
    """False if minloop failed or misbehaved on some row (n/a is not a failure)."""
    return not any(e["cells"][REF]["errors"] or e["cells"][REF]["problems"]
                   for e in results.values() if REF in e["cells"])


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
    if any(row.group == "net" for row in rows):
        lines.append(f"network rows: {settings.duration:g} s timed after {settings.warmup:g} s "
                     f"warm-up; {settings.pin.describe}")
    for n in names:
        if not probes[n]["available"]:
            lines.append(f"skipped: {n} ({probes[n]['reason']})")
    return "\n".join(lines) + "\n"


def _cell_text(cell: dict) -> str:
    value = _median(cell, "rate")
    if value is None:
        if cell.get("na"):
            return "n/a"
        return "FAILED" if cell["errors"] else "-"
    mark = " "
    if cell["errors"] or cell["problems"]:
        mark = "!"
    elif cell["spread"] is not None and cell["spread"] > NOISY:
        mark = "~"
    return si(value) + mark


def client_peak(entry: dict) -> tuple[float, str] | None:
    """The highest median load-generator CPU over the loops, and whose."""
    peaks = [(_median(c, "client_util"), name) for name, c in entry["cells"].items()
             if _median(c, "client_util") is not None]
    return max(peaks) if peaks else None


def table(results: dict, loop_names: list[str]) -> str:
    others = [n for n in OTHERS if n in loop_names] if REF in loop_names else []
    head = ["row", "unit"] + loop_names + [f"vs {n}" for n in others] + ["client CPU"]
    body = []
    for rid, entry in results.items():
        line = [rid, entry["row"]["unit"]]
        line += [_cell_text(entry["cells"][n]) for n in loop_names]
        line += [f"{entry['ratios'][n]:.2f}x" if n in entry["ratios"] else "-" for n in others]
        peak = client_peak(entry)
        if peak is None:
            line.append("")
        else:
            line.append(f"{peak[0]:.0%}" + (" sat" if peak[0] >= SATURATED else ""))
        body.append(line)
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]

    def fmt(cells):
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [fmt(head), "-" * len(fmt(head))]
    group = None
    for rid, line in zip(results, body):
        if group is not None and results[rid]["row"]["group"] != group:
            out.append("")
        group = results[rid]["row"]["group"]
        out.append(fmt(line))
    return "\n".join(out)


def notes(results: dict, loop_names: list[str], settings) -> str:
    out = []
    groups = {e["row"]["group"] for e in results.values()}
    if "core" in groups:
        out.append("core rows: operations per second of one loop-core workload (sizes: "
                   + ", ".join(f"{rid} {si(e['n'])}" for rid, e in results.items()
                               if "n" in e) + ").")
    if "net" in groups:
        out.append("net rows: round trips (HTTP requests) per second through a server on "
                   "the loop, measured by the load generator.")
    if REF in loop_names:
        out.append(f"vs X: {REF}'s figure over X's; above 1, {REF} is faster.")
    out.append(f"'~': rounds spread by more than {NOISY:.0%} (max-min over median); "
               "'!': some round failed or misbehaved (listed below); n/a: the loop cannot "
               "run that row.")
    loads = sorted(s["other_load"] for e in results.values() for c in e["cells"].values()
                   for s in c["samples"] if s.get("other_load") is not None)
    busy = bool(loads) and statistics.median(loads) > BUSY
    out += _load_generator_notes(results, settings, busy)
    if busy:
        out.append(f"WARNING: the machine was busy: other processes took a median "
                   f"{statistics.median(loads):.0%} (worst {loads[-1]:.0%}) of the two "
                   f"benchmark CPUs during the network runs; expect noise.")

    na = {}
    for rid, entry in results.items():
        for name, cell in entry["cells"].items():
            if cell["na"]:
                na.setdefault((name, cell["na"]), []).append(rid)
    if na:
        out.append("n/a:")
        for (name, reason), rids in na.items():
            out.append(textwrap.fill(f"{name}: {reason} [{', '.join(rids)}]",
                                     initial_indent="  ", subsequent_indent="    ", width=100))
    failures = []
    for rid, entry in results.items():
        for name, cell in entry["cells"].items():
            for kind, label in (("errors", "FAILED"), ("problems", "misbehaved")):
                # Rounds usually fail the same way: each distinct message once.
                seen: dict = {}
                for line in cell[kind]:
                    where, message = line.split(": ", 1)
                    seen.setdefault(message, []).append(where)
                for message, where in seen.items():
                    failures.append(f"  {rid} / {name}: {label} in {len(where)} of "
                                    f"{settings.rounds} rounds: {message}")
    if failures:
        out.append("failures and misbehaviour:")
        out += failures
    return "\n".join(out)


def _load_generator_notes(results: dict, settings, busy: bool = False) -> list[str]:
    net = {rid: e for rid, e in results.items() if e["row"]["group"] == "net"}
    peaks = {rid: client_peak(e) for rid, e in net.items()}
    peaks = {rid: p for rid, p in peaks.items() if p is not None}
    if not peaks:
        return []
    where = (f"pinned, {settings.pin.describe}" if settings.pin.client is not None
             else settings.pin.describe)
    lines = [f"load generator: its own process (non-blocking sockets on epoll, no event "
             f"loop; {where}); its CPU time was read at the edges of every timed window. "
             f"client CPU: its highest median over the loops, in % of one core."]
    saturated = {rid: p for rid, p in peaks.items() if p[0] >= SATURATED}
    worst_rid, (worst, who) = max(peaks.items(), key=lambda kv: kv[1][0])
    if not saturated:
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
              "understate how much faster the faster loops are.")
        fine = len(peaks) - len(saturated)
        if fine:
            lines.append(f"the other {fine} network row(s) stayed below {SATURATED:.0%}.")
    return lines


def write_json(path: str, machine: dict, probes: dict, settings, results: dict) -> None:
    from .. import __version__

    environment = dict(machine, minloop=__version__, loops=probes,
                       pinning=settings.pin.describe, quick=settings.quick,
                       rounds=settings.rounds, net_duration=settings.duration,
                       net_warmup=settings.warmup)
    rows = {}
    for rid, entry in results.items():
        rows[rid] = dict(entry, client_cpu_peak=(client_peak(entry) or (None,))[0])
    with open(path, "w") as f:
        json.dump({"environment": environment, "ref": REF, "rows": rows}, f, indent=2)


class PlotUnavailable(Exception):
    """matplotlib cannot be imported."""


def plot(path: str, results: dict, loop_names: list[str]) -> None:
    """A grouped bar chart of minloop's ratio against each other loop, per row."""
    try:
        import matplotlib
    except ImportError as exc:
        raise PlotUnavailable(str(exc) or "not installed") from None
    matplotlib.use("Agg")  # a file, no display needed
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    others = [n for n in OTHERS if n in loop_names]
    rids = [rid for rid, e in results.items() if e["ratios"]]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(rids) + 2), 4.8))
    width = 0.8 / max(1, len(others))
    for i, other in enumerate(others):
        xs = [j + (i - (len(others) - 1) / 2) * width for j in range(len(rids))]
        ys = [results[rid]["ratios"].get(other, 0.0) for rid in rids]
        ax.bar(xs, ys, width, label=f"vs {other}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    # Plain "2x" labels on the log axis, minor ticks included (ratios rarely
    # span a whole decade).
    label = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x")
    ax.yaxis.set_major_formatter(label)
    ax.yaxis.set_minor_formatter(label)
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_xticks(range(len(rids)))
    ax.set_xticklabels(rids, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel(f"{REF}'s speed over the other loop's (log)")
    ax.set_title(f"{REF} vs other event loops (above 1: {REF} faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
