"""minloop-only guarantees that asyncio's loop does not make (or has no way
to show): the timer heap gives memory back, cancelled timers leave it at once,
the poll-skipping shortcut never starves I/O, and the C containers are visible
to the garbage collector."""

import gc
import os
import time
import socket
import subprocess
import sys
import sysconfig
import warnings

import pytest

import minloop
from conftest import OVER_LIBKQUEUE


def open_fds():
    return set(os.listdir('/proc/self/fd')) if os.path.isdir('/proc/self/fd') else set()


@pytest.fixture
def loop():
    loop = minloop.new_event_loop()
    loop.set_debug(False)   # -X dev turns it on; these tests count objects
    yield loop
    loop.close()


@pytest.mark.skipif(sys.flags.dev_mode, reason="memory accounting under the debug "
                    "allocator is slow and padded; the normal run checks it")
def test_million_timers_armed_and_cancelled_leave_an_empty_heap(loop):
    """After 1,000,000 timers are armed and cancelled, the heap holds 0
    entries, its array shrank back, and Python memory returns to where it was."""
    # Not importable in a sub-interpreter (scripts/pytest-in-interpreter).
    tracemalloc = pytest.importorskip("tracemalloc", exc_type=ImportError)
    def noop():
        pass

    initial_capacity = loop._timer_heap_capacity()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        handles = [loop.call_later(1000 + i * 1e-3, noop) for i in range(1_000_000)]
        assert loop._timer_count() == 1_000_000
        assert loop._timer_heap_capacity() >= 1_000_000
        for h in handles:
            h.cancel()
        assert loop._timer_count() == 0
        del handles, h
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert loop._timer_heap_capacity() <= max(initial_capacity, 64)
    # Slack for interpreter caches and other threads, not 1M handles' worth (~100 MB).
    assert after - before < 1024 * 1024


def test_cancel_removes_from_heap_immediately_and_drops_references(loop):
    class Payload:
        pass

    payload = Payload()
    refs_before = sys.getrefcount(payload)
    timers = [loop.call_later(10, print, payload) for _ in range(10)]
    assert loop._timer_count() == 10
    assert sys.getrefcount(payload) == refs_before + 10
    for t in timers[::2]:
        t.cancel()
    assert loop._timer_count() == 5
    # A cancelled timer no longer keeps its arguments alive.
    assert sys.getrefcount(payload) == refs_before + 5
    assert all(t.cancelled() for t in timers[::2])
    assert not any(t._scheduled for t in timers[::2])
    assert all(t._scheduled for t in timers[1::2])


def test_cancel_in_the_middle_keeps_heap_order(loop):
    """Removing arbitrary entries keeps (when, insertion order) ordering."""
    import random
    rng = random.Random(7)
    fired = []
    base = loop.time()
    timers = []
    for i in range(2000):
        when = base + rng.choice([0.001, 0.002, 0.003, 0.004])
        timers.append((when, i, loop.call_at(when, fired.append, (when, i))))
    cancelled = set(rng.sample(range(2000), 900))
    for when, i, t in timers:
        if i in cancelled:
            t.cancel()
    loop.call_at(base + 0.01, loop.stop)
    loop.run_forever()
    expected = sorted((w, i) for w, i, _ in timers if i not in cancelled)
    assert fired == expected


def test_busy_loop_still_polls_io(loop):
    """Skipping the poll while callbacks are ready must not starve I/O: with
    a callback chain that never ends and a readable socket, the reader runs."""
    a, b = socket.socketpair()
    try:
        seen = []
        spins = [0]

        def spin():
            spins[0] += 1
            if seen or spins[0] > 100_000:
                loop.stop()
            else:
                loop.call_soon(spin)

        loop.add_reader(a.fileno(), lambda: seen.append(a.recv(10)))
        b.send(b'x')
        loop.call_soon(spin)
        loop.run_forever()
        assert seen == [b'x']
        assert spins[0] <= 3
        loop.remove_reader(a.fileno())
    finally:
        a.close()
        b.close()


def test_unclosed_loop_with_pending_callbacks_is_collected():
    """Handles in the C queues refer back to the loop; the cycle collector
    must still find an unclosed, dropped loop, warn, and close its fds."""
    gc.collect()
    fds_before = open_fds()
    loop = minloop.new_event_loop()
    loop.call_soon(print, 'never')
    loop.call_later(100, print, 'never')
    r, w = os.pipe()
    loop.add_reader(r, print, 'never')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        del loop
        gc.collect()
    os.close(r)
    os.close(w)
    assert any(issubclass(w.category, ResourceWarning) and 'unclosed event loop' in str(w.message)
               for w in caught)
    if fds_before:
        assert open_fds() == fds_before


