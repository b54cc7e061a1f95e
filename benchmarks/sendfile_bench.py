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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compare  # noqa: E402  (_names)
from minloop.bench import loops, procs, report, sendfile, suite  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--loops", default="asyncio,minloop,uvloop")
    ap.add_argument("--dir", default=None, help="where to write the file")
    args = ap.parse_args(argv)
    if args.size_mb < 1 or args.rounds < 1:
        ap.error("--size-mb and --rounds must be at least 1")

    names = compare._names(ap, args.loops, loops.NAMES, "loop")
    size = args.size_mb * sendfile.MB
    # Made now, in --dir: the measurements reuse the files of their size.
    sendfile.files(size, args.dir)
    rows = [suite.Row(f"sendfile-{args.size_mb}m", "other",
                      f"loop.sendfile of a {args.size_mb} MB file", False, kind="sendfile",
                      size=size, per="MB")]
    settings = suite.Settings(False, args.rounds, 0.0, 0.0, procs.Pinning())
    results = suite.measure_and_report(rows, names, settings)
    return 0 if report.ok(results) else 1


if __name__ == "__main__":
    sys.exit(main())
