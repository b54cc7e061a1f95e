"""loop.sendfile(): a 100 MB file over loopback TCP, MB/s.

    python benchmarks/sendfile_bench.py [--size-mb 100] [--dir DIR] [--quick]
                                        [--rounds 5] [--loops asyncio,minloop,...]

The row sendfile-100m of ``python -m minloop bench --only other``, at the
size given here; the receiver, the sender and the measuring are
minloop/bench/sendfile.py's (its docstring says how they work: a loop
without loop.sendfile, as uvloop, sends with read + write, marked "rw" in
the details), the rounds, medians, report and options the bench's own
(--quick: a fifth of --size-mb).
"""

from __future__ import annotations

import os
import sys

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import options, rows, sendfile  # noqa: E402

# Without --quick: 5 rounds.
FULL = options.Profile(rounds=5)


def main(argv: list[str] | None = None) -> int:
    ap = options.Parser(description=__doc__.split("\n\n")[0])
    command = options.Command(ap, FULL, timed=False, only_help="(one row)")
    ap.add_argument("--size-mb", type=int, default=100, help="MB sent per run")
    ap.add_argument("--dir", default=None, help="where to write the file")
    args = ap.parse_args(argv)
    if args.size_mb < 1:
        ap.error("--size-mb must be at least 1")
    size = args.size_mb * sendfile.MB
    table = [rows.Row(f"sendfile-{args.size_mb}m", "other",
                      f"loop.sendfile of a {args.size_mb} MB file", True, kind="sendfile",
                      size=size, per="MB")]
    chosen = command.select(args, table)
    if not args.list:
        # Made now, in --dir: the measurements reuse the files of their size.
        sendfile.files(rows.other_size(table[0], args.quick), args.dir)
    return command.run(args, chosen)


if __name__ == "__main__":
    sys.exit(options.quiet_on_broken_pipe(main))
