"""TLS echo: round trips per second through each loop's TLS server.

    python benchmarks/tls_echo.py [--sizes 1024,65536] [--conns 1,16] [--only ROWS]
                                  [--quick] [--rounds N] [--duration S] [--warmup S]
                                  [--loops asyncio,minloop,...] [--no-pin] [--json FILE]

The rows of ``python -m minloop bench --only other`` named tls-*, at the
sizes and connection counts given here; the server, the load generator and
the measuring are minloop/bench/tls.py's (its docstring says how they
work), the rounds, medians, report and options the bench's own.  rloop has no TLS:
n/a.  Ratios are minloop's rate over the other loop's: above 1, minloop is
faster.
"""

from __future__ import annotations

import os
import sys

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import options, rows  # noqa: E402

KiB = 1024
# Without --quick: 4 rounds of 1 s after 0.2 s of warm-up.
FULL = options.Profile(rounds=4, duration=1.0, warmup=0.2)


def row(size: int, conns: int) -> rows.Row:
    rid = f"tls-{size // KiB}k-c{conns}" if size % KiB == 0 else f"tls-{size}b-c{conns}"
    return rows.Row(rid, "other", f"TLS echo, {conns} connection(s), {size} bytes", True,
                    kind="tls", conns=conns, size=size)


def main(argv: list[str] | None = None) -> int:
    parser = options.Parser(description=__doc__.split("\n\n")[0])
    command = options.Command(parser, FULL, only_help="of the rows --sizes and --conns make")
    parser.add_argument("--sizes", default="1024,65536", help="message sizes in bytes")
    parser.add_argument("--conns", default="1,16", help="connection counts")
    args = parser.parse_args(argv)
    try:
        table = [row(int(size), int(conns)) for size in args.sizes.split(",")
                 for conns in args.conns.split(",")]
    except ValueError:
        parser.error("--sizes and --conns take comma-separated numbers")
    return command.run(args, command.select(args, table))


if __name__ == "__main__":
    sys.exit(options.quiet_on_broken_pipe(main))
