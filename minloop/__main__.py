"""The minloop command line: ``python -m minloop ...``.

    python -m minloop --version
    python -m minloop info              what a bug report needs: versions, build, poller...
    python -m minloop run [--stall S] [--metrics [HOST:]PORT] script.py [args...]
    python -m minloop run [--stall S] [--metrics [HOST:]PORT] -m module [args...]
    python -m minloop bench [--quick] [--json FILE] [--plot FILE.png] ...
    python -m minloop top PID [--interval S] [--stall S] [--once]
    python -m minloop top PID --tasks   the process's tasks and their await points (3.14+)

``run`` executes an unmodified asyncio program as python would, with
minloop's event loop policy installed first, so asyncio.run(),
asyncio.Runner() and asyncio.new_event_loop() make minloop loops; everything
after the script or -m MODULE is the program's (see minloop/_cli_run.py).

``bench`` measures minloop side by side with asyncio's loop, uvloop, rloop,
zuvloop, rsloop, talyn or any loop given as module:factory (those
installed): loop-core workloads and network servers, each run in a fresh
process; see minloop/bench/.  ``top`` shows a running process's loops live,
read from their telemetry pages (minloop/top.py).  ``info`` and ``bench`` end quietly when their
reader closes stdout (``... | head -1``), as Unix tools do.
"""

import argparse
import os
import platform
import sys
import sysconfig


def _version():
    from . import __version__
    return __version__


# Packages whose presence or version changes how an asyncio program runs:
# other loops, servers that pick a loop, libraries that reach into it.
_ASYNCIO_PACKAGES = ("uvloop", "rloop", "uvicorn", "hypercorn", "gunicorn", "granian",
                     "aiohttp", "anyio", "httptools", "websockets", "asyncpg",
                     "pytest-asyncio", "nest-asyncio")


def _build_line():
    from .loop import _build_flags
    flags = _build_flags()
    if flags["optimized"]:
        text = "release (optimized"
    else:
        text = "debug (not optimized"
    text += ", C asserts on)" if flags["assertions"] else ")"
    if flags["address_sanitizer"]:
        text += ", AddressSanitizer"
    if flags["thread_guards"]:
        text += ", thread guards"
    if not flags["telemetry"]:
        text += ", no telemetry"   # MINLOOP_NO_TELEMETRY=1
    return text


def _poller_line():
    import errno
    from . import poller_backend_name
    from .loop import _poller_probe_pwait2
    backend = poller_backend_name()
    if backend == "kqueue":
        from .loop import _build_flags
        emulated = " (libkqueue's emulation on Linux: a test build)" if _build_flags()["libkqueue"] else ""
        return f"kqueue{emulated}; timed waits with kevent (nanosecond timeouts)"
    probe = _poller_probe_pwait2()
    if probe == 0:
        waits = "epoll_pwait2 (nanosecond timeouts)"
    elif probe < 0:
        waits = "epoll_wait (millisecond timeouts: built without epoll_pwait2)"
    elif probe == errno.ENOSYS:
        waits = "epoll_wait (millisecond timeouts: the kernel has no epoll_pwait2)"
    elif probe == errno.EPERM:
        waits = "epoll_wait (millisecond timeouts: epoll_pwait2 is refused here, EPERM)"
    else:
        waits = f"epoll_pwait2, which fails here with {errno.errorcode.get(probe, probe)}"
    return f"{backend}; timed waits with {waits}"


def _child_exits_line():
    # The order minloop/subprocess.py tries them in: a pidfd, a kqueue
    # watching the pid, else a thread per child waiting in waitpid().
    import select
    if hasattr(os, "pidfd_open"):
        try:
            os.close(os.pidfd_open(os.getpid()))
            return "a pidfd per child, in the poller"
        except OSError as exc:
            return f"a waiter thread per child (pidfd_open fails: {exc.strerror})"
    if hasattr(select, "KQ_FILTER_PROC"):
        return "a kqueue per child (EVFILT_PROC), in the poller"
    return "a waiter thread per child"


def _policy_line():
    from . import _asyncio_compat
    from .policy import EventLoopPolicy
    policy = _asyncio_compat.get_event_loop_policy()   # not a deprecated call
    if isinstance(policy, EventLoopPolicy):
        return "minloop's: asyncio.run() and asyncio.new_event_loop() make minloop loops"
    cls = type(policy)
    if cls.__module__.startswith("asyncio."):
        return ("asyncio's default (minloop.install() or python -m minloop run "
                "installs minloop's)")
    return f"{cls.__module__}.{cls.__qualname__}, not minloop's"


# The exporters' packages (minloop.telemetry): a telemetry bug report needs them.
_TELEMETRY_PACKAGES = ("prometheus_client", "opentelemetry-api", "opentelemetry-sdk")


def _packages_line(names=_ASYNCIO_PACKAGES):
    from importlib import metadata
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    if not found:
        return "none installed (looked for " + ", ".join(names) + ")"
    return ", ".join(found)


