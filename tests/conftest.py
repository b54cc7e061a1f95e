"""Shared fixtures: every behavioural test runs against asyncio's loop and minloop.

The ``loop`` fixture is parametrised by loop factory (ids ``asyncio`` and
``minloop``).  A test that fails on ``asyncio`` is a wrong test: asyncio's
selector loop is the specification, minloop must behave the same.

The minloop parametrisation is skipped (with the import error as the reason)
only while ``import minloop`` fails outright, i.e. before the extension is
built.  Any other error from minloop is a real failure.
"""

import asyncio
import gc
import os
import signal
import sys
import threading
import warnings

import pytest

LOOP_KINDS = ("asyncio", "minloop")

# Every test gets this time limit unless it sets its own timeout mark: a hung
# loop must fail one test, not the whole run.
DEFAULT_TIMEOUT = 15


def _in_sub_interpreter():
    try:
        from _thread import _is_main_interpreter  # 3.12+
    except ImportError:
        return False
    return not _is_main_interpreter()


# scripts/pytest-in-interpreter runs this suite in a sub-interpreter with its
# own GIL.  What a test needs that no loop can have there, asyncio's
# included: @pytest.mark.main_interpreter(KEY) skips it there, with this
# reason.  The keys are the whole list.
IN_SUB_INTERPRETER = _in_sub_interpreter()
MAIN_INTERPRETER_ONLY = {
    "fork": "os.fork() is refused in an isolated sub-interpreter",
    "signals": "signal handlers (signal.signal, set_wakeup_fd) are the main "
               "interpreter's: add_signal_handler raises RuntimeError there, "
               "on asyncio's loop too",
    "preexec_fn": "subprocess's preexec_fn is refused in a sub-interpreter",
    "daemon threads": "a library it drives starts daemon threads, which an "
                      "isolated sub-interpreter refuses",
    "nested": "it makes sub-interpreters and compares them with the main "
              "interpreter",
}
# Threads a test's harness starts: daemons where the interpreter allows
# them (a failed test must not keep the run alive), else plain threads,
# which each harness joins.
DAEMON_THREADS = getattr(threading, "_daemon_threads_allowed", lambda: True)()


def _poller_over_libkqueue():
    """Whether minloop was built with its kqueue poller on Linux, over
    libkqueue's emulation (setup.py's MINLOOP_POLLER=kqueue)."""
    try:
        from minloop.loop import _build_flags
    except ImportError:
        return False
    return _build_flags()["libkqueue"]


OVER_LIBKQUEUE = _poller_over_libkqueue()

# The test build of the kqueue poller runs over libkqueue, the kqueue API
# emulated on epoll (docs/development.md).  Where the emulation cannot stand
# for a kernel's kqueue, a test says how with
# @pytest.mark.libkqueue_differs(KEY), and on minloop in that build it is an
# expected failure, strictly: one that passes fails the run, so no entry
# outlives its reason.  The keys are the whole list.
LIBKQUEUE_DIFFERS = {
    "socket error": "libkqueue reads a socket's pending error (getsockopt SO_ERROR) "
                    "to report it with EV_EOF, and on Linux that read clears it: "
                    "recv() then sees a plain end of file and a refused connect() "
                    "looks made. A kernel's kqueue leaves the error to the socket, "
                    "so ECONNRESET and ECONNREFUSED reach the transport, as the tests "
                    "expect",
}


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "main_interpreter(key): the test cannot run in a sub-interpreter, "
        "for the reason conftest.MAIN_INTERPRETER_ONLY[key] gives")
    config.addinivalue_line(
        "markers", "libkqueue_differs(key): over libkqueue, an expected failure on minloop, "
        "for the reason conftest.LIBKQUEUE_DIFFERS[key] gives")
    if OVER_LIBKQUEUE:
        # libkqueue opens two descriptors of its own with the process's
        # first kqueue (its monitoring thread's epoll and eventfd) and keeps
        # them for the life of the process: opened here, before any test
        # counts its descriptors.
        import minloop
        minloop.new_event_loop().close()


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        # Only this directory's behavioural tests; tests/conformance/ has its own rules.
        if os.path.dirname(str(item.path)) != here:
            continue
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEFAULT_TIMEOUT))
        for mark in item.iter_markers("libkqueue_differs"):
            reason = LIBKQUEUE_DIFFERS[mark.args[0]]  # KeyError: not a listed reason
            callspec = getattr(item, "callspec", None)
            on_asyncio = callspec is not None and callspec.params.get("loop_kind") == "asyncio"
            if OVER_LIBKQUEUE and not on_asyncio:
                item.add_marker(pytest.mark.xfail(strict=True, reason=f"libkqueue: {reason}"))
        for mark in item.iter_markers("main_interpreter"):
            reason = MAIN_INTERPRETER_ONLY[mark.args[0]]  # KeyError: not a listed reason
            if IN_SUB_INTERPRETER:
                item.add_marker(pytest.mark.skip(reason=f"main interpreter only: {reason}"))


