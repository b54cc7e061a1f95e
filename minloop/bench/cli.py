"""``python -m minloop bench``: the standard rows (rows.py) on the loops asked for.

Without options every row (68), 5 rounds: roughly half an hour; --quick the
quick set (rows.QUICK_ROWS: three loop-core rows, three per-message network
rows) in well under a minute.  The options are options.py's, as in every script in
benchmarks/.  --interpreters N is this command's own: how many
sub-interpreters the interpreters group runs at once (interpreters.py).
"""

from __future__ import annotations

import argparse

from . import interpreters, options
from .rows import ROWS

# Without --quick: 5 rounds of 0.3 s network windows after 0.1 s of warm-up.
FULL = options.Profile(rounds=5, duration=0.3, warmup=0.1)


def add_arguments(parser: argparse.ArgumentParser) -> options.Command:
    command = options.Command(parser, FULL,
                              only_help="groups (core, scale, memory, net, other, "
                                        "interpreters)")
    interpreters.add_arguments(parser)
    return command


def main(args: argparse.Namespace, command: options.Command) -> int:
    rows = command.select(args, ROWS)
    return command.run(args, rows, **interpreters.run_keywords(args, command.parser, rows))
