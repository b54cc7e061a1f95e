"""Side-by-side comparison of event loops on the micro workloads.

    python benchmarks/compare.py [--quick] [--rounds R] [--json FILE]
                                 [--loops asyncio,minloop,uvloop,rloop]
                                 [--workloads NAME|core|scale,...] [--require LOOP,...]

Every (workload, loop, round) is measured in a fresh interpreter
(minloop.bench.child), timing only the workload itself.  The workloads and the
child are the package's (minloop/bench/), the same ones ``python -m minloop
bench`` runs; this script is the research tool around them (any workload set,
any reference loop, milliseconds per run).  --workloads core is README.md's
"Loop core" table; scale adds 100k tasks, 200k held timers and 100 parallel
call_soon chains, with the collections of the cyclic GC per generation
printed under the table.  Within a round the loops run one after the
other, so slow drift of the machine (thermal, other tenants) is shared by all
loops instead of falling on whichever ran last.  The table shows medians.

Ratios are other loop's time / reference loop's time (the reference is minloop
unless --ref says otherwise): above 1 means the reference is faster.

Exit status: 0 on success; 1 if the reference loop crashed or misbehaved on
any workload; 2 if a loop named in --require is unavailable.  Other loops'
failures are reported but do not change the status, since we do not own them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import textwrap

# An in-place build of minloop (setup.py build_ext --inplace) lives in the
# repository root, which is not on sys.path when a script in benchmarks/ runs.
# Appended, not prepended: an installed minloop still wins over the source tree.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import loops, procs, report, workloads  # noqa: E402
from minloop.bench.procs import machine_info, probe_loops  # noqa: E402,F401
from minloop.bench.report import Progress  # noqa: E402,F401

QUICK_DIVISOR = 10  # --quick runs each workload at a tenth of its size
NOISY = 0.10  # spread (max - min) / median above which a cell is flagged


# ---------------------------------------------------------------------------
# Child processes
# ---------------------------------------------------------------------------


def _child(args: list[str], timeout: float) -> dict:
    """One run of minloop.bench.child: its JSON answer or {"error": ...}."""
    return procs.run_json(procs.module_command("minloop.bench.child", *args), timeout)


_si = report.si


def render_table(results: dict, loop_names: list[str], ref: str) -> str:
    """The side-by-side table: per loop, median ms and ops/s; then ratios."""
    others = [name for name in loop_names if name != ref] if ref in loop_names else []
    rows = []
    for wname, entry in results.items():
        row = [wname, _si(entry["n"])]
        medians = {}
        for name in loop_names:
            cell = entry["loops"][name]
            if cell["median"] is None:
                row += ["FAILED" if cell["errors"] else "-", ""]
                continue
            medians[name] = cell["median"]
            # The mark takes a column of its own so the digits stay aligned.
            mark = "!" if cell["problems"] or cell["errors"] else " "
            row += [f"{cell['median'] * 1e3:.1f}{mark}", _si(entry["n"] / cell["median"])]
        for name in others:
            if name in medians and ref in medians:
                row.append(f"{medians[name] / medians[ref]:.2f}x")
            else:
                row.append("-")
        rows.append(row)

    # Column groups: (title, subtitles); a loop's name spans its ms and ops/s.
    groups = [("workload", [""]), ("n", [""])]
    groups += [(name, ["ms", "ops/s"]) for name in loop_names]
    groups += [(f"vs {name}", [""]) for name in others]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
    col = 0
    for title, subs in groups:
        for i, sub in enumerate(subs):
            widths[col + i] = max(widths[col + i], len(sub))
        span = sum(widths[col:col + len(subs)]) + 2 * (len(subs) - 1)
        if len(title) > span:  # widen the group's last column to fit its title
            widths[col + len(subs) - 1] += len(title) - span
        col += len(subs)

    def line(cells, widths):
        first = cells[0].ljust(widths[0])
        return "  ".join([first] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]).rstrip()

    titles, title_widths, subtitles = [], [], []
    col = 0
    for title, subs in groups:
        span = sum(widths[col:col + len(subs)]) + 2 * (len(subs) - 1)
        titles.append(title.center(span) if len(subs) > 1 else title)
        title_widths.append(span)
        subtitles += subs
        col += len(subs)
    out = [line(titles, title_widths), line(subtitles, widths)]
    out.append("-" * max(len(out[0]), len(out[1])))
    out += [line(r, widths) for r in rows]
    return "\n".join(out)


def render_gc_table(results: dict, loop_names: list[str]) -> str:
    """Collections of the cyclic GC during each timed run, generations 0/1/2
    (medians), for the workloads where any loop caused some."""
    rows = []
    for wname, entry in results.items():
        row, any_ = [wname], False
        for name in loop_names:
            counts = [g for g in entry["loops"][name]["gc"] if g]
            if not counts:
                row.append("-")
                continue
            medians = [statistics.median(c) for c in zip(*counts)]
            any_ = any_ or any(medians)
            row.append("/".join(f"{m:g}" for m in medians))
        if any_:
            rows.append(row)
    if not rows:
        return ""
    rows.insert(0, ["GC collections (gen 0/1/2)"] + loop_names)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in
                                                           zip(r[1:], widths[1:])]).rstrip()
                     for r in rows)


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def _names(parser, text: str, known, what: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in known]
    if unknown:
        parser.error(f"unknown {what}: {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Compare event loops side by side, one fresh process per run.")
    parser.add_argument("--quick", action="store_true",
                        help=f"1/{QUICK_DIVISOR} sizes and 3 rounds (well under a minute)")
    parser.add_argument("--rounds", type=int, help="rounds per loop (default 5, or 3 with --quick)")
    parser.add_argument("--json", metavar="FILE", help="also write all samples as JSON")
    parser.add_argument("--loops", default=",".join(loops.NAMES),
                        help="comma-separated loops, in run order (default: %(default)s)")
    parser.add_argument("--workloads", default="core,scale",
                        help="comma-separated workloads or groups: core (README.md's "
                             "table), scale (default: %(default)s)")
    parser.add_argument("--ref", default="minloop", help="loop the ratios compare against")
    parser.add_argument("--require", default="",
                        help="comma-separated loops that must be available (exit 2 if not)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds before a child run is abandoned (default: %(default)s)")
    args = parser.parse_args(argv)

    loop_names = _names(parser, args.loops, loops.NAMES, "loop")
    expanded = ",".join(",".join(workloads.GROUPS.get(w.strip(), (w.strip(),)))
                        for w in args.workloads.split(","))
    workload_names = _names(parser, expanded, workloads.WORKLOADS, "workload")
    required = _names(parser, args.require, loops.NAMES, "loop")
    rounds = args.rounds or (3 if args.quick else 5)
    if rounds < 1:
        parser.error("--rounds must be at least 1")

    machine = machine_info()
    probes = probe_loops(sorted(set(loop_names) | set(required), key=loops.NAMES.index),
                         args.timeout)
    available = [name for name in loop_names if probes[name]["available"]]

    print(f"event loop micro benchmarks: median of {rounds} rounds, one fresh process per run"
          + (" (--quick sizes)" if args.quick else ""))
    cpus = machine["cpu_count"]
    if machine.get("cpus_usable", cpus) != cpus:
        cpus = f"{cpus} ({machine['cpus_usable']} usable)"
    print(f"python: {machine['python']} on {machine['platform']}")
    print(f"cpu: {machine['cpu']}, {cpus} CPUs")
    print("loops: " + ", ".join(f"{name} {probes[name]['version']}" for name in available))
    for name in loop_names:
        if not probes[name]["available"]:
            print(f"skipped: {name} ({probes[name]['reason']})")
    print(flush=True)

    missing = [name for name in required if not probes[name]["available"]]
    if missing:
        print(f"required loop(s) unavailable: {', '.join(missing)}", file=sys.stderr)
        return 2
    if not available:
        print("no loop available", file=sys.stderr)
        return 2

    results = {}
    progress = Progress(len(workload_names) * rounds * len(available))
    for wname in workload_names:
        workload = workloads.WORKLOADS[wname]
        n = max(workload.n // QUICK_DIVISOR, workload.smoke_n) if args.quick else workload.n
        cells = {name: {"samples": [], "problems": [], "errors": [], "gc": []}
                 for name in available}
        for round_ in range(1, rounds + 1):
            for name in available:
                progress.show(wname, round_, rounds, name)
                answer = _child([wname, name, str(n)], args.timeout)
                progress.step()
                if "error" in answer:
                    cells[name]["errors"].append(f"round {round_}: {answer['error']}")
                    continue
                cells[name]["samples"].append(answer["seconds"])
                cells[name]["gc"].append(answer.get("gc"))
                if answer["problem"]:
                    cells[name]["problems"].append(f"round {round_}: {answer['problem']}")
        for cell in cells.values():
            samples = cell["samples"]
            cell["median"] = statistics.median(samples) if samples else None
            cell["spread"] = ((max(samples) - min(samples)) / cell["median"]
                              if samples else None)
        results[wname] = {"n": n, "doc": workload.doc, "loops": cells}
    progress.finish()

    print(render_table(results, available, args.ref))
    gc_table = render_gc_table(results, available)
    if gc_table:
        print()
        print(gc_table)
    print()
    if args.ref in available:
        print(f"vs X: X's time over {args.ref}'s; above 1 means {args.ref} is faster.")
    if any(c["problems"] or c["errors"] for e in results.values() for c in e["loops"].values()):
        print("'!': some rounds failed or misbehaved (see below).")

    noisy = [f"{w}/{name} {c['spread']:.0%}" for w, e in results.items()
             for name, c in e["loops"].items() if c["spread"] and c["spread"] > NOISY]
    if noisy:
        print(f"noisy (max-min over median > {NOISY:.0%}):")
        print(textwrap.fill(", ".join(noisy), initial_indent="  ", subsequent_indent="  "))

    status = 0
    reported = False
    for wname, entry in results.items():
        for name, cell in entry["loops"].items():
            for kind in ("errors", "problems"):
                # Rounds usually fail the same way; say each distinct failure once.
                seen = {}
                for line in cell[kind]:
                    seen.setdefault(line.split(": ", 1)[1], []).append(line.split(":")[0])
                for message, where in seen.items():
                    if not reported:
                        print("\nfailures and misbehaviour:")
                        reported = True
                    label = "FAILED" if kind == "errors" else "misbehaved"
                    print(f"  {wname} / {name}: {label} in {len(where)} of {rounds} rounds: "
                          f"{message}")
                    if name == args.ref:
                        status = 1

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "rounds": rounds, "quick": args.quick,
                       "ref": args.ref, "loops": probes, "results": results}, f, indent=2)
        print(f"\nwrote {args.json}")
    return status


if __name__ == "__main__":
    sys.exit(main())
