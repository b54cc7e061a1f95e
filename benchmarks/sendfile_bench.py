"""loop.sendfile(): a 100 MB file over loopback TCP, MB/s.

    python benchmarks/sendfile_bench.py [--rounds 5] [--size-mb 100]
                                        [--loops asyncio,minloop,uvloop]
                                        [--dir DIR]

The row sendfile-100m of ``python -m minloop bench --only other``, at the
size given here; the receiver, the sender and the measuring are
minloop/bench/sendfile.py's (its docstring says how they work: a loop
without loop.sendfile, as uvloop, sends with read + write, marked "rw" in
the details), the rounds, medians and report the bench's own.
"""

from __future__ import annotations

import argparse
import os
import sys

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import procs, sendfile, suite  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--loops", default="asyncio,minloop,uvloop")
    ap.add_argument("--dir", default=None, help="where to write the file")
    args = ap.parse_args(argv)
    if args.size_mb < 1 or args.rounds < 1:
        ap.error("--size-mb and --rounds must be at least 1")

    names = suite.parse_loops(ap, args.loops)
    size = args.size_mb * sendfile.MB
    # Made now, in --dir: the measurements reuse the files of their size.
    sendfile.files(size, args.dir)
    rows = [suite.Row(f"sendfile-{args.size_mb}m", "other",
                      f"loop.sendfile of a {args.size_mb} MB file", False, kind="sendfile",
                      size=size, per="MB")]
    settings = suite.Settings(False, args.rounds, 0.0, 0.0, procs.Pinning())
    return suite.run_script(rows, names, settings)


if __name__ == "__main__":
    sys.exit(main())
