"""Side-by-side comparison of event loops on the micro workloads.

    python benchmarks/compare.py [--only NAME|core|scale,...] [--quick] [--rounds R]
                                 [--loops asyncio,minloop,...] [--require LOOP,...]
                                 [--json FILE] [--plot FILE.png] [--timeout S] [--list]

The research tool around the bench's loop-core rows: any set of the
workloads in minloop/bench/workloads.py (a row each, named after the
workload), at their full size (a tenth with --quick, which runs the quick
core rows) where ``python -m minloop bench`` runs the core rows at a
quarter.  --only core is README.md's "Loop core" table; scale adds 100k
tasks, 200k held timers and 100 parallel call_soon chains.  The options are
the bench's (minloop/bench/options.py).  Every (workload, loop, round) is
measured in a fresh interpreter (minloop.bench.child), timing only the
workload itself, the loops taking turns within each round; the rounds,
medians, ratios and report are the bench's (minloop/bench/runner.py and
report.py): operations per second in the table, milliseconds and the
cyclic GC's collections per generation in the details.  Nothing is pinned.

Ratios are minloop's rate over the other loop's, i.e. the other loop's time
over minloop's: above 1 means minloop is faster.

Exit status: 0 on success; 1 if minloop crashed or misbehaved on any
workload; 2 if a loop named in --require is unavailable.  Other loops'
failures are reported but do not change the status, since we do not own them.
"""

from __future__ import annotations

import os
import sys

# An in-place build of minloop (setup.py build_ext --inplace) lives in the
# repository root, which is not on sys.path when a script in benchmarks/ runs.
# Appended, not prepended: an installed minloop still wins over the source tree.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import options, procs, rows, workloads  # noqa: E402

# Without --quick: every workload whole, 5 rounds.
FULL = options.Profile(rounds=5)


def rows_of(names: list[str], quick: bool) -> list[rows.Row]:
    """A core or scale row per workload, of its full (or --quick) size."""
    out = []
    for name in names:
        w = workloads.WORKLOADS[name]
        n = max(w.n // rows.QUICK_DIVISOR, w.smoke_n) if quick else w.n
        group = "scale" if name in workloads.SCALE else "core"
        out.append(rows.Row(name, group, w.doc, name in rows.QUICK_ROWS, workload=name,
                            n=n))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = options.Parser(
        description="Compare event loops side by side, one fresh process per run.")
    command = options.Command(parser, FULL, timed=False, pinned=False,
                              only_help="workloads, groups (core: README.md's table, "
                                        "scale)")
    args = parser.parse_args(argv)
    table = rows_of(list(workloads.WORKLOADS), args.quick)
    groups = {g: list(names) for g, names in workloads.GROUPS.items()}
    chosen = command.select(args, table, groups)
    return command.run(args, chosen, pin=procs.Pinning(False, "compare.py does not pin"))


if __name__ == "__main__":
    sys.exit(options.quiet_on_broken_pipe(main))