def _python_line():
    text = f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):  # a free-threaded build
        text += ", free-threaded, GIL " + ("enabled" if sys._is_gil_enabled() else "disabled")
    if sys.flags.dev_mode:
        text += ", -X dev"
    return text


def cmd_info(args):
    """What a bug report needs, one fact a line."""
    import textwrap
    from . import __file__ as package_file
    lines = [
        ("minloop", f"{_version()} ({os.path.dirname(package_file)})"),
        ("build", _build_line()),
        ("python", _python_line()),
        ("platform", platform.platform()),
        ("poller", _poller_line()),
        ("child exits", _child_exits_line()),
        ("policy", _policy_line()),
        ("packages", _packages_line()),
        ("telemetry", _packages_line(_TELEMETRY_PACKAGES)),
    ]
    width = 13
    for key, value in lines:
        if key in ("minloop", "python"):  # paths: whole, to copy
            print(f"{key:<{width}}{value}")
            continue
        print(textwrap.fill(value, 79, initial_indent=f"{key:<{width}}",
                            subsequent_indent=" " * width, break_on_hyphens=False,
                            break_long_words=False))
    return 0


def cmd_bench(args):
    from .bench import cli
    return cli.main(args, args.bench_command)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m minloop",
        description="minloop: a compiled drop-in replacement for asyncio's event loop.")
    parser.add_argument("--version", action="version", version=f"minloop {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("info", help="what a bug report needs: versions, build, poller, policy")

    # Only for the help: main() hands run's arguments to _cli_run.parse,
    # since argparse would take the program's own options for ours.
    run = sub.add_parser(
        "run", help="run an asyncio program with minloop as its loop",
        usage="python -m minloop run [-h] [--stall SECONDS] [--metrics [HOST:]PORT] "
              "(-m MODULE | SCRIPT) [ARGS ...]",
        description="Run a script (or -m MODULE) as python would, with minloop's "
                    "event loop policy installed, so asyncio.run(), asyncio.Runner() "
                    "and asyncio.new_event_loop() make minloop loops.",
        epilog="Everything after SCRIPT or -m MODULE is the program's, its options "
               "included. A program that picks its own loop (a loop_factory, "
               "uvloop.install(), uvicorn's --loop) keeps it; run says so on stderr.")
    run.add_argument("--stall", metavar="SECONDS",
                     help="log each callback that blocks a loop this long (the asyncio "
                          "logger: the task and its line) and count it; sets MINLOOP_STALL")
    run.add_argument("--metrics", metavar="[HOST:]PORT",
                     help="export every loop's telemetry to Prometheus on this address "
                          "(needs prometheus_client); sets MINLOOP_METRICS")
    run.add_argument("-m", dest="module", metavar="MODULE",
                     help="run a library module as a script, like python -m")
    run.add_argument("script", nargs="?", metavar="SCRIPT",
                     help="a script, a directory or zip file with __main__.py, or - "
                          "for standard input")
    run.add_argument("args", nargs="*", metavar="ARGS", help="the program's arguments")
    parser.run_parser = run

    # Listed here for the help; main() hands top's arguments to top.main.
    sub.add_parser("top", help="a live view of a running process's loops "
                               "(utilization, lag, stalls)", add_help=False)

    from .bench import cli, loops, options
    # Listed here for the top-level help; main() parses bench's arguments with
    # its own parser, so that its usage errors are its own (one line each).
    sub.add_parser("bench", help="minloop side by side with asyncio, uvloop, rloop and "
                                 "others", add_help=False)
    bench = options.Parser(
        prog="python -m minloop bench",
        description="Benchmark minloop against asyncio's loop and other loops ("
                    + ", ".join(n for n in loops.NAMES if n not in ("asyncio", "minloop"))
                    + ", any module:factory; those installed): loop-core workloads "
                    "(call_soon, timers, tasks) and network servers (TCP echo over "
                    "Protocol and streams, HTTP on httptools), every run in a fresh "
                    "process, medians over rounds.",
        epilog="Exit status: 0; 1 if minloop failed or misbehaved on a row (n/a is not "
               "a failure); 2 on a usage error (including a --json/--plot path, format "
               "or plotting library that is checked and refused before measuring); "
               "130 after Ctrl-C, with the finished rounds reported.")
    bench.set_defaults(bench_command=cli.add_arguments(bench))
    parser.bench_parser = bench
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    if argv[:1] == ["run"]:
        # The program's own output: a broken pipe is its to handle, as under python.
        from . import _cli_run
        return _cli_run.main(argv[1:], parser.run_parser)
    from .bench.options import quiet_on_broken_pipe
    return quiet_on_broken_pipe(lambda: _command(parser, argv))


def _command(parser, argv):
    if argv[:1] == ["top"]:
        from . import top
        return top.main(argv[1:])
    if argv[:1] == ["bench"]:
        args = parser.bench_parser.parse_args(argv[1:])
        return cmd_bench(args)
    args = parser.parse_args(argv)
    return {"info": cmd_info}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
