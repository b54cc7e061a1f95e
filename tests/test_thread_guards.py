"""Foreign threads at a running loop: the guards and cross-thread cancel()
of docs/threading.md (item 8), on both loops.

asyncio's rule is that only the loop's thread touches the loop while it
runs; its debug mode enforces it for call_soon/call_later/call_at with a
RuntimeError.  minloop raises the same error, and on a free-threaded build
(where a foreign thread's call would race the loop's C structures) it raises
it at every entry into the fd table, the timer heap and the transports'
write queues, debug mode or not.  With the GIL, every test here expects of
minloop exactly what asyncio does -- unless minloop was built with
MINLOOP_THREAD_GUARDS=1, which compiles the free-threaded build's guards
into a GIL build so that their paths are tested where no free-threaded
Python is installed (then the tests expect what a free-threaded build does).

The cancel() tests hold on any build: handles cancelled from other threads
while the loop runs never run once the cancel has returned, and give back
their callbacks (on a free-threaded build minloop finishes such a cancel on
the loop's thread, a moment later).
"""

import asyncio
import os
import socket
import sysconfig
import threading

import pytest

from thread_helpers import join_all, start_all

WRONG_THREAD = ("Non-thread-safe operation invoked on an event loop other "
                "than the current one")

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def _guarded(loop_kind):
    """Whether this loop refuses foreign threads at every entry (minloop on
    a free-threaded build, or built with MINLOOP_THREAD_GUARDS=1)."""
    if loop_kind != "minloop":
        return False
    from minloop.loop import _build_flags
    return _build_flags()["thread_guards"]

N_THREADS = 8


# ----------------------------------------------------------------------
# cancel() from many threads


def test_threads_cancel_their_own_threadsafe_handles(loop):
    """8 threads push callbacks with call_soon_threadsafe and cancel every
    other handle they got: the others run exactly once, a cancelled one at
    most once (its cancel may lose the race with the run), and every
    cancelled handle ends cancelled with its callback dropped."""
    per_thread = 2000
    ran = [[0] * per_thread for _ in range(N_THREADS)]
    cancelled = [[] for _ in range(N_THREADS)]
    start = threading.Barrier(N_THREADS)

    def cb(i, j):
        ran[i][j] += 1

    def producer(i):
        start.wait()
        for j in range(per_thread):
            handle = loop.call_soon_threadsafe(cb, i, j)
            if j % 2:
                handle.cancel()
                cancelled[i].append(handle)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(N_THREADS)]

    async def main():
        start_all(threads)
        await loop.run_in_executor(None, join_all, threads)
        # Whatever the threads queued (a deferred cancel's second half
        # included) has run after two more iterations.
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    loop.run_until_complete(main())
    for i in range(N_THREADS):
        assert all(ran[i][j] == 1 for j in range(0, per_thread, 2))
        assert all(ran[i][j] <= 1 for j in range(1, per_thread, 2))
        assert len(cancelled[i]) == per_thread // 2
        assert all(h.cancelled() for h in cancelled[i])
        assert all(h._callback is None for h in cancelled[i])


def test_threads_cancel_timers_of_a_running_loop(loop, loop_kind):
    """The loop arms timers due in a second; 8 threads cancel half of them
    while it runs.  Exactly the others run, once each, and the cancelled
    ones drop their callbacks (and, on minloop, leave the timer heap)."""
    per_thread = 500
    ran = []
    timers = []
    done = loop.create_future()

    def cb(k):
        ran.append(k)

    def canceller(i):
        for k in range(i, len(timers), N_THREADS):
            if k % 2:
                timers[k].cancel()

    async def main():
        due = loop.time() + 1.0
        for k in range(N_THREADS * per_thread):
            timers.append(loop.call_at(due, cb, k))
        loop.call_at(due, done.set_result, None)
        threads = [threading.Thread(target=canceller, args=(i,)) for i in range(N_THREADS)]
        start_all(threads)
        await loop.run_in_executor(None, join_all, threads)
        # Every cancel has returned, well before the timers are due.
        assert loop.time() < due
        cancelled = timers[1::2]
        assert all(t.cancelled() for t in cancelled)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert all(t._callback is None for t in cancelled)
        if loop_kind == "minloop":
            # Cancelled timers left the heap: the live ones and done's remain.
            assert loop._timer_count() == len(timers) // 2 + 1
        await done

    loop.run_until_complete(main())
    assert sorted(ran) == list(range(0, N_THREADS * per_thread, 2))