def sigint_as_from_a_terminal():
    """preexec_fn for a child the test sends SIGINT as a Ctrl-C would.

    A test run started in the background (`cmd &` in a non-interactive
    shell, as some CI runners and agents do) inherits SIGINT ignored, and a
    child would too: Python then installs no KeyboardInterrupt handler and
    the signal does nothing.  A program started from a terminal has it at
    its default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def import_minloop():
    """Import minloop, or skip the calling test if it is not importable at all."""
    try:
        import minloop
    except ImportError as exc:
        pytest.skip(f"minloop is not importable (not built yet?): {exc!r}")
    return minloop


def run_lagging(loop, read_during):
    """Run `loop` through a 50 ms block with 21 timers falling due in it, then
    call read_during() in an executor thread while the loop waits in its
    poller (an exporter read from another thread), and return its result."""
    import time

    def block():
        loop.call_later(0.001, lambda: None)   # due during the block
        time.sleep(0.05)

    async def main():
        loop.call_soon(block)
        for _ in range(20):
            loop.call_later(0.001, lambda: None)
        await asyncio.sleep(0.08)
        return await loop.run_in_executor(None, read_during)

    return loop.run_until_complete(main())


def open_fds():
    """The set of this process's open file descriptors, with their targets."""
    fds = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            fds[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            # The descriptor of the listdir() itself, closed by now.
            pass
    return fds


def assert_no_fd_leak(before, what):
    """Assert that no descriptor is open now that was not open in ``before``.

    Only new descriptors count (one closed meanwhile by the collection of an
    earlier test's garbage is fine).  gc.collect() is slow, so it runs only
    when a first look finds something, to let unreachable objects close theirs.
    """
    def new_fds():
        after = open_fds()
        return {fd: target for fd, target in after.items()
                if fd not in before or before[fd] != target}

    leaked = new_fds()
    if leaked:
        gc.collect()
        leaked = new_fds()
    assert not leaked, f"{what} leaked file descriptors: {leaked}"


@pytest.fixture(params=LOOP_KINDS)
def loop_kind(request):
    """Which implementation the test runs against: 'asyncio' or 'minloop'."""
    if request.param == "minloop":
        import_minloop()
    return request.param


@pytest.fixture
def loop_factory(loop_kind):
    """A zero-argument callable that makes a new, unused event loop."""
    if loop_kind == "asyncio":
        return asyncio.SelectorEventLoop
    return import_minloop().new_event_loop


@pytest.fixture
def loop(loop_factory):
    """A fresh loop; closed afterwards, asserting that it released its fds."""
    before = open_fds()
    old_hooks = sys.get_asyncgen_hooks()
    lp = loop_factory()
    # Under -X dev asyncio turns debug mode on by default; tests that want
    # it ask for it, so the rest see the same loop on every run.
    lp.set_debug(False)
    try:
        yield lp
    finally:
        if lp.is_running():  # pragma: no cover - a test bug
            lp.stop()
        lp.close()
        asyncio.set_event_loop(None)
        # A test that failed half-way may leave these behind; never let one
        # test's state reach the next.
        sys.set_asyncgen_hooks(*old_hooks)
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:  # pragma: no cover - not the main thread
            pass
    del lp
    assert_no_fd_leak(before, "the loop")


@pytest.fixture(name="open_fds")
def open_fds_fixture():
    """open_fds() -> {fd: target} of this process, for before/after comparisons."""
    return open_fds


@pytest.fixture(name="assert_no_fd_leak")
def assert_no_fd_leak_fixture():
    """assert_no_fd_leak(before, what): fail if an fd not in ``before`` is open now."""
    return assert_no_fd_leak


@pytest.fixture
def minloop_module():
    """The minloop module itself (skips the test if it is not importable at all)."""
    return import_minloop()


@pytest.fixture
def minloop_only(loop_kind):
    """For tests of promises minloop makes beyond asyncio ("minloop is stricter")."""
    if loop_kind != "minloop":
        pytest.skip("asyncio does not make this promise; minloop is stricter")


@pytest.fixture
def run_briefly():
    """run_briefly(loop, n=1): run ``n`` full loop iterations, then return."""
    def run(lp, n=1):
        for _ in range(n):
            lp.call_soon(lp.stop)
            lp.run_forever()
    return run


@pytest.fixture
def run_for():
    """run_for(loop, seconds): run the loop for about that long."""
    def run(lp, seconds):
        lp.call_later(seconds, lp.stop)
        lp.run_forever()
    return run


@pytest.fixture
def socketpair():
    """A connected, non-blocking AF_UNIX stream pair, closed afterwards."""
    import socket
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


@pytest.fixture
def pipe():
    """A non-blocking os.pipe() (read_fd, write_fd); closed afterwards if still open."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:
            pass


@pytest.fixture
def no_warnings_leak():
    """Record every warning (simplefilter('always')) while the test runs."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
