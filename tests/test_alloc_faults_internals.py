"""Allocation failures in minloop's own growth paths (issue 45): each gives
the caller a MemoryError, or the protocol asyncio's report of a fatal
error, and never a crash, a lost or reordered timer or callback, or a
stream that goes on with bytes missing.

Needs a build with the allocation switches (`MINLOOP_ALLOC_FAULTS=1 pip
install .`, src/alloc_faults.h); skipped on any other, which is every
normal build.  scripts/fault-check builds one and runs this file.
"""
import asyncio
import os
import random
import socket
import threading

import pytest

import minloop
from minloop import loop as loop_mod
from minloop import stream as stream_mod

try:
    loop_mod._alloc_faults("timer_heap")
except RuntimeError:
    pytestmark = pytest.mark.skip(reason="minloop built without MINLOOP_ALLOC_FAULTS=1")


@pytest.fixture
def loop():
    lp = minloop.new_event_loop()
    yield lp
    for mod in (loop_mod, stream_mod):
        for site in ("timer_heap", "ready_ring", "fd_table", "read_buffer", "write_queue"):
            mod._alloc_faults(site, 0, 0)
    lp.close()


@pytest.mark.parametrize("skip", [0, 1, 2, 3])
def test_timer_heap_growth_fails(loop, skip):
    """call_later raises MemoryError while the heap cannot grow; every
    timer it accepted fires once, in (when, scheduling) order."""
    rng = random.Random(skip)
    fired, accepted, refused = [], [], 0
    loop_mod._alloc_faults("timer_heap", skip, 4)
    for i in range(3000):
        delay = rng.choice([0, 0.001, 0.002, 0.005, 0.01])
        try:
            h = loop.call_later(delay, fired.append, i)
        except MemoryError:
            refused += 1
            continue
        accepted.append((h.when(), i))
    assert loop_mod._alloc_faults("timer_heap", 0, 0) == refused > 0
    loop.run_until_complete(asyncio.sleep(0.05))
    assert fired == [i for _, i in sorted(accepted)]


def test_timer_heap_scratch_fails_while_draining(loop):
    """The heap's scratch for draining many due timers at once, and for
    renumbering, cannot be allocated: the timers still all fire, in order."""
    fired = []
    order = []
    for i in range(5000):
        h = loop.call_later(0.001 * (i % 7), fired.append, i)
        order.append((h.when(), i))
    loop_mod._alloc_faults("timer_heap", 0, 10 ** 9)
    loop.run_until_complete(asyncio.sleep(0.02))
    loop_mod._alloc_faults("timer_heap", 0, 0)
    assert fired == [i for _, i in sorted(order)]


@pytest.mark.parametrize("skip", [0, 1, 2, 4])
def test_ready_ring_growth_fails(loop, skip):
    """call_soon raises MemoryError while the ring cannot grow; every
    callback it accepted runs once, in order."""
    ran, accepted = [], []
    loop_mod._alloc_faults("ready_ring", skip, 3)
    for i in range(20000):
        try:
            loop.call_soon(ran.append, i)
        except MemoryError:
            continue
        accepted.append(i)
    assert loop_mod._alloc_faults("ready_ring", 0, 0) > 0
    loop.run_until_complete(asyncio.sleep(0))
    assert ran == accepted


def test_due_timers_wait_while_the_ring_cannot_grow(loop):
    """Due timers that the ready ring cannot take stay in the heap and run
    later, in order: no timer is lost."""
    fired, order = [], []
    for i in range(20000):
        h = loop.call_later(0, fired.append, i)
        order.append((h.when(), i))
    waiter = loop.create_task(asyncio.sleep(0.01))
    loop_mod._alloc_faults("ready_ring", 0, 5)
    errors = 0
    while len(fired) < len(order) or not waiter.done():
        try:
            loop.run_until_complete(waiter)
        except MemoryError:
            # The iteration's error reaches run_until_complete's caller,
            # as asyncio's _run_once's would.
            errors += 1
        if errors == 5:
            loop_mod._alloc_faults("ready_ring", 0, 0)
    assert errors == 5
    assert fired == [i for _, i in sorted(order)]