def test_cancel_from_another_thread_while_the_loop_is_stopped(loop, loop_kind):
    """A loop that is not running may be used from any one thread: a timer
    cancelled there is gone at once, as when the loop's own thread does it."""
    ran = []
    timer = loop.call_later(0, ran.append, 1)
    t = threading.Thread(target=timer.cancel)
    t.start()
    t.join()
    assert timer.cancelled() and timer._callback is None
    if loop_kind == "minloop":
        assert loop._timer_count() == 0
    loop.run_until_complete(asyncio.sleep(0.01))
    assert ran == []


# ----------------------------------------------------------------------
# The thread check at the loop's entries


def _stream_pair(loop):
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    return a, b


async def _entry(loop, name, resources):
    """A function that calls entry `name` of the running loop (or of one of
    its transports), made on the loop's thread; the resources it needs are
    appended to `resources` for the caller to release."""
    if name == "call_later":
        return lambda: loop.call_later(60, lambda: None).cancel()
    if name == "call_at":
        return lambda: loop.call_at(loop.time() + 60, lambda: None).cancel()
    if name in ("add_reader", "add_writer", "remove_reader"):
        a, b = _stream_pair(loop)
        resources += [a, b]
        if name == "remove_reader":
            loop.add_reader(a.fileno(), lambda: None)
            return lambda: loop.remove_reader(a.fileno())
        return lambda: getattr(loop, name)(a.fileno(), lambda: None)
    if name in ("transport.write", "transport.pause_reading"):
        a, b = _stream_pair(loop)
        resources.append(b)
        transport, _ = await loop.create_connection(asyncio.Protocol, sock=a)
        resources.append(transport)
        await asyncio.sleep(0)   # reading has started
        if name == "transport.write":
            return lambda: transport.write(b"x")
        return transport.pause_reading
    if name == "datagram.sendto":
        a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        resources.append(b)
        b.bind(("127.0.0.1", 0))
        a.connect(b.getsockname())
        a.setblocking(False)
        transport, _ = await loop.create_datagram_endpoint(
            asyncio.DatagramProtocol, sock=a)
        resources.append(transport)
        return lambda: transport.sendto(b"x")
    if name == "pipe.write":
        r, w = os.pipe()
        resources.append(r)
        transport, _ = await loop.connect_write_pipe(
            asyncio.BaseProtocol, os.fdopen(w, "wb", buffering=0))
        resources.append(transport)
        return lambda: transport.write(b"x")
    raise AssertionError(name)


def _release(loop, resources):
    """Close what _entry made, transports first (on the loop's thread)."""
    for res in reversed(resources):
        if isinstance(res, int):
            os.close(res)
        elif isinstance(res, socket.socket):
            loop.remove_reader(res.fileno())
            loop.remove_writer(res.fileno())
            res.close()
        else:
            res.close()


# Entries asyncio's debug mode checks (call_at's check covers call_later).
DEBUG_CHECKED = {"call_later", "call_at"}

ENTRIES = ["call_later", "call_at", "add_reader", "add_writer", "remove_reader",
           "transport.write", "transport.pause_reading", "datagram.sendto",
           "pipe.write"]


def _attempt(call, outcome):
    """Call it; note the RuntimeError's message, or None if it worked."""
    try:
        call()
    except RuntimeError as exc:
        outcome.append(str(exc))
    else:
        outcome.append(None)


@pytest.mark.parametrize("debug", [False, True], ids=["normal", "debug"])
@pytest.mark.parametrize("entry", ENTRIES)
def test_entry_from_a_foreign_thread_while_running(loop, loop_kind, entry, debug):
    """With the GIL, each entry called from a foreign thread fails exactly
    where asyncio's does (debug mode's check) and otherwise works; on a
    free-threaded build minloop refuses every one of them."""
    loop.set_debug(debug)
    resources = []
    outcome = []

    async def main():
        call = await _entry(loop, entry, resources)
        await loop.run_in_executor(None, _attempt, call, outcome)
        await asyncio.sleep(0.01)

    try:
        loop.run_until_complete(main())
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        _release(loop, resources)
        loop.run_until_complete(asyncio.sleep(0.01))
    if _guarded(loop_kind):
        assert outcome == [WRONG_THREAD]
    elif debug and entry in DEBUG_CHECKED:
        assert outcome == [WRONG_THREAD]
    else:
        assert outcome == [None]


