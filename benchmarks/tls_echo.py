"""TLS echo: round trips per second through each loop's TLS server.

    python benchmarks/tls_echo.py [--quick] [--rounds N] [--duration S]
                                  [--warmup S] [--sizes 1024,65536]
                                  [--conns 1,16] [--loops asyncio,minloop,uvloop,rloop]
                                  [--no-pin] [--json FILE]

The rows of ``python -m minloop bench --only other`` named tls-*, at the
sizes and connection counts given here; the server, the load generator and
the measuring are minloop/bench/tls.py's (its docstring says how they
work), the rounds, medians and report the bench's own.  rloop has no TLS:
n/a.  Ratios are minloop's rate over the other loop's: above 1, minloop is
faster.
"""

from __future__ import annotations

import argparse
import os
import sys

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import loops, procs, suite  # noqa: E402

KiB = 1024


def row(size: int, conns: int) -> suite.Row:
    rid = f"tls-{size // KiB}k-c{conns}" if size % KiB == 0 else f"tls-{size}b-c{conns}"
    return suite.Row(rid, "other", f"TLS echo, {conns} connection(s), {size} bytes", False,
                     kind="tls", conns=conns, size=size)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 rounds of 0.3 s (a smoke run)")
    parser.add_argument("--rounds", type=int, help="rounds (default 4, or 2 with --quick)")
    parser.add_argument("--duration", type=float,
                        help="timed seconds per run (default 1.0, or 0.3 with --quick)")
    parser.add_argument("--warmup", type=float,
                        help="untimed seconds first (default 0.2, or 0.1 with --quick)")
    parser.add_argument("--sizes", default="1024,65536", help="message sizes in bytes")
    parser.add_argument("--conns", default="1,16", help="connection counts")
    parser.add_argument("--loops", default=",".join(loops.NAMES),
                        help="comma-separated loops, in run order (default: %(default)s)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin to CPUs")
    parser.add_argument("--json", metavar="FILE", help="also write every round's figures as JSON (the bench's --json)")
    args = parser.parse_args(argv)

    names = suite.parse_loops(parser, args.loops)
    settings = suite.Settings(
        quick=False, rounds=args.rounds or (2 if args.quick else 4),
        duration=args.duration or (0.3 if args.quick else 1.0),
        warmup=args.warmup if args.warmup is not None else (0.1 if args.quick else 0.2),
        pin=procs.Pinning(not args.no_pin))
    rows = [row(int(size), int(conns)) for size in args.sizes.split(",")
            for conns in args.conns.split(",")]
    return suite.run_script(rows, names, settings, json_path=args.json)

if __name__ == "__main__":
    sys.exit(main())