def test_close_releases_the_loops_fds():
    fds_before = open_fds()
    if not fds_before:
        pytest.skip('needs /proc/self/fd')
    loop = minloop.new_event_loop()
    # poller + wake-up eventfd (+ the telemetry page's memfd where there is one)
    page = 1 if loop._telemetry_page[0] >= 0 else 0
    if OVER_LIBKQUEUE:
        # libkqueue's kqueue holds several descriptors of its own (its
        # epoll, a pipe, a filter's eventfd): only that close gives all back.
        assert len(open_fds()) > len(fds_before) + 1 + page
    else:
        assert len(open_fds()) == len(fds_before) + 2 + page
    loop.close()
    assert open_fds() == fds_before


def test_poller_backend_name():
    # Linux's is epoll, but for the test build of the kqueue poller over
    # libkqueue (setup.py's MINLOOP_POLLER=kqueue).
    expected = 'epoll' if sys.platform.startswith('linux') and not OVER_LIBKQUEUE else 'kqueue'
    assert minloop.poller_backend_name() == expected


# --- Queued handles and the cycle collector ---------------------------------
# Handles in the loop's C containers are untracked by the collector and the
# loop reports their references instead (loop.pyx, "Garbage collection").
# These pin down that nothing is leaked or cleared under a live object.

import weakref


class Owner:
    """Holds the handle whose callback is its own bound method: a cycle."""

    def __init__(self, loop, timer=False):
        self.payload = {'alive': True}
        if timer:
            self.handle = loop.call_later(0, self.fire)
        else:
            self.handle = loop.call_soon(self.fire)
        self.fired = False

    def fire(self):
        self.fired = True


def run_one_iteration(loop):
    loop.call_soon(loop.stop)
    loop.run_forever()


@pytest.mark.parametrize('timer', [False, True], ids=['call_soon', 'call_later'])
def test_cycle_through_a_handle_that_ran_is_collected(loop, timer):
    owner = Owner(loop, timer)
    ref = weakref.ref(owner)
    assert not gc.is_tracked(owner.handle)   # queued: the loop reports it
    loop.run_until_complete(asyncio_sleep(0.002))
    assert owner.fired
    assert gc.is_tracked(owner.handle)       # out of the loop: tracked again
    del owner
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize('timer', [False, True], ids=['call_soon', 'call_later'])
def test_cycle_through_a_cancelled_handle_is_collected(loop, timer):
    owner = Owner(loop, timer)
    ref = weakref.ref(owner)
    owner.handle.cancel()
    if timer:
        assert gc.is_tracked(owner.handle)   # left the heap at once
    del owner
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize('timer', [False, True], ids=['call_soon', 'call_later'])
def test_cycle_through_a_held_handle_is_collected_while_the_loop_runs(loop, timer):
    """A handle the program holds after it ran stays with the loop for one
    more iteration (untracked, reported by the loop), then is tracked again:
    a cycle through it is collected without the loop ever stopping."""
    def step():   # one iteration that does not block (run_forever's exit
        loop.call_soon(int)   # would let go of everything at once)
        loop._run_once()

    owner = Owner(loop, timer)
    ref = weakref.ref(owner)
    handle = owner.handle
    step()                     # the callback runs
    assert owner.fired
    gc.collect()
    assert ref() is not None   # held by the program (and the loop) still
    assert not gc.is_tracked(handle)
    step()
    step()                     # one full iteration later: the loop let go
    assert gc.is_tracked(handle)
    del owner, handle
    gc.collect()
    assert ref() is None


def test_a_handle_nobody_holds_dies_untracked_after_its_run(loop):
    """A callback's handle that nobody keeps is freed at once, never put back
    in the collector's youngest generation."""
    class Payload:
        pass

    payload = Payload()
    ref = weakref.ref(payload)
    loop.call_soon(lambda p: None, payload)
    del payload
    loop._run_once()
    assert ref() is None


