"""The options every bench entry point shares, declared once.

``python -m minloop bench`` (cli.py) and each script in benchmarks/ make a
Command around their argparse parser: it declares the shared options with
one spelling and one meaning everywhere, and turns them into the rows to
run, the loops and the Settings that runner.run_script takes:

    --only ROWS      the one row selector: comma-separated row ids, groups or
                     glob patterns (a bare word also matches as a prefix);
                     --list shows the candidates
    --quick          the quick profile (QUICK): the script's quick rows, 3
                     rounds, 0.2 s network windows after 0.05 s of warm-up,
                     the core workloads at a tenth of their size and the
                     spawn/sendfile/pipe/UDP runs at a fifth
    --rounds N, --duration S, --warmup S    override the profile
    --loops L,...    loops by name or module:factory (loops.py); --require
                     L,... the loops that must be available (exit 2)
    --json FILE, --plot FILE.png, --list, --no-pin, --timeout S

A script's full profile (its rounds and windows without --quick) is its
own: README.md's tables were measured with them.
"""

from __future__ import annotations

import argparse
import difflib
import os
import select
import signal
import sys
from dataclasses import dataclass

from . import loops, procs, report, runner, rows as rows_module
# Settings lives in settings.py, which measure.py and runner.py import too:
# here it is re-exported, the name the scripts in benchmarks/ import.
from .settings import CHILD_TIMEOUT, Settings  # noqa: F401


@dataclass(frozen=True)
class Profile:
    """Rounds and network windows (seconds) when the options do not say."""
    rounds: int
    duration: float = 0.0
    warmup: float = 0.0


# One meaning of --quick for every entry point (it was 3 rounds of 0.15 s,
# 2 of 0.25 s or 2 of 0.3 s, by script).  0.2 s windows: thousands of round
# trips on each quick network row; the quick bench on four loops took 48 s on
# a busy 2-CPU machine.  Its user-CPU figures are rough (runner._pool_user_cpu).
QUICK = Profile(rounds=3, duration=0.2, warmup=0.05)
QUICK_HELP = (f"the quick profile: the quick rows (where the script has a standard set), "
              f"{QUICK.rounds} rounds, {QUICK.duration:g} s network windows after "
              f"{QUICK.warmup:g} s warm-up, the core workloads at 1/"
              f"{rows_module.QUICK_DIVISOR} and spawn/sendfile/pipe sizes at 1/"
              f"{rows_module.OTHER_QUICK_DIVISOR}")

