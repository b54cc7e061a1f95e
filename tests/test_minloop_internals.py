"""minloop-only guarantees that asyncio's loop does not make (or has no way
to show): the timer heap gives memory back, cancelled timers leave it at once,
the poll-skipping shortcut never starves I/O, and the C containers are visible
to the garbage collector."""

import gc
import os
import socket
import sys
import tracemalloc
import warnings

import pytest

import minloop


def open_fds():
    return set(os.listdir('/proc/self/fd')) if os.path.isdir('/proc/self/fd') else set()


@pytest.fixture
def loop():
    loop = minloop.new_event_loop()
    yield loop
    loop.close()


@pytest.mark.skipif(sys.flags.dev_mode, reason="memory accounting under the debug "
                    "allocator is slow and padded; the normal run checks it")
def test_million_timers_armed_and_cancelled_leave_an_empty_heap(loop):
    """After 1,000,000 timers are armed and cancelled, the heap holds 0
    entries, its array shrank back, and Python memory returns to where it was."""
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
    assert len(open_fds()) == len(fds_before) + 2   # poller + wake-up eventfd
    loop.close()
    assert open_fds() == fds_before


def test_poller_backend_name():
    expected = 'epoll' if sys.platform.startswith('linux') else 'kqueue'
    assert minloop.poller_backend_name() == expected
