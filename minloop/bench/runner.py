"""The run every bench entry point shares: rounds, medians, report, JSON, plot.

run_script() is the one runner behind ``python -m minloop bench`` (cli.py)
and every script in benchmarks/: it probes the loops, prints the header,
measures the rows with the loops taking turns within each round (so slow
drift of the machine falls on all of them alike; each figure is the median
over rounds), then prints the report and writes the JSON and the plot.  A
script brings its own rows and, where it measures differently, its own
measure(row, loop, settings).
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from dataclasses import asdict

from . import procs, report
from .measure import measure_row
from .settings import Settings
from .rows import Row, core_size, other_size


def summarise(cell: dict) -> None:
    """Medians of the samples' figures, and the rounds' spread of the rate."""
    samples = cell["samples"]
    cell["median"] = {}
    for key in ("rate", "seconds", "client_util", "server_util", "server_us",
                "server_user_us", "other_load",
                "cpu", "cpu_us", "mb_s", "p50", "p99"):
        values = [s[key] for s in samples if s.get(key) is not None]
        cell["median"][key] = statistics.median(values) if values else None
    # Collections per generation, and per-phase times: medians of each part.
    for key in ("gc", "gc_fire"):
        lists = [s[key] for s in samples if s.get(key) is not None]
        if lists:
            cell["median"][key] = [statistics.median(g) for g in zip(*lists)]
    phases = [s["phases_ms"] for s in samples if s.get("phases_ms")]
    if phases:
        cell["median"]["phases_ms"] = {k: statistics.median(p[k] for p in phases)
                                       for k in phases[0]}
    cell["spread"] = spread([s["rate"] for s in samples])
    _pool_user_cpu(cell)


def spread(values: list[float]) -> float | None:
    """The rounds' spread of a figure: (max - min) / median; None without any."""
    return (max(values) - min(values)) / statistics.median(values) if values else None


# /proc/PID/stat counts user and system time in clock ticks of 10 ms
# (USER_HZ); each window's figure is the difference of two truncated readings.
USER_HZ_S = 0.01


def _pool_user_cpu(cell: dict) -> None:
    """The server's user CPU per round trip over all rounds at once (the sum
    of the windows' user CPU over the sum of their round trips), and how far
    off it may be (user_err: two standard deviations, relative).

    The kernel does not time user and system apart: it charges each of its
    clock ticks (procs.tick_hz()) to what the tick interrupted and splits the
    exact run time in that proportion, and /proc reports the result in 10 ms
    units.  Over one 0.15 s window of a busy machine a server may run 20 ms:
    its user figure is then 0, 10 or 20 ms (medians of such rounds went from
    8.32 to 0.80 us between two runs).  Pooled, both errors shrink with the
    run time the windows add up to."""
    pooled = [s for s in cell["samples"] if s.get("server_user_cpu") is not None
              and s["server_user_cpu"] >= 0 and s.get("server_cpu") and s.get("round_trips")]
    if not pooled:
        return
    user = sum(s["server_user_cpu"] for s in pooled)
    run = sum(s["server_cpu"] for s in pooled)
    trips = sum(s["round_trips"] for s in pooled)
    cell["median"]["server_user_us"] = user / trips * 1e6
    share = min(1.0, max(0.0, user / run))
    hz, _ = procs.tick_hz()
    # The user ticks of n = run * hz are binomial; each window's difference
    # of two truncations is off by up to one unit either way (variance 1/6 of it).
    variance = share * (1 - share) * run / hz + len(pooled) * USER_HZ_S ** 2 / 6
    cell["user_err"] = 2 * variance ** 0.5 / user if user > 0 else None


def _finish_row(row: Row, cells: dict, settings: Settings) -> dict:
    for cell in cells.values():
        summarise(cell)
    entry = {"row": dict(asdict(row), unit=row.unit), "cells": cells}
    if row.group in ("core", "scale"):
        entry["n"] = core_size(row, settings.quick)
    elif row.group == "other" and row.kind != "tls":
        entry["n"] = other_size(row, settings.quick)
    entry["ratios"] = report.ratios(entry)
    entry["cpu_ratios"] = report.ratios(entry, "server_us", lower_better=True)
    entry["ratio_ranges"] = report.ratio_ranges(entry)
    return entry