def test_pending_handle_keeps_its_objects_alive_through_collections(loop):
    """Objects reachable only through queued handles survive gc.collect()."""
    owners = [Owner(loop, timer=bool(i % 2)) for i in range(100)]
    refs = [weakref.ref(o) for o in owners]
    handles = [o.handle for o in owners]
    del owners
    for _ in range(3):
        gc.collect()
    assert all(r() is not None for r in refs)
    assert all(r().payload == {'alive': True} for r in refs)
    loop.run_until_complete(asyncio_sleep(0.002))
    assert all(r().fired for r in refs)
    del handles
    gc.collect()
    assert all(r() is None for r in refs)


def test_handle_held_by_user_survives_its_dropped_loop():
    """A user keeps a pending handle while the (unclosed) loop is dropped: the
    loop is finalized, but the handle's callback and arguments stay intact."""
    loop = minloop.new_event_loop()
    payload = {'data': [1, 2, 3]}
    kept = loop.call_later(100, dict.update, payload, {'more': 1})
    payload_ref = weakref.ref(type('P', (), {})())  # a dummy to keep the API
    del payload, payload_ref
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ResourceWarning)
        del loop
        for _ in range(3):
            gc.collect()
    assert kept._args[0] == {'data': [1, 2, 3]}
    assert kept._callback is dict.update
    kept.cancel()
    assert kept.cancelled()


def test_reader_in_fd_table_and_ready_queue_at_once_collects_cleanly(loop):
    """A fired reader sits in the fd table and the ready queue together; a
    collection at that moment must report it once and keep it alive."""
    a, b = socket.socketpair()
    try:
        got = []
        loop.add_reader(a.fileno(), lambda: got.append(a.recv(10)))
        for chunk in (b'x', b'y'):
            b.send(chunk)
            # The iteration polls first (queuing the reader behind this
            # callback), then runs the collection, then the reader.
            loop.call_soon(gc.collect)
            loop._run_once()
        assert got == [b'x', b'y']
        loop.remove_reader(a.fileno())
    finally:
        a.close()
        b.close()


def test_million_queued_callbacks_are_not_walked_by_collections(loop):
    """The point of untracking: queued handles add nothing to gen-2 scans."""
    tracked_before = len(gc.get_objects())
    for _ in range(10_000):
        loop.call_soon(int)
    tracked_after = len(gc.get_objects())
    # The contexts copied for each handle are tracked; the handles are not.
    assert tracked_after - tracked_before < 10_000 * 1.5
    run_one_iteration(loop)


def asyncio_sleep(delay):
    import asyncio
    return asyncio.sleep(delay)


def test_threadsafe_wakes_only_a_blocked_loop(loop):
    """call_soon_threadsafe writes to the wake-up fd only while the loop is
    (about to be) blocked in the poller, and once per sleep."""
    import threading

    # Not running: nothing to wake.
    t = threading.Thread(target=lambda: [loop.call_soon_threadsafe(int) for _ in range(1000)])
    t.start()
    t.join()
    assert loop._wakeups_sent == 0
    run_one_iteration(loop)

    # Blocked in a long poll: one burst of calls from a thread wakes it once.
    done = []

    def burst():
        time.sleep(0.1)   # let the loop block in the poller first
        for _ in range(1000):
            loop.call_soon_threadsafe(done.append, 1)
        loop.call_soon_threadsafe(loop.stop)

    loop.call_later(30, loop.stop)     # the poll would block for 30 s
    loop.call_soon(lambda: threading.Thread(target=burst).start())
    t0 = loop.time()
    loop.run_forever()
    assert loop.time() - t0 < 5
    assert len(done) == 1000
    # One write per blocking poll; the loop may block again between the
    # thread's calls, but never once per call.
    assert 1 <= loop._wakeups_sent < 100


