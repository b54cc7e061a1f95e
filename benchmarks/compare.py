"""Side-by-side comparison of event loops on the micro workloads.

    python benchmarks/compare.py [--quick] [--rounds R] [--json FILE]
                                 [--loops asyncio,minloop,uvloop,rloop]
                                 [--workloads NAME|core|scale,...] [--require LOOP,...]
                                 [--timeout S]

The research tool around the bench's loop-core rows: any set of the
workloads in minloop/bench/workloads.py (a row each, named after the
workload), at their full size (a tenth with --quick) where
``python -m minloop bench`` runs the core rows at a quarter.  --workloads
core is README.md's "Loop core" table; scale adds 100k tasks, 200k held
timers and 100 parallel call_soon chains.  Every (workload, loop, round) is
measured in a fresh interpreter (minloop.bench.child), timing only the
workload itself, the loops taking turns within each round; the rounds,
medians, ratios and report are the bench's (minloop/bench/suite.py and
report.py): operations per second in the table, milliseconds and the
cyclic GC's collections per generation in the details.  Nothing is pinned.

Ratios are minloop's rate over the other loop's, i.e. the other loop's time
over minloop's: above 1 means minloop is faster.

Exit status: 0 on success; 1 if minloop crashed or misbehaved on any
workload; 2 if a loop named in --require is unavailable.  Other loops'
failures are reported but do not change the status, since we do not own them.
"""

from __future__ import annotations

import argparse
import os
import sys

# An in-place build of minloop (setup.py build_ext --inplace) lives in the
# repository root, which is not on sys.path when a script in benchmarks/ runs.
# Appended, not prepended: an installed minloop still wins over the source tree.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import loops, procs, suite, workloads  # noqa: E402

QUICK_DIVISOR = 10  # --quick runs each workload at a tenth of its size


def rows_of(names: list[str], quick: bool) -> list[suite.Row]:
    """A core or scale row per workload, of its full (or --quick) size."""
    rows = []
    for name in names:
        w = workloads.WORKLOADS[name]
        n = max(w.n // QUICK_DIVISOR, w.smoke_n) if quick else w.n
        group = "scale" if name in workloads.SCALE else "core"
        rows.append(suite.Row(name, group, w.doc, quick, workload=name, n=n))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Compare event loops side by side, one fresh process per run.")
    parser.add_argument("--quick", action="store_true",
                        help=f"1/{QUICK_DIVISOR} sizes and 3 rounds (well under a minute)")
    parser.add_argument("--rounds", type=int, help="rounds per loop (default 5, or 3 with --quick)")
    parser.add_argument("--json", metavar="FILE",
                        help="also write every round's figures as JSON (the bench's --json)")
    parser.add_argument("--loops", default=",".join(loops.NAMES),
                        help="comma-separated loops, in run order (default: %(default)s)")
    parser.add_argument("--workloads", default="core,scale",
                        help="comma-separated workloads or groups: core (README.md's "
                             "table), scale (default: %(default)s)")
    parser.add_argument("--require", default="",
                        help="comma-separated loops that must be available (exit 2 if not)")
    parser.add_argument("--timeout", type=float, default=suite.CHILD_TIMEOUT,
                        help="seconds before a child run is abandoned (default: %(default)s)")
    args = parser.parse_args(argv)

    names = suite.parse_loops(parser, args.loops)
    required = suite.parse_loops(parser, args.require, "--require")
    wanted = [w.strip() for w in args.workloads.split(",") if w.strip()]
    expanded = [name for w in wanted for name in workloads.GROUPS.get(w, (w,))]
    unknown = [w for w in expanded if w not in workloads.WORKLOADS]
    if unknown or not expanded:
        parser.error(f"unknown workload: {', '.join(unknown) or '(none)'}; known: "
                     f"{', '.join(workloads.WORKLOADS)}")
    rounds = args.rounds or (3 if args.quick else 5)
    if rounds < 1:
        parser.error("--rounds must be at least 1")
    settings = suite.Settings(args.quick, rounds, 0.0, 0.0,
                              procs.Pinning(False, "compare.py does not pin"),
                              timeout=args.timeout)
    return suite.run_script(rows_of(list(dict.fromkeys(expanded)), args.quick), names,
                            settings, required=required, json_path=args.json)


if __name__ == "__main__":
    sys.exit(main())