def test_call_soon_threadsafe_growth_fails(loop):
    """Another thread's call_soon_threadsafe gets the MemoryError; what it
    queued before and after runs."""
    ran, errors = [], []

    def producer():
        for i in range(20000):
            try:
                loop.call_soon_threadsafe(ran.append, i)
            except MemoryError:
                errors.append(i)

    loop_mod._alloc_faults("ready_ring", 2, 2)
    t = threading.Thread(target=producer)
    t.start()
    t.join()
    loop_mod._alloc_faults("ready_ring", 0, 0)
    loop.run_until_complete(asyncio.sleep(0.01))
    assert errors and ran == [i for i in range(20000) if i not in set(errors)]


def test_fd_table_growth_fails(loop):
    """add_reader on an fd beyond the table raises MemoryError while the
    table cannot grow, and works once it can."""
    a, b = socket.socketpair()
    high = os.dup2(a.fileno(), 4000)
    try:
        loop_mod._alloc_faults("fd_table", 0, 1)
        with pytest.raises(MemoryError):
            loop.add_reader(high, lambda: None)
        got = loop.create_future()
        loop.add_reader(high, lambda: got.done() or got.set_result(os.read(high, 10)))
        b.send(b"x")
        assert loop.run_until_complete(got) == b"x"
        assert loop.remove_reader(high)
    finally:
        os.close(high)
        a.close()
        b.close()


class Sink(asyncio.Protocol):
    def __init__(self):
        self.data = bytearray()
        self.lost = None
        self.done = asyncio.get_running_loop().create_future()

    def data_received(self, data):
        self.data += data

    def connection_lost(self, exc):
        self.done.set_result(exc)


@pytest.mark.parametrize("size", [1000, 200_000])   # one copied read; large reads
@pytest.mark.parametrize("skip", [0, 1, 3])
def test_read_buffer_fails(loop, skip, size):
    """A stream transport that cannot allocate the bytes of a read reports
    it as asyncio does (connection_lost(MemoryError), a fatal read error);
    it never goes on with the read's bytes gone."""
    payload = random.Random(size).randbytes(size)
    reports = []
    loop.set_exception_handler(lambda lp, ctx: reports.append(ctx))

    async def main():
        a, b = socket.socketpair()
        b.setblocking(False)
        transport, proto = await loop.create_connection(Sink, sock=a)
        stream_mod._alloc_faults("read_buffer", skip, 1)
        try:
            for i in range(0, size, 997):
                await loop.sock_sendall(b, payload[i:i + 997])
                await asyncio.sleep(0)
        except ConnectionError:
            pass     # the transport gave up on the stream
        b.close()
        exc = await proto.done
        stream_mod._alloc_faults("read_buffer", 0, 0)
        transport.close()
        return proto, exc

    proto, exc = loop.run_until_complete(main())
    if isinstance(exc, MemoryError):
        assert bytes(proto.data) == payload[:len(proto.data)]
    else:
        assert exc is None and bytes(proto.data) == payload, (exc, len(proto.data), reports)


def test_write_queue_fails(loop):
    """write() that cannot queue what the kernel refused raises MemoryError
    to its caller (as asyncio's buffer.extend would); the transport still
    closes, and the loop watches nothing more."""
    watched = loop.stats().fds_watched

    async def main():
        a, b = socket.socketpair()
        b.setblocking(False)
        transport, proto = await loop.create_connection(Sink, sock=a)
        chunk = b"x" * 1_000_000
        transport.write(chunk)             # the kernel takes part; the rest queues
        stream_mod._alloc_faults("write_queue", 0, 1)
        with pytest.raises(MemoryError):
            transport.write(chunk)
        stream_mod._alloc_faults("write_queue", 0, 0)
        transport.abort()
        await proto.done
        b.close()

    loop.run_until_complete(main())
    assert loop.stats().fds_watched == watched
