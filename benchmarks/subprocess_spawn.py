"""Subprocess spawn + wait: processes per second through create_subprocess_exec.

Two rows, both starting `true` (stdio to /dev/null unless --pipes):
  sequential  -- one at a time: spawn, wait, next;
  concurrent  -- C at once, N in all: asyncio.gather over batches of C.

    python benchmarks/subprocess_spawn.py [--n 300] [--concurrency 50] [--pipes]
                                          [--only ROWS] [--quick] [--rounds 5]
                                          [--loops asyncio,minloop,...]

The rows of ``python -m minloop bench --only other`` named spawn-*, at the
sizes given here; the measuring is minloop/bench/spawn.py's (a fresh
interpreter per run), the rounds, medians, report and options the bench's
own (--quick: a fifth of --n): the
table gives processes per second (wall clock), the details the parent's
CPU time per process (the steadier figure on a busy machine).
"""

from __future__ import annotations

import os
import sys

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import options, rows  # noqa: E402

# Without --quick: 5 rounds.
FULL = options.Profile(rounds=5)


def count(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def main(argv: list[str] | None = None) -> int:
    ap = options.Parser(description=__doc__.split("\n\n")[0])
    # Not pinned: the spawned processes would inherit the CPU (measure.py).
    command = options.Command(ap, FULL, timed=False, pinned=False,
                              only_help="of the two rows (sequential, at<C>)")
    ap.add_argument("--n", type=int, default=300, help="processes per run")
    ap.add_argument("--concurrency", type=int, default=50,
                    help="processes at once in the concurrent row")
    ap.add_argument("--pipes", action="store_true",
                    help="stdin/stdout/stderr as pipes (communicate())")
    args = ap.parse_args(argv)
    if args.n < 1 or args.concurrency < 1:
        ap.error("--n and --concurrency must be at least 1")

    stdio = "pipes" if args.pipes else "/dev/null"
    suffix = "-pipes" if args.pipes else ""
    mode = "pipes" if args.pipes else "echo"
    table = [rows.Row(f"spawn-{count(args.n)}-sequential{suffix}", "other",
                      f"{args.n} spawns one after the other, stdio {stdio}", True,
                      kind="spawn", n=args.n, per="processes", mode=mode),
             rows.Row(f"spawn-{count(args.n)}-at{args.concurrency}{suffix}", "other",
                      f"{args.n} spawns, {args.concurrency} at once, stdio {stdio}", True,
                      kind="spawn", n=args.n, at_once=args.concurrency, per="processes",
                      mode=mode)]
    return command.run(args, command.select(args, table))


if __name__ == "__main__":
    sys.exit(options.quiet_on_broken_pipe(main))