# Options the scripts had before they shared these, and what took their place.
RENAMED = {"--rows": "--only", "--workloads": "--only"}


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors on one line (no usage block): an unknown
    option names its close match, a renamed one its new name."""

    def parse_args(self, args=None, namespace=None):
        args, extra = self.parse_known_args(args, namespace)
        if extra:
            self.error(self._unrecognized(extra))
        return args

    def _unrecognized(self, extra: list[str]) -> str:
        text = f"unrecognized arguments: {' '.join(extra)}"
        first = next((a.split("=", 1)[0] for a in extra if a.startswith("-")), None)
        if first in RENAMED:
            return f"{text} ({first} is now {RENAMED[first]})"
        if first:
            known = [s for action in self._actions for s in action.option_strings
                     if action.help is not argparse.SUPPRESS]
            close = difflib.get_close_matches(first, known, n=1, cutoff=0.6)
            if close:
                return f"{text} (did you mean {close[0]}?)"
        return text

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


class Command:
    """The shared options on a parser, and what they resolve to.

    full: the profile without --quick; timed: the rows have network windows
    (--duration, --warmup); pinned: the script pins processes to CPUs
    (--no-pin); default_only: the rows without --only and --quick (None:
    all of them); only_help: what --only picks besides row ids."""

    def __init__(self, parser: argparse.ArgumentParser, full: Profile, *,
                 timed: bool = True, pinned: bool = True, default_only: str | None = None,
                 only_help: str = "groups"):
        self.parser = parser
        self.full = full
        self.timed = timed
        self.pinned = pinned
        self.default_only = default_only
        add = parser.add_argument
        add("--only", metavar="ROWS",
            help=f"comma-separated row ids, {only_help} or glob patterns (a bare word also "
                 f"matches as a prefix; --list shows the rows)"
                 + (f"; default: {default_only}" if default_only else ""))
        add("--quick", action="store_true", help=QUICK_HELP)
        add("--list", action="store_true", help="list the rows (those --only picks) and exit")
        add("--loops", default=",".join(loops.NAMES),
            help="comma-separated loops, in run order: known names, module:factory or "
                 "label=module:factory, and label=module:factory@DIR for a build in the "
                 "source tree DIR (another build of minloop beside this one) (default: "
                 "%(default)s; those not installed are skipped, each with a line saying why)")
        add("--require", default="", metavar="LOOPS",
            help="comma-separated loops that must be available (exit 2 if not)")
        add("--rounds", type=int, metavar="N",
            help=f"rounds per row and loop (default {full.rounds}, {QUICK.rounds} with --quick)")
        if timed:
            add("--duration", type=float, metavar="S",
                help=f"timed seconds per network run (default {full.duration:g}, "
                     f"{QUICK.duration:g} with --quick)")
            add("--warmup", type=float, metavar="S",
                help=f"untimed seconds before each (default {full.warmup:g}, "
                     f"{QUICK.warmup:g} with --quick)")
        if pinned:
            add("--no-pin", action="store_true",
                help="do not pin the server and the load generator to CPUs")
        add("--timeout", type=float, default=CHILD_TIMEOUT, metavar="S",
            help="seconds before a measuring process is abandoned (default: %(default)g)")
        add("--json", metavar="FILE",
            help="also write the environment, every round's figures, medians and ratios "
                 "as JSON")
        add("--plot", metavar="FILE.png",
            help="also draw minloop's ratios, a panel per group, as .png, .svg, .pdf, ... "
                 "(needs matplotlib: pip install \"minloop[plot]\")")

    # --- resolving --------------------------------------------------------

    def select(self, args: argparse.Namespace, table, groups: dict | None = None
               ) -> list[rows_module.Row]:
        """The rows --only (or --quick, or the default) picks from table
        (id -> Row, or a list of rows); a usage error if an item matches
        none."""
        if not isinstance(table, dict):
            table = {row.id: row for row in table}
        spec = args.only or (None if args.quick else self.default_only)
        try:
            return rows_module.select_rows(spec, args.quick, table, groups)
        except rows_module.UnknownRows as exc:
            self.parser.error(f"--only: {exc}")

    def loops(self, args: argparse.Namespace) -> tuple[list[str], list[str]]:
        """(the loops to run, the loops required), checked."""
        names = self._parse_loops(args.loops, "--loops")
        required = self._parse_loops(args.require, "--require")
        return names, required

    def _parse_loops(self, text: str, option: str) -> list[str]:
        names = []
        for item in (s for s in text.split(",") if s.strip()):
            try:
                names.append(loops.parse(item))
            except ValueError as exc:
                self.parser.error(f"{option}: {exc}")
        if not names and option == "--loops":
            self.parser.error("--loops: no loop named")
        return list(dict.fromkeys(names))

    def settings(self, args: argparse.Namespace, pin: procs.Pinning | None = None
                 ) -> Settings:
        """The Settings of the run: the profile, overridden by the options."""
        profile = QUICK if args.quick else self.full
        rounds = args.rounds if args.rounds is not None else profile.rounds
        duration = getattr(args, "duration", None)
        duration = profile.duration if duration is None else duration
        warmup = getattr(args, "warmup", None)
        warmup = profile.warmup if warmup is None else warmup
        if rounds < 1:
            self.parser.error("--rounds must be at least 1")
        if self.timed and duration <= 0:
            self.parser.error("--duration must be positive")
        if warmup < 0:
            self.parser.error("--warmup must not be negative")
        if args.timeout <= 0:
            self.parser.error("--timeout must be positive")
        if pin is None:
            pin = (procs.Pinning(not getattr(args, "no_pin", False)) if self.pinned
                   else procs.Pinning(False, "this script does not pin"))
        return Settings(args.quick, rounds, duration, warmup, pin, args.timeout)

    def check_outputs(self, args: argparse.Namespace) -> None:
        """Refuse now, before any measuring, a file that could not be written later."""
        if args.json:
            self._check_output("--json", args.json)
        if args.plot:
            self._check_output("--plot", args.plot)
            try:
                formats = report.plot_formats()
            except report.PlotUnavailable as exc:
                self.parser.error(f"--plot needs matplotlib ({exc}): "
                                  f"pip install \"minloop[plot]\"")
            ext = os.path.splitext(args.plot)[1].lstrip(".").lower()
            if ext not in formats:
                self.parser.error(f"--plot {args.plot}: the file name must end in one of "
                                  + ", ".join("." + f for f in sorted(formats)))

    def _check_output(self, option: str, path: str) -> None:
        where = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            self.parser.error(f"{option} {path}: is a directory")
        if not os.path.isdir(where):
            self.parser.error(f"{option} {path}: no such directory: {where}")
        if not os.access(where, os.W_OK | os.X_OK) or (
                os.path.exists(path) and not os.access(path, os.W_OK)):
            self.parser.error(f"{option} {path}: not writable")

    # --- the run ----------------------------------------------------------

    def run(self, args: argparse.Namespace, rows: list[rows_module.Row], *,
            pin: procs.Pinning | None = None, **run_script) -> int:
        """--list, or the whole run: loops, settings and outputs checked
        (usage errors before any measuring), then runner.run_script with the
        script's own keywords (measure, extra, rounds_of, header, notes)."""
        if args.list:
            return list_rows(rows)
        names, required = self.loops(args)
        settings = self.settings(args, pin)
        self.check_outputs(args)
        return runner.run_script(rows, names, settings, required=required,
                                 json_path=args.json, plot_path=args.plot, **run_script)


def list_rows(rows: list[rows_module.Row]) -> int:
    """--list: the rows, a line each (their descriptions wrapped under them)."""
    for row in rows:
        print(report.list_line(row.id, "*" if row.quick else " ", row.doc))
    if any(row.quick for row in rows) and not all(row.quick for row in rows):
        print("\n* in the --quick set")
    return 0


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has gone (head -1 has exited)."""
    try:
        poller = select.poll()
        poller.register(sys.__stdout__.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def quiet_on_broken_pipe(main):
    """Run main(); if its reader closed stdout (``... | head -1``), end as a
    Unix tool killed by SIGPIPE does: no traceback, status 128 + SIGPIPE.
    A broken pipe anywhere else (a child's stdin) is an error as before."""
    try:
        try:
            return main()
        finally:  # also on SystemExit (--help, a usage error)
            sys.stdout.flush()
    except BrokenPipeError:
        if not _stdout_gone():
            raise
        # Python would flush stdout again at exit and report the same
        # error: point it at /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)
        return 128 + signal.SIGPIPE
