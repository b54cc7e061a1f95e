"""How the stream transport reaches its protocol, as asyncio does.

Two regressions found by running real programs on minloop:
* a protocol factory runs in a fresh copy of the server's context for each
  connection (asyncio sets each connection up in a task of its own), so a
  context variable set for one connection is not seen by the next;
* data_received is looked up on every read, so a protocol that replaces it
  (a state machine, a test's mock) gets the data in the new handler.
"""

import asyncio
import contextvars

import pytest

var = contextvars.ContextVar("var", default=None)


def test_protocol_factory_runs_in_a_fresh_context_per_connection(loop):
    seen = []
    made = []

    class P(asyncio.Protocol):
        def __init__(self):
            seen.append(var.get())
            made.append(None)
            var.set(len(made))

        def connection_made(self, transport):
            # The factory's context is the connection's context.
            seen.append(("made", var.get()))
            transport.close()

    async def main():
        server = await loop.create_server(P, "127.0.0.1", 0)
        for _ in range(3):
            r, w = await asyncio.open_connection(*server.sockets[0].getsockname())
            await r.read()
            w.close()
            await w.wait_closed()
        server.close()
        await server.wait_closed()

    loop.run_until_complete(main())
    assert seen == [None, ("made", 1), None, ("made", 2), None, ("made", 3)]


def test_replaced_data_received_gets_the_data(loop):
    got = []

    class P(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport
            self.data_received = self.body_received

        def data_received(self, data):  # replaced before any data arrives
            got.append(("initial", data))

        def body_received(self, data):
            got.append(("body", data))
            self.transport.close()

    async def main():
        server = await loop.create_server(P, "127.0.0.1", 0)
        r, w = await asyncio.open_connection(*server.sockets[0].getsockname())
        w.write(b"x")
        await asyncio.wait_for(r.read(), 5)
        w.close()
        await w.wait_closed()
        server.close()
        await server.wait_closed()

    loop.run_until_complete(main())
    assert got == [("body", b"x")]


class _Recorder(asyncio.Protocol):
    """Keeps what reaches the protocol, and wakes a waiter on each read."""

    def __init__(self, loop):
        self.reads = []
        self.events = []
        self.lost = loop.create_future()
        self.changed = asyncio.Event()

    def data_received(self, data):
        self.reads.append(data)
        self.changed.set()

    def eof_received(self):
        self.events.append("eof")

    def connection_lost(self, exc):
        self.lost.set_result(exc)

    async def wait_for(self, total):
        while sum(map(len, self.reads)) < total:
            self.changed.clear()
            await self.changed.wait()


def _large_then_small(loop, finish):
    """Large, small, large sends, each read whole before the next is sent:
    minloop receives a read of more than 16 KiB straight into a bytes
    object, and smaller ones through its read buffer, switching as the
    sizes change; what the protocol sees must not depend on it."""
    import socket

    big = bytes(range(256)) * 400            # 100 KiB
    sends = [big, b"small", big[::-1], b"x"]
    # TCP on loopback: a reset (below) is TCP's.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        peer = socket.create_connection(listener.getsockname())
        ours, _ = listener.accept()
    peer.setblocking(False)

    async def main():
        transport, proto = await loop.connect_accepted_socket(
            lambda: _Recorder(loop), ours)
        total = 0
        for chunk in sends:
            await loop.sock_sendall(peer, chunk)
            total += len(chunk)
            await proto.wait_for(total)
        sends.append(await finish(peer, proto, total))
        return transport, proto, await asyncio.wait_for(proto.lost, 5)

    try:
        transport, proto, exc = loop.run_until_complete(main())
    finally:
        peer.close()
    assert all(type(r) is bytes and 0 < len(r) <= 256 * 1024 for r in proto.reads)
    assert b"".join(proto.reads) == b"".join(sends)
    return proto, exc


def test_reads_large_and_small_reach_the_protocol_whole_and_in_order(loop):
    async def eof(peer, proto, total):
        peer.shutdown(__import__("socket").SHUT_WR)
        return b""

    proto, exc = _large_then_small(loop, eof)
    assert proto.events == ["eof"]
    assert exc is None


@pytest.mark.libkqueue_differs("socket error")
def test_eof_and_reset_after_a_large_read(loop):
    # The read after a large one fails or ends: the transport's errors
    # are asyncio's whichever way it reads.
    import socket
    import struct

    big = b"z" * (100 * 1024)

    async def eof_after_large(peer, proto, total):
        await loop.sock_sendall(peer, big)
        await proto.wait_for(total + len(big))
        peer.shutdown(socket.SHUT_WR)
        return big

    proto, exc = _large_then_small(loop, eof_after_large)
    assert proto.events == ["eof"] and exc is None

    async def reset_after_large(peer, proto, total):
        await loop.sock_sendall(peer, big)
        await proto.wait_for(total + len(big))
        # Closing with SO_LINGER 0 sends a reset: the next recv() fails.
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.close()
        return big

    proto, exc = _large_then_small(loop, reset_after_large)
    assert proto.events == []
    assert isinstance(exc, ConnectionResetError)