@pytest.mark.parametrize("entry", ENTRIES)
def test_entry_from_another_thread_while_stopped(loop, entry):
    """No check while the loop is not running (asyncio's _check_thread):
    a stopped loop may be used from any one thread."""
    loop.set_debug(True)
    resources = []
    outcome = []

    call = loop.run_until_complete(_entry(loop, entry, resources))

    try:
        t = threading.Thread(target=_attempt, args=(call, outcome))
        t.start()
        t.join()
        loop.run_until_complete(asyncio.sleep(0.01))
    finally:
        _release(loop, resources)
        loop.run_until_complete(asyncio.sleep(0.01))
    assert outcome == [None]


def test_free_threaded_builds_have_the_guards(minloop_module):
    from minloop.loop import _build_flags
    if not FREE_THREADED:
        pytest.skip("a GIL build has them only with MINLOOP_THREAD_GUARDS=1")
    assert _build_flags()["thread_guards"]


def test_every_compiled_module_declares_itself_free_threading_safe():
    """A Cython module without the directive makes a free-threaded
    interpreter turn the GIL back on for the whole program on import: a new
    .pyx must say it (and be reviewed for it: docs/threading.md)."""
    here = os.path.join(os.path.dirname(__file__), os.pardir, "minloop")
    sources = sorted(n for n in os.listdir(here) if n.endswith(".pyx"))
    assert "loop.pyx" in sources
    undeclared = []
    for name in sources:
        with open(os.path.join(here, name), encoding="utf-8") as f:
            head = [next(f, "") for _ in range(3)]
        if "# cython: freethreading_compatible=True\n" not in head:
            undeclared.append(name)
    assert undeclared == []


# ----------------------------------------------------------------------
# The flags other threads set


def test_stop_called_from_another_thread_stops_the_loop(loop):
    """loop.stop() from another thread (not thread-safe in asyncio, but
    common) is seen by the loop's next iteration."""
    ticks = []

    def tick():
        ticks.append(1)
        loop.call_later(0.001, tick)

    def stopper():
        while len(ticks) < 5:
            threading.Event().wait(0.001)
        loop.stop()

    t = threading.Thread(target=stopper)
    loop.call_soon(t.start)
    loop.call_soon(tick)
    loop.run_forever()
    t.join()
    assert not loop.is_running()
    assert len(ticks) >= 5


def test_set_debug_from_another_thread_while_running(loop):
    """set_debug() from another thread takes effect for the loop: the
    thread check starts and stops with it."""
    outcome = []

    def toggle_and_try():
        loop.set_debug(True)
        try:
            loop.call_soon(lambda: None)
        except RuntimeError as exc:
            outcome.append(str(exc))
        loop.set_debug(False)
        try:
            loop.call_soon_threadsafe(lambda: None)
        except RuntimeError as exc:   # pragma: no cover - the failure
            outcome.append(str(exc))

    async def main():
        # Submitted from inside: the loop is running when the thread calls.
        await loop.run_in_executor(None, toggle_and_try)

    loop.run_until_complete(main())
    assert outcome == [WRONG_THREAD]
    assert loop.get_debug() is False


def test_private_flags_read_and_written_as_attributes(loop):
    """asyncio's _debug, _stopping and _closed attributes, which code outside
    the loop reads (minloop: properties over the loop's atomic flags)."""
    loop._debug = 1
    assert loop.get_debug() and loop._debug
    loop.set_debug(False)
    assert not loop._debug
    assert not loop._stopping
    loop.stop()
    assert loop._stopping
    loop.run_forever()   # one iteration; stop() is taken back
    assert not loop._stopping
    assert not loop._closed
    loop.close()
    assert loop._closed
