"""The minloop command line: ``python -m minloop ...``.

    python -m minloop --version
    python -m minloop info              version, Python, platform, poller
    python -m minloop run script.py [args...]
    python -m minloop run -m module [args...]
    python -m minloop bench [--quick] [--json FILE] [--plot FILE.png] ...

``run`` executes an unmodified asyncio program with minloop as its loop:
asyncio.run(), asyncio.Runner() and asyncio.new_event_loop() all create
minloop loops, because minloop's event loop policy is installed first.

``bench`` measures minloop side by side with asyncio's loop, uvloop and rloop
(those installed): loop-core workloads and network servers, each run in a
fresh process; see minloop/bench/.
"""

import argparse
import os
import platform
import sys


def _version():
    from . import __version__
    return __version__


def cmd_info(args):
    from . import poller_backend_name
    print(f"minloop {_version()}")
    print(f"python {platform.python_implementation()} {platform.python_version()}")
    print(f"platform {platform.platform()}")
    print(f"poller {poller_backend_name()}")
    return 0


def cmd_bench(args):
    from .bench import suite
    return suite.main(args, args.bench_parser)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m minloop",
        description="minloop: a compiled drop-in replacement for asyncio's event loop.")
    parser.add_argument("--version", action="version", version=f"minloop {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("info", help="version, Python, platform and poller backend")

    # Only for the help: main() hands run's arguments to _cli_run.parse,
    # since argparse would take the program's own options for ours.
    run = sub.add_parser(
        "run", help="run an asyncio program with minloop as its loop",
        usage="python -m minloop run [-h] (-m MODULE | SCRIPT) [ARGS ...]",
        description="Run a script (or -m MODULE) as python would, with minloop's "
                    "event loop policy installed, so asyncio.run(), asyncio.Runner() "
                    "and asyncio.new_event_loop() make minloop loops.",
        epilog="Everything after SCRIPT or -m MODULE is the program's, its options "
               "included. A program that picks its own loop (a loop_factory, "
               "uvloop.install(), uvicorn's --loop) keeps it; run says so on stderr.")
    run.add_argument("-m", dest="module", metavar="MODULE",
                     help="run a library module as a script, like python -m")
    run.add_argument("script", nargs="?", metavar="SCRIPT",
                     help="a script, a directory or zip file with __main__.py, or - "
                          "for standard input")
    run.add_argument("args", nargs="*", metavar="ARGS", help="the program's arguments")
    parser.run_parser = run

    bench = sub.add_parser(
        "bench", help="minloop side by side with asyncio, uvloop and rloop",
        description="Benchmark minloop against asyncio's loop, uvloop and rloop (those "
                    "installed): loop-core workloads (call_soon, timers, tasks) and "
                    "network servers (TCP echo over Protocol and streams, HTTP on "
                    "httptools), every run in a fresh process, medians over rounds.",
        epilog="Exit status: 0; 1 if minloop failed or misbehaved on a row (n/a is not "
               "a failure), or --plot could not draw; 2 on a usage error.")
    from .bench import suite
    suite.add_arguments(bench)
    bench.set_defaults(bench_parser=bench)
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    if argv[:1] == ["run"]:
        from . import _cli_run
        return _cli_run.main(argv[1:], parser.run_parser)
    args = parser.parse_args(argv)
    handler = {"info": cmd_info, "bench": cmd_bench}[args.command]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
