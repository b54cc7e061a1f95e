"""Bytes per second through an os.pipe(), pipe transport to pipe transport.

    python benchmarks/pipe_throughput.py [--mb 100] [--chunk-kb 64]
                                         [--rounds 5] [--loops asyncio,minloop,uvloop]

The row ospipe-100m-64k of ``python -m minloop bench --only other``, at the
sizes given here; the transfer and the measuring are minloop/bench/pipes.py's
(one loop holds both ends: connect_write_pipe sends in --chunk-kb writes,
honouring pause_writing/resume_writing, connect_read_pipe counts until EOF;
a fresh interpreter per run), the rounds, medians and report the bench's
own: MiB/s, and minloop's speed over each other loop's (above 1: minloop is
faster).
"""

from __future__ import annotations

import argparse
import os
import sys

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import pipes, procs, suite  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--chunk-kb", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loops", default="asyncio,minloop,uvloop")
    args = parser.parse_args(argv)
    if args.mb < 1 or args.chunk_kb < 1 or args.rounds < 1:
        parser.error("--mb, --chunk-kb and --rounds must be at least 1")

    names = suite.parse_loops(parser, args.loops)
    rows = [suite.Row(f"ospipe-{args.mb}m-{args.chunk_kb}k", "other",
                      f"{args.mb} MiB through a pipe in {args.chunk_kb} KiB writes", False,
                      kind="ospipe", size=args.mb * pipes.MiB, chunk=args.chunk_kb * 1024,
                      per="MiB")]
    settings = suite.Settings(False, args.rounds, 0.0, 0.0, procs.Pinning())
    return suite.run_script(rows, names, settings)


if __name__ == "__main__":
    sys.exit(main())
