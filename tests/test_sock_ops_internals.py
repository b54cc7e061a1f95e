"""minloop-only checks of the compiled sock_* coroutines (sock_ops.pyx):
what asyncio's loop has no way to show.  The fast path creates no future and
touches no poller interest; a blocked operation adds and removes its fd's
interest exactly once; the waiter objects do not outlive the operation."""

import asyncio
import gc
import socket

import pytest

import minloop
from minloop import sock_ops


class CountingLoop(minloop.Loop):
    futures = 0

    def create_future(self):
        self.futures += 1
        return super().create_future()


@pytest.fixture
def loop():
    loop = CountingLoop()
    loop.set_debug(False)
    yield loop
    loop.close()


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def waiters_alive():
    return [o for o in gc.get_objects()
            if type(o).__module__ == 'minloop.sock_ops' and type(o).__name__.endswith('Wait')]


def test_methods_are_the_compiled_ones():
    for name in sock_ops.METHODS:
        if hasattr(minloop.Loop, name):
            assert getattr(minloop.Loop, name) is getattr(sock_ops, name)


def test_fast_path_makes_no_future_and_no_poller_change(loop, pair):
    a, b = pair

    async def main():
        changes = loop._poller_changes
        for _ in range(100):
            await loop.sock_sendall(a, b'ping')
            assert await loop.sock_recv(b, 4) == b'ping'
            await loop.sock_sendall(b, bytearray(b'pong'))
            buf = bytearray(4)
            assert await loop.sock_recv_into(a, buf) == 4
        return loop._poller_changes - changes
    assert loop.run_until_complete(main()) == 0
    assert loop.futures == 0


def test_blocked_recv_arms_interest_once_and_removes_it_for_free(loop, pair):
    """The one-shot registration is disarmed by the kernel when it fires, so
    the operation's end makes no syscall; each later wait re-arms it with
    one change."""
    a, b = pair

    async def main():
        changes = loop._poller_changes
        task = asyncio.ensure_future(loop.sock_recv(a, 10))
        await asyncio.sleep(0)
        assert loop._poller_changes - changes == 1     # the reader
        b.send(b'x')
        assert await task == b'x'
        assert loop._poller_changes - changes == 1
        for i in range(10):
            task = asyncio.ensure_future(loop.sock_recv(a, 10))
            await asyncio.sleep(0)
            b.send(b'y')
            assert await task == b'y'
        return loop._poller_changes - changes
    assert loop.run_until_complete(main()) == 11
    assert loop.futures == 11


def test_waiters_do_not_outlive_their_operation(loop, pair):
    a, b = pair

    async def main():
        for _ in range(20):
            task = asyncio.ensure_future(loop.sock_recv(a, 10))
            await asyncio.sleep(0)
            b.send(b'x')
            await task
        task = asyncio.ensure_future(loop.sock_recv(a, 10))
        await asyncio.sleep(0)
        assert len(waiters_alive()) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        del task
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        await loop.sock_sendall(b, b'y')
        send = asyncio.ensure_future(loop.sock_sendall(a, b'z' * 1_000_000))
        got = 0
        while got < 1_000_000:
            got += len(await loop.sock_recv(b, 1 << 20))
        await send
    gc.disable()    # they must go by reference counting alone
    try:
        loop.run_until_complete(main())
        assert waiters_alive() == []
    finally:
        gc.enable()


def test_abandoned_pending_operation_is_collectable(loop, pair):
    a, b = pair
    task = loop.create_task(loop.sock_recv(a, 10))
    loop.run_until_complete(asyncio.sleep(0))
    assert not task.done()
    task.cancel()
    loop.run_until_complete(asyncio.sleep(0))
    del task
    gc.collect()
    assert waiters_alive() == []
    assert loop.remove_reader(a.fileno()) is False


def test_debug_repr_names_the_operation(loop, pair):
    a, b = pair
    loop.set_debug(True)

    async def main():
        task = asyncio.ensure_future(loop.sock_recv(a, 10))
        await asyncio.sleep(0)
        (waiter,) = waiters_alive()
        assert repr(waiter).startswith('<RecvWait fd=')
        b.send(b'x')
        await task
    loop.run_until_complete(main())