def run_rows(rows: list[Row], loop_names: list[str], settings: Settings,
             progress: report.Progress, results: dict, measure=measure_row,
             rounds_of: dict | None = None, rotate: bool = False) -> dict:
    """Measure rows into results (row id -> entry), loops taking turns within
    each round.  Interrupted (KeyboardInterrupt), results keep every finished
    row and the finished rounds of the row under way, and the interrupt
    propagates.  measure(row, name, settings): one run (a script's own
    measuring: benchmarks/net_compare.py's C load generator); rounds_of:
    name -> the rounds a column runs in, where not all (a baseline); rotate:
    round r starts with the r-th loop (a loop that always runs first or
    right after another does not always meet the same state of the machine)."""
    rounds_of = rounds_of or {}
    for row in rows:
        # runs: the rounds a cell finished (a figure or an error) of the
        # rounds planned for it; fewer only if the run was interrupted.
        cells = {name: {"samples": [], "errors": [], "problems": [], "na": None, "runs": 0,
                        "planned": len(rounds_of[name]) if name in rounds_of
                        else settings.rounds}
                 for name in loop_names}
        if row.needs and importlib.util.find_spec(row.needs) is None:
            for cell in cells.values():
                cell["na"] = f"{row.needs} is not installed"
        try:
            for round_ in range(1, settings.rounds + 1):
                shift = (round_ - 1) % len(loop_names) if rotate and loop_names else 0
                for name in loop_names[shift:] + loop_names[:shift]:
                    if name in rounds_of and round_ not in rounds_of[name]:
                        continue
                    cell = cells[name]
                    if cell["na"]:  # it will not become available next round
                        progress.step()
                        continue
                    progress.show(row.id, round_, settings.rounds, name)
                    answer = measure(row, name, settings)
                    progress.step()
                    cell["runs"] += 1
                    if "na" in answer:
                        cell["na"] = answer["na"]
                    elif "error" in answer:
                        cell["errors"].append(f"round {round_}: {answer['error']}")
                    else:
                        answer["round"] = round_
                        cell["samples"].append(answer)
                        cell["problems"] += [f"round {round_}: {p}"
                                             for p in answer["problems"]]
        except KeyboardInterrupt:
            if any(c["samples"] for c in cells.values()):
                results[row.id] = _finish_row(row, cells, settings)
            raise
        results[row.id] = _finish_row(row, cells, settings)
    return results


def runs(rows: list[Row], names: list[str], rounds: int, rounds_of: dict | None = None
         ) -> int:
    """How many measurements run_rows makes (the progress line's total)."""
    rounds_of = rounds_of or {}
    per_row = sum(len(rounds_of[n]) if n in rounds_of else rounds for n in names)
    return len(rows) * per_row


def run_script(rows: list[Row], loop_names: list[str], settings: Settings, *,
               required: list[str] = (), measure=measure_row, extra: list[str] = (),
               rounds_of: dict | None = None, header: list[str] = (),
               notes: list[str] = (), json_path: str | None = None,
               plot_path: str | None = None, rotate: bool = False,
               after=None) -> int:
    """The whole run, for ``python -m minloop bench`` and every script in
    benchmarks/: probe the loops, print the header, measure the rows (loops
    taking turns within each round, progress on stderr), print the report,
    write the JSON and the plot.  extra: columns that are not loops (a
    baseline server), measured by measure after the loops; header, notes:
    the script's own lines; rotate: run_rows'; after(results, columns): the
    script's own part of the report, called after the bench's and before
    the JSON is written (it may add to the rows' entries).  The exit status: 0; 1 if minloop failed or
    misbehaved on some row; 2 if a loop in required is missing; 130 if
    interrupted (the finished rounds are reported)."""
    machine = procs.machine_info()
    probes = procs.probe_loops(list(dict.fromkeys([*loop_names, *required])),
                               settings.timeout)
    available = [n for n in loop_names if probes[n]["available"]]
    missing = [n for n in required if not probes[n]["available"]]
    if missing:
        print(f"required loop(s) unavailable: {', '.join(missing)}", file=sys.stderr)
        return 2
    print(report.header(machine, probes, loop_names, settings, rows)
          + "".join(report.fill(line) + "\n" for line in header), flush=True)
    if not available:
        print("no loop can run here", file=sys.stderr)
        return 1
    columns = available + list(extra)
    progress = report.Progress(runs(rows, columns, settings.rounds, rounds_of))
    results: dict = {}
    interrupted = False
    try:
        run_rows(rows, columns, settings, progress, results, measure, rounds_of, rotate)
    except KeyboardInterrupt:
        interrupted = True
        progress.interrupted(len(results))
    else:
        progress.finish()
    if not results:
        return 130 if interrupted else 1

    print_report(results, columns, settings,
                 progress if interrupted else None)
    for line in notes:
        print(report.fill(line))
    if after is not None:
        after(results, columns)
    status = 130 if interrupted else (0 if report.ok(results) else 1)
    if json_path:
        report.write_json(json_path, machine, probes, settings, results,
                          interrupted=interrupted)
        print(f"\nwrote {json_path}")
    if plot_path:
        versions = {n: probes[n]["version"] for n in available}
        try:
            report.plot(plot_path, results, available,
                        dict(machine, rounds=settings.rounds, versions=versions,
                             interrupted=interrupted))
        except Exception as exc:  # checked before measuring; this is rarer (disk full)
            print(f"minloop bench: --plot {plot_path}: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            return 1
        print(f"wrote {plot_path}")
    return status


# The summary's subsets besides the groups: README.md's networking table's
# geometric mean covers its TCP echo rows (one message in flight or
# pipelined), not UDP, Unix, HTTP or the thousands of connections.
SUMMARY_SUBSETS = {
    "tcp echo": lambda rid, entry: (entry["row"]["group"] == "net"
                                    and rid.startswith(("tcp-", "pipe-"))
                                    and entry["row"]["conns"] < 1_000),
}


def print_report(results: dict, available: list[str], settings: Settings,
                 interrupted: report.Progress | None = None) -> None:
    """The table, the details, the notes and the summary, as the bench prints
    them; after an interrupt (the progress it stopped at), a line saying so
    first."""
    if interrupted is not None:
        print(report.interrupted_line(results, interrupted.done, interrupted.total))
        print()
    print(report.table(results, available))
    for part in (report.details(results, available),
                 report.notes(results, available, settings),
                 report.summary(results, available, SUMMARY_SUBSETS)):
        if part:
            print()
            print(part)
