"""A transport whose connection_lost() has run touches its fd no more.

Once connection_lost() has run, the transport's file is closed and its fd
number may be another file's: a write, a writer or a read that still used
the number would reach that file.  Both loops: asyncio's is the
specification (its calls on its cleared socket and loop fail with
AttributeError); nothing may reach the file that took the number.

And the loop's one read buffer: what a transport read is copied out of it
before any Python code runs, so another transport reading into it from that
code cannot change the data.
"""

import asyncio
import os
import socket
import sys

import pytest

BIG = bytes(range(256)) * 16384          # 4 MiB: more than a socketpair holds


class Lost(asyncio.Protocol):
    def __init__(self, loop):
        self.lost = loop.create_future()

    def connection_lost(self, exc):
        self.lost.set_result(exc)


async def drain(loop, sock, size):
    got = 0
    while got < size:
        data = await loop.sock_recv(sock, 1 << 20)
        assert data
        got += len(data)


async def flushed_close(loop, protocol):
    """A stream transport on a socketpair, closed with BIG queued, the peer
    having read all of it and connection_lost() having run; the transport's
    fd and the peer."""
    a, b = socket.socketpair()
    b.setblocking(False)
    tr, _ = await loop.create_connection(lambda: protocol, sock=a)
    fd = a.fileno()
    tr.write(BIG)
    assert tr.get_write_buffer_size() > 0
    tr.close()
    await drain(loop, b, len(BIG))
    await asyncio.wait_for(protocol.lost, 5)
    return tr, fd, b


def pair_on(fd):
    """A socketpair whose first socket has the number fd (just freed)."""
    c, d = socket.socketpair()
    if c.fileno() != fd:
        c.close()
        d.close()
        pytest.skip("the freed fd number was not reused")
    c.setblocking(False)
    d.setblocking(False)
    return c, d


def nothing_waiting(sock):
    try:
        return sock.recv(1 << 16) == b"nothing"
    except BlockingIOError:
        return True


# A flushed close() counts the connection lost from 3.14 (gh-156512).
FLUSHED_CLOSE_COUNTS_LOST = sys.version_info >= (3, 14)


@pytest.mark.parametrize("method", ["write", "writelines", "abort"])
def test_stream_after_flushed_close(loop, method):
    """close() with data queued: the flush ends in connection_lost(), with
    _conn_lost still 0.  A write then went out on the closed fd number --
    into whatever socket had taken it (minloop); asyncio's send on its
    cleared socket fails, and so does its report of that on its cleared
    loop.  abort() fails on the cleared loop's call_soon."""
    expected = {
        "write": "call_exception_handler",
        # 3.12+ asyncio fails in its sendmsg() path instead ('_remove_writer'),
        # or, before gh-136234, calls its cleared _write_ready (TypeError).
        "writelines": None,
        "abort": "call_soon",
    }[method]

    def call(tr):
        if method == "abort":
            tr.abort()
        else:
            getattr(tr, method)(b"LEAK" if method == "write" else [b"LEAK"])

    async def main():
        tr, fd, b = await flushed_close(loop, Lost(loop))
        c, d = pair_on(fd)
        try:
            if FLUSHED_CLOSE_COUNTS_LOST:
                # 3.14 (gh-156512): the flush counted the connection lost,
                # so these are counted or ignored as after any loss.
                call(tr)
            else:
                errors = (AttributeError, TypeError) if method == "writelines" else AttributeError
                with pytest.raises(errors) as info:
                    call(tr)
                if expected is not None:
                    assert str(info.value) == f"'NoneType' object has no attribute '{expected}'"
            for _ in range(3):
                await asyncio.sleep(0)
            assert nothing_waiting(d)
        finally:
            for s in (b, c, d):
                s.close()

    loop.run_until_complete(asyncio.wait_for(main(), 10))


def test_stream_no_writer_outlives_the_socket(loop):
    """connection_lost() (after close() flushed) writes more than the socket
    takes: the rest is queued and a writer armed, then the socket closes.
    minloop's writer stayed in the fd table: once another socket took the
    number and was watched, it sent the rest into that socket."""
    reported = []
    loop.set_exception_handler(lambda lp, ctx: reported.append(ctx))

    class WritesWhenLost(Lost):
        def connection_made(self, transport):
            self.transport = transport

        def connection_lost(self, exc):
            self.transport.write(BIG)
            super().connection_lost(exc)

    async def main():
        proto = WritesWhenLost(loop)
        tr, fd, b = await flushed_close(loop, proto)
        c, d = pair_on(fd)
        try:
            # A transport on the socket that took the number: its fd is
            # watched again.
            tr2, _ = await loop.create_connection(lambda: Lost(loop), sock=c)
            for _ in range(5):
                await asyncio.sleep(0.005)
            assert nothing_waiting(d)
            tr2.close()
        finally:
            b.close()
            d.close()

    loop.run_until_complete(asyncio.wait_for(main(), 10))


def test_data_is_copied_out_of_the_read_buffer_before_python_runs(loop):
    """Every transport of a loop reads into the loop's one buffer.  A read
    pipe's protocol whose data_received is looked up through Python code
    (a property) that makes another read pipe read: the first pipe's data
    must already be out of the buffer."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    got = {}

    class Second(asyncio.Protocol):
        def data_received(self, data):
            got["second"] = data

    class First(asyncio.Protocol):
        other = None

        @property
        def data_received(self):
            if self.other is not None:
                other, self.other = self.other, None
                other._read_ready()       # a read of the other pipe, now
            return lambda data: got.setdefault("first", data)

    async def main():
        first = First()
        tr1, _ = await loop.connect_read_pipe(lambda: first, os.fdopen(r1, "rb"))
        tr2, _ = await loop.connect_read_pipe(Second, os.fdopen(r2, "rb"))
        await asyncio.sleep(0)
        tr2.pause_reading()
        os.write(w2, b"2" * 1000)
        first.other = tr2
        os.write(w1, b"1" * 100)
        while "first" not in got:
            await asyncio.sleep(0.001)
        tr1.close()
        tr2.close()
        await asyncio.sleep(0)

    try:
        loop.run_until_complete(asyncio.wait_for(main(), 10))
    finally:
        os.close(w1)
        os.close(w2)
    assert got == {"second": b"2" * 1000, "first": b"1" * 100}