def test_interest_changes_reach_the_poller_only_when_they_change(loop):
    """No redundant epoll_ctl: re-adding a reader, or removing what is not
    there, leaves the kernel's interest set alone."""
    r, w = os.pipe()
    try:
        base = loop._poller_changes
        loop.add_reader(r, int)
        assert loop._poller_changes == base + 1
        loop.add_reader(r, float)            # replaces the handle only
        assert loop._poller_changes == base + 1
        loop.add_writer(r, int)              # read -> read|write
        assert loop._poller_changes == base + 2
        loop.add_writer(r, float)
        assert loop._poller_changes == base + 2
        assert loop.remove_writer(r) is True
        assert loop._poller_changes == base + 3
        assert loop.remove_writer(r) is False
        assert loop.remove_reader(r) is True
        assert loop.remove_reader(r) is False
        assert loop._poller_changes == base + 4
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs fork()')
@pytest.mark.main_interpreter("fork")
def test_forked_child_closing_the_loop_leaves_the_parents_alone(loop):
    """Parent and child share the epoll instance after fork(): a child that
    closes its copy of the loop must not unregister the parent's fds."""
    import signal

    a, b = socket.socketpair()
    try:
        got = []
        loop.add_reader(a.fileno(), lambda: got.append(a.recv(10)))
        loop.add_signal_handler(signal.SIGUSR2, got.append, 'signal')
        pid = os.fork()
        if pid == 0:   # child
            try:
                loop.close()
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert status == 0
        b.send(b'after-fork')
        os.kill(os.getpid(), signal.SIGUSR2)
        loop.call_later(0.5, loop.stop)
        deadline = time.monotonic() + 5

        def check():
            if len(got) >= 2 or time.monotonic() > deadline:
                loop.stop()
            else:
                loop.call_later(0.01, check)

        loop.call_soon(check)
        loop.run_forever()
        assert sorted(map(str, got)) == sorted(map(str, [b'after-fork', 'signal']))
        loop.remove_signal_handler(signal.SIGUSR2)
        loop.remove_reader(a.fileno())
    finally:
        a.close()
        b.close()


def epoll_targets(epfd):
    """The fds registered in an epoll instance, from /proc/self/fdinfo."""
    with open(f'/proc/self/fdinfo/{epfd}') as f:
        return {int(line.split()[1]) for line in f if line.startswith('tfd:')}


@pytest.mark.skipif(not os.path.isdir('/proc/self/fdinfo') or not hasattr(os, 'fork'),
                    reason='needs Linux /proc and fork()')
@pytest.mark.main_interpreter("fork")
def test_forked_child_using_the_loop_gets_its_own_poller(loop):
    """A child that uses an inherited loop polls a poller of its own: its
    readers work and (epoll, whose instance the child inherits) do not land
    in the parent's interest set; the parent's readers work after."""
    epoll = minloop.poller_backend_name() == 'epoll'
    a, b = socket.socketpair()
    to_parent_r, to_parent_w = os.pipe()
    to_child_r, to_child_w = os.pipe()
    try:
        parent_got = []
        loop.add_reader(a.fileno(), lambda: (parent_got.append(a.recv(10)), loop.stop()))
        if epoll:
            parent_targets = epoll_targets(loop._poller_fd())
            assert a.fileno() in parent_targets
        pid = os.fork()
        if pid == 0:   # child
            code = 1
            try:
                import signal
                signal.alarm(10)          # never outlive a broken test
                os.close(to_parent_r)
                os.close(to_child_w)
                r, w = os.pipe()
                high = os.dup2(r, 900)
                got = []
                loop.add_reader(high, lambda: (got.append(os.read(high, 10)), loop.stop()))
                os.write(w, b'child')
                os.write(to_parent_w, b'ready')
                loop.call_later(5, loop.stop)
                loop.run_forever()
                # Wait until the parent has looked at its interest set.
                os.read(to_child_r, 1)
                code = 0 if got == [b'child'] and (
                    not epoll or 900 in epoll_targets(loop._poller_fd())) else 2
                loop.close()
            finally:
                os._exit(code)
        os.close(to_parent_w)   # so a dead child reads as EOF, not a hang
        to_parent_w = None
        assert os.read(to_parent_r, 5) == b'ready'
        if epoll:
            assert 900 not in epoll_targets(loop._poller_fd())
            assert epoll_targets(loop._poller_fd()) == parent_targets
        os.write(to_child_w, b'x')
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        b.send(b'parent')
        loop.call_later(5, loop.stop)
        loop.run_forever()
        assert parent_got == [b'parent']
        loop.remove_reader(a.fileno())
    finally:
        for fd in (to_parent_r, to_parent_w, to_child_r, to_child_w):
            if fd is not None:
                os.close(fd)
        a.close()
        b.close()


