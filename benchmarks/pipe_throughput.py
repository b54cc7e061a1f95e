"""Bytes per second through an os.pipe(), pipe transport to pipe transport.

    python benchmarks/pipe_throughput.py [--mb 100] [--chunk-kb 64] [--quick]
                                         [--rounds 5] [--loops asyncio,minloop,...]

The row ospipe-100m-64k of ``python -m minloop bench --only other``, at the
sizes given here; the transfer and the measuring are minloop/bench/pipes.py's
(one loop holds both ends: connect_write_pipe sends in --chunk-kb writes,
honouring pause_writing/resume_writing, connect_read_pipe counts until EOF;
a fresh interpreter per run), the rounds, medians, report and options the
bench's own (--quick: a fifth of --mb): MiB/s, and minloop's speed over each other loop's (above 1: minloop is
faster).
"""

from __future__ import annotations

import os
import sys

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import options, pipes, rows  # noqa: E402

# Without --quick: 5 rounds.
FULL = options.Profile(rounds=5)


def main(argv: list[str] | None = None) -> int:
    parser = options.Parser(description=__doc__.split("\n\n")[0])
    command = options.Command(parser, FULL, timed=False, only_help="(one row)")
    parser.add_argument("--mb", type=int, default=100, help="MiB through the pipe per run")
    parser.add_argument("--chunk-kb", type=int, default=64, help="KiB per write")
    args = parser.parse_args(argv)
    if args.mb < 1 or args.chunk_kb < 1:
        parser.error("--mb and --chunk-kb must be at least 1")
    table = [rows.Row(f"ospipe-{args.mb}m-{args.chunk_kb}k", "other",
                      f"{args.mb} MiB through a pipe in {args.chunk_kb} KiB writes", True,
                      kind="ospipe", size=args.mb * pipes.MiB, chunk=args.chunk_kb * 1024,
                      per="MiB")]
    return command.run(args, command.select(args, table))


if __name__ == "__main__":
    sys.exit(options.quiet_on_broken_pipe(main))
