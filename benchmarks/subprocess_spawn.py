"""Subprocess spawn + wait: processes per second through create_subprocess_exec.

Two rows, both starting `true` (stdio to /dev/null unless --pipes):
  sequential  -- one at a time: spawn, wait, next;
  concurrent  -- C at once, N in all: asyncio.gather over batches of C.

    python benchmarks/subprocess_spawn.py [--rounds 5] [--n 300]
                                          [--concurrency 50] [--pipes]
                                          [--loops asyncio,minloop,uvloop]

The rows of ``python -m minloop bench --only other`` named spawn-*, at the
sizes given here; the measuring is minloop/bench/spawn.py's (a fresh
interpreter per run), the rounds, medians and report the bench's own: the
table gives processes per second (wall clock), the details the parent's
CPU time per process (the steadier figure on a busy machine).
"""

from __future__ import annotations

import argparse
import os
import sys

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import procs, suite  # noqa: E402


def count(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--pipes", action="store_true",
                    help="stdin/stdout/stderr as pipes (communicate())")
    ap.add_argument("--loops", default="asyncio,minloop,uvloop")
    args = ap.parse_args(argv)
    if args.n < 1 or args.concurrency < 1 or args.rounds < 1:
        ap.error("--n, --concurrency and --rounds must be at least 1")

    names = suite.parse_loops(ap, args.loops)
    stdio = "pipes" if args.pipes else "/dev/null"
    suffix = "-pipes" if args.pipes else ""
    rows = [suite.Row(f"spawn-{count(args.n)}-sequential{suffix}", "other",
                      f"{args.n} spawns one after the other, stdio {stdio}", False,
                      kind="spawn", n=args.n, per="processes",
                      mode="pipes" if args.pipes else "echo"),
            suite.Row(f"spawn-{count(args.n)}-at{args.concurrency}{suffix}", "other",
                      f"{args.n} spawns, {args.concurrency} at once, stdio {stdio}", False,
                      kind="spawn", n=args.n, at_once=args.concurrency, per="processes",
                      mode="pipes" if args.pipes else "echo")]
    settings = suite.Settings(False, args.rounds, 0.0, 0.0, procs.Pinning())
    return suite.run_script(rows, names, settings)


if __name__ == "__main__":
    sys.exit(main())