UNINITIALISED_TRANSPORT_SCRIPT = r"""
import asyncio, sys
import minloop
from minloop import datagram, pipes, stream

loop = minloop.new_event_loop()
for cls in (stream.SocketTransport, datagram.DatagramTransport,
            pipes.ReadPipeTransport, pipes.WritePipeTransport):
    try:
        cls.__new__(cls)
    except TypeError:
        pass
    else:
        sys.exit(f"{cls.__name__}.__new__() without a loop did not raise")
    t = cls.__new__(cls, loop)
    # Every public method either works or raises: none may crash.
    for name in ("__repr__", "close", "abort", "is_closing", "get_protocol",
                 "get_write_buffer_size", "get_write_buffer_limits",
                 "pause_reading", "resume_reading", "is_reading",
                 "write_eof", "can_write_eof"):
        method = getattr(t, name, None)
        if method is not None:
            try:
                method()
            except Exception:
                pass
    for name, args in (("write", (b"x",)), ("sendto", (b"x",)),
                       ("set_write_buffer_limits", (10, 5))):
        method = getattr(t, name, None)
        if method is not None:
            try:
                method(*args)
            except Exception:
                pass
    del t
loop.close()
print("ok")
"""


def test_transports_made_without_init_cannot_crash(tmp_path):
    """cls.__new__(cls) then methods: exceptions at worst, never a segfault."""
    proc = subprocess.run([sys.executable, "-c", UNINITIALISED_TRANSPORT_SCRIPT],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip() == "ok"


@pytest.mark.skipif(not sys.platform.startswith('linux') or OVER_LIBKQUEUE or
                    os.uname().machine not in ('x86_64', 'aarch64', 'i686'),
                    reason='epoll_pwait2 is compiled in for these Linux machines')
def test_build_includes_epoll_pwait2():
    """Wheels are built against old kernel headers (manylinux images), which
    lack epoll_pwait2's number: the poller supplies it, so every build can
    use nanosecond timeouts where the kernel has them."""
    from minloop.loop import _poller_probe_pwait2
    assert _poller_probe_pwait2() != -1   # -1: compiled without it


def test_connections_share_their_host_strings(loop):
    """Each connection keeps sockname and peername for get_extra_info(); the
    host strings, equal for every connection here, are one object (not one
    per connection), and the values are what the socket module gives."""
    import asyncio
    transports = []

    class Keep(asyncio.Protocol):
        def connection_made(self, transport):
            transports.append(transport)

    async def main():
        srv = await loop.create_server(Keep, '127.0.0.1', 0)
        clients = [socket.create_connection(srv.sockets[0].getsockname()) for _ in range(3)]
        while len(transports) < 3:
            await asyncio_sleep(0.001)
        try:
            for t, c in zip(transports, clients):
                assert t.get_extra_info('peername') == c.getsockname()
                assert t.get_extra_info('sockname') == c.getpeername()
            hosts = {id(t.get_extra_info(k)[0]) for t in transports
                     for k in ('peername', 'sockname')}
            assert len(hosts) == 1
        finally:
            for c in clients:
                c.close()
            for t in transports:
                t.close()
            srv.close()
            await srv.wait_closed()

    loop.run_until_complete(main())


def test_transports_read_into_a_page_aligned_buffer(loop):
    """The loop's read buffer starts a page: the kernel's copy of a read
    into memory 1-31 bytes past a page-aligned source ran 2-3x slower
    (AMD EPYC), and malloc() put a buffer of this size 16 bytes in."""
    assert loop._read_buffer_address() == 0     # made on the first read
    a, b = socket.socketpair()
    got = []

    class Reader:
        def connection_made(self, transport):
            pass

        def data_received(self, data):
            got.append(data)
            loop.stop()

        def connection_lost(self, exc):
            pass

    async def connect():
        await loop.create_connection(Reader, sock=a)

    loop.run_until_complete(connect())
    b.send(b"x" * 100)
    loop.run_forever()
    assert got == [b"x" * 100]
    address = loop._read_buffer_address()
    assert address != 0
    assert address % os.sysconf("SC_PAGE_SIZE") == 0
    b.close()


@pytest.mark.skipif(bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
                    reason="free-threaded builds copy a context per handle, as asyncio")
@pytest.mark.skipif(sys.implementation.name != 'cpython' or sys.version_info >= (3, 16),
                    reason="the context layout is known for CPython 3.10-3.15 only")
def test_context_snapshots_are_shared_where_the_layout_is_known():
    """Snapshot sharing, lone snapshots run as their handle's own and the
    spare copy all hang on the import-time check of CPython's Context layout
    (its variables, and where its weak references are): a check that failed
    would turn them off silently, only the figures would show it."""
    from minloop import handles
    assert handles._check_context_layout() is True
