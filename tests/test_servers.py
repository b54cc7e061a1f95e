"""Servers (create_server, create_unix_server, asyncio.Server's API) and the
streams layer (open_connection/start_server) on both loops.

asyncio's Server (Lib/asyncio/base_events.py) is the specification: the
serving state, the sockets tuple, serve_forever()'s cancellation, close()
leaving accepted connections alone, wait_closed() (whose meaning changed in
3.12.1), close_clients()/abort_clients() (3.13).
"""

import asyncio
import errno
import hashlib
import os
import socket
import struct
import sys
import tempfile
from asyncio import trsock

import pytest


# --- helpers ---------------------------------------------------------------

class Echo(asyncio.Protocol):
    """Echoes everything; records its transport and when it was lost."""

    instances = None      # a list, set per test

    def __init__(self, loop):
        self.transport = None
        self.data = bytearray()
        self.lost = loop.create_future()
        if Echo.instances is not None:
            Echo.instances.append(self)

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.data += data
        self.transport.write(data)

    def connection_lost(self, exc):
        self.lost.set_result(exc)


@pytest.fixture
def echoes():
    Echo.instances = []
    yield Echo.instances
    Echo.instances = None


async def until(cond, timeout=5.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {cond}")
        await asyncio.sleep(0.001)


async def connect(loop, addr, family=socket.AF_INET):
    """A plain non-blocking client socket connected to addr."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, addr)
    except BaseException:
        sock.close()
        raise
    return sock


async def recv_exactly(loop, sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = await loop.sock_recv(sock, min(n - len(data), 1 << 20))
        if not chunk:
            break
        data += chunk
    return bytes(data)


async def recv_all(loop, sock):
    data = bytearray()
    while True:
        try:
            chunk = await loop.sock_recv(sock, 1 << 20)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return bytes(data)


async def echo_once(loop, addr, payload=b"ping", family=socket.AF_INET):
    sock = await connect(loop, addr, family)
    try:
        await loop.sock_sendall(sock, payload)
        return await recv_exactly(loop, sock, len(payload))
    finally:
        sock.close()


async def closed_server(srv):
    srv.close()
    await asyncio.wait_for(srv.wait_closed(), 5)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the Server object ----------------------------------------------------------

def test_server_basics(loop, echoes):
    async def main():
        srv = await loop.create_server(lambda: Echo(loop), "127.0.0.1", 0)
        assert isinstance(srv, asyncio.AbstractServer)
        assert srv.get_loop() is loop
        assert srv.is_serving()
        socks = srv.sockets
        assert type(socks) is tuple and len(socks) == 1
        assert isinstance(socks[0], trsock.TransportSocket)
        host, port = socks[0].getsockname()
        assert host == "127.0.0.1" and port != 0
        assert socks[0].getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR) != 0
        assert "sockets=" in repr(srv)
        assert await echo_once(loop, (host, port)) == b"ping"
        srv.close()
        assert not srv.is_serving()
        assert srv.sockets == ()
        srv.close()                                   # idempotent
        await asyncio.wait_for(srv.wait_closed(), 5)
    loop.run_until_complete(main())


@pytest.mark.libkqueue_differs("socket error")
def test_closed_server_refuses_connections(loop, echoes):
    async def main():
        srv = await loop.create_server(lambda: Echo(loop), "127.0.0.1", 0)
        addr = srv.sockets[0].getsockname()
        assert await echo_once(loop, addr) == b"ping"
        await closed_server(srv)
        with pytest.raises(ConnectionRefusedError):
            await echo_once(loop, addr)
    loop.run_until_complete(main())


def test_server_side_transport(loop, echoes):
    async def main():
        srv = await loop.create_server(lambda: Echo(loop), "127.0.0.1", 0)
        addr = srv.sockets[0].getsockname()
        client = await connect(loop, addr)
        try:
            await until(lambda: echoes and echoes[0].transport is not None)
            tr = echoes[0].transport
            assert isinstance(tr, asyncio.Transport)
            assert tr.get_extra_info("peername") == client.getsockname()
            assert tr.get_extra_info("sockname") == addr
            assert isinstance(tr.get_extra_info("socket"), trsock.TransportSocket)
            await loop.sock_sendall(client, b"abc")
            assert await recv_exactly(loop, client, 3) == b"abc"
        finally:
            client.close()
        assert await asyncio.wait_for(echoes[0].lost, 5) is None
        await closed_server(srv)
    loop.run_until_complete(main())


def test_start_serving_false(loop, echoes):
    async def main():
        srv = await loop.create_server(lambda: Echo(loop), "127.0.0.1", 0,
                                       start_serving=False)
        assert not srv.is_serving()
        addr = srv.sockets[0].getsockname()
        await srv.start_serving()
        assert srv.is_serving()
        await srv.start_serving()                    # no effect the second time
        assert srv.is_serving()
        assert await echo_once(loop, addr) == b"ping"
        await closed_server(srv)
    loop.run_until_complete(main())


@pytest.mark.libkqueue_differs("socket error")
def test_unstarted_server_refuses_connections(loop, echoes):
    async def main():
        srv = await loop.create_server(lambda: Echo(loop), "127.0.0.1", 0,
                                       start_serving=False)
        # Bound but not listening yet.
        with pytest.raises(ConnectionRefusedError):
            await echo_once(loop, srv.sockets[0].getsockname())
        await closed_server(srv)
    loop.run_until_complete(main())


def test_serve_forever_cancelled(loop, echoes):
    async def main():
        srv = await loop.create_server(lambda: Echo(loop), "127.0.0.1", 0,
                                       start_serving=False)
        addr = srv.sockets[0].getsockname()
        task = asyncio.ensure_future(srv.serve_forever())
        await asyncio.sleep(0.01)
        assert srv.is_serving()                      # serve_forever starts serving
        assert await echo_once(loop, addr) == b"ping"
        with pytest.raises(RuntimeError, match="is already being awaited on serve_forever"):
            await srv.serve_forever()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Cancelling serve_forever() closes the server.
        assert not srv.is_serving()
        assert srv.sockets == ()
        with pytest.raises(RuntimeError, match="is closed"):
            await srv.serve_forever()
    loop.run_until_complete(main())


def test_close_ends_serve_forever(loop):
    async def main():
        srv = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0)
        task = asyncio.ensure_future(srv.serve_forever())
        await asyncio.sleep(0.01)
        srv.close()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()
        await srv.wait_closed()
    loop.run_until_complete(main())


def test_async_with_closes(loop):
    async def main():
        srv = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0)
        async with srv as entered:
            assert entered is srv
            assert srv.is_serving()
        assert not srv.is_serving()
        assert srv.sockets == ()
    loop.run_until_complete(main())


def test_close_keeps_accepted_connections(loop, echoes):
    async def main():
        srv = await loop.create_server(lambda: Echo(loop), "127.0.0.1", 0)
        client = await connect(loop, srv.sockets[0].getsockname())
        try:
            await until(lambda: echoes and echoes[0].transport is not None)
            srv.close()
            await loop.sock_sendall(client, b"still here")
            assert await recv_exactly(loop, client, 10) == b"still here"
            assert not echoes[0].transport.is_closing()
            waiter = asyncio.ensure_future(srv.wait_closed())
            await asyncio.sleep(0.02)
            if sys.version_info >= (3, 12, 1):
                # wait_closed() waits for the last connection to go.
                assert not waiter.done()
            else:
                # Before 3.12.1 it returned at once once close() was called.
                assert waiter.done()
        finally:
            client.close()
        await asyncio.wait_for(echoes[0].lost, 5)
        await asyncio.wait_for(waiter, 5)
    loop.run_until_complete(main())


def test_wait_closed_started_before_close(loop, echoes):
    """A wait_closed() begun before close() ends only once the server is
    closed and its last connection is gone (every Python version)."""
    async def main():
        srv = await loop.create_server(lambda: Echo(loop), "127.0.0.1", 0)
        waiter = asyncio.ensure_future(srv.wait_closed())
        client = await connect(loop, srv.sockets[0].getsockname())
        try:
            await until(lambda: echoes and echoes[0].transport is not None)
            await asyncio.sleep(0.01)
            assert not waiter.done()
            srv.close()
            await asyncio.sleep(0.01)
            assert not waiter.done()
        finally:
            client.close()
        await asyncio.wait_for(waiter, 5)
        assert echoes[0].lost.done()
    loop.run_until_complete(main())


@pytest.mark.skipif(sys.version_info < (3, 13),
                    reason="Server.close_clients()/abort_clients() are new in Python 3.13")
@pytest.mark.parametrize("how", ["close_clients", "abort_clients"])
def test_close_or_abort_clients(loop, echoes, how):
    big = 32 * 1024 * 1024

    async def main():
        srv = await loop.create_server(lambda: Echo(loop), "127.0.0.1", 0)
        addr = srv.sockets[0].getsockname()
        clients = [await connect(loop, addr) for _ in range(2)]
        try:
            await until(lambda: len(echoes) == 2 and all(e.transport for e in echoes))
            for e in echoes:
                e.transport.write(b"x" * big)
            srv.close()
            getattr(srv, how)()
            assert all(e.transport.is_closing() for e in echoes)
            got = [await recv_all(loop, c) for c in clients]
        finally:
            for c in clients:
                c.close()
        for e in echoes:
            assert await asyncio.wait_for(e.lost, 5) is None
        await asyncio.wait_for(srv.wait_closed(), 5)
        if how == "close_clients":
            assert [len(g) for g in got] == [big, big]     # flushed
        else:
            assert all(len(g) < big for g in got)          # dropped
    loop.run_until_complete(main())


def test_host_list(loop, echoes):
    async def main():
        srv = await loop.create_server(lambda: Echo(loop),
                                       ["127.0.0.1", "127.0.0.2"], 0)
        addrs = sorted(s.getsockname() for s in srv.sockets)
        assert [a[0] for a in addrs] == ["127.0.0.1", "127.0.0.2"]
        assert all(a[1] != 0 for a in addrs)
        for addr in addrs:
            assert await echo_once(loop, addr) == b"ping"
        await closed_server(srv)
    loop.run_until_complete(main())


def test_host_none_binds_every_family(loop):
    async def main():
        srv = await loop.create_server(asyncio.Protocol, None, 0)
        families = {s.family for s in srv.sockets}
        assert socket.AF_INET in families
        assert families <= {socket.AF_INET, socket.AF_INET6}
        for s in srv.sockets:
            if s.family == socket.AF_INET6:
                # asyncio sets IPV6_V6ONLY so that :: does not take IPv4 too.
                assert s.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 1
        await closed_server(srv)
    loop.run_until_complete(main())


@pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"), reason="no SO_REUSEPORT")
def test_reuse_port(loop):
    async def main():
        port = free_port()
        a = await loop.create_server(asyncio.Protocol, "127.0.0.1", port, reuse_port=True)
        b = await loop.create_server(asyncio.Protocol, "127.0.0.1", port, reuse_port=True)
        for srv in (a, b):
            assert srv.sockets[0].getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) != 0
            assert srv.sockets[0].getsockname() == ("127.0.0.1", port)
        with pytest.raises(OSError) as info:
            await loop.create_server(asyncio.Protocol, "127.0.0.1", port)
        assert info.value.errno == errno.EADDRINUSE
        await closed_server(a)
        await closed_server(b)
    loop.run_until_complete(main())


def test_address_in_use(loop):
    async def main():
        with socket.create_server(("127.0.0.1", 0)) as taken:
            with pytest.raises(OSError) as info:
                await loop.create_server(asyncio.Protocol, *taken.getsockname())
        assert info.value.errno == errno.EADDRINUSE
        assert "error while attempting to bind on address" in str(info.value)
    loop.run_until_complete(main())


def test_create_server_sock(loop, echoes):
    async def main():
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        srv = await loop.create_server(lambda: Echo(loop), sock=sock)
        assert srv.sockets[0].fileno() == sock.fileno()
        assert await echo_once(loop, sock.getsockname()) == b"ping"
        await closed_server(srv)
        assert sock.fileno() == -1       # the server closed it
    loop.run_until_complete(main())


def test_create_server_bad_arguments(loop):
    async def main():
        with pytest.raises(ValueError, match="Neither host/port nor sock were specified"):
            await loop.create_server(asyncio.Protocol)
        with socket.socket() as s:
            with pytest.raises(ValueError, match="host/port and sock can not be specified at the same time"):
                await loop.create_server(asyncio.Protocol, "127.0.0.1", 0, sock=s)
        with socket.socket(type=socket.SOCK_DGRAM) as s:
            with pytest.raises(ValueError, match="A Stream Socket was expected"):
                await loop.create_server(asyncio.Protocol, sock=s)
        with pytest.raises(ValueError, match="ssl_handshake_timeout is only meaningful with ssl"):
            await loop.create_server(asyncio.Protocol, "127.0.0.1", 0,
                                     ssl_handshake_timeout=1)
        with pytest.raises(TypeError, match="ssl argument must be an SSLContext or None"):
            await loop.create_server(asyncio.Protocol, "127.0.0.1", 0, ssl=True)
    loop.run_until_complete(main())


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_protocol_factory_raises_in_debug_mode(loop, echoes):
    """asyncio reports a failing factory for an accepted connection only in
    debug mode, and keeps serving."""
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))
    loop.set_debug(True)
    loop.slow_callback_duration = 10
    calls = []

    def factory():
        calls.append(1)
        if len(calls) == 1:
            raise ZeroDivisionError("no protocol")
        return Echo(loop)

    async def main():
        srv = await loop.create_server(factory, "127.0.0.1", 0)
        addr = srv.sockets[0].getsockname()
        bad = await connect(loop, addr)
        try:
            await until(lambda: contexts)
        finally:
            bad.close()
        assert contexts[0]["message"] == "Error on transport creation for incoming connection"
        assert isinstance(contexts[0]["exception"], ZeroDivisionError)
        assert await echo_once(loop, addr) == b"ping"
        await asyncio.wait_for(echoes[0].lost, 5)
        await closed_server(srv)
    loop.run_until_complete(main())
    contexts.clear()


# --- Unix servers ------------------------------------------------------------------

@pytest.fixture
def unix_path():
    with tempfile.TemporaryDirectory(prefix="minloop-") as d:
        yield os.path.join(d, "sock")


def test_unix_server(loop, echoes, unix_path):
    async def main():
        srv = await loop.create_unix_server(lambda: Echo(loop), unix_path)
        assert srv.get_loop() is loop and srv.is_serving()
        assert len(srv.sockets) == 1
        assert srv.sockets[0].family == socket.AF_UNIX
        assert srv.sockets[0].getsockname() == unix_path
        assert await echo_once(loop, unix_path, family=socket.AF_UNIX) == b"ping"
        await closed_server(srv)
        assert srv.sockets == ()
    loop.run_until_complete(main())


def test_unix_server_start_serving_false(loop, echoes, unix_path):
    async def main():
        srv = await loop.create_unix_server(lambda: Echo(loop), unix_path,
                                            start_serving=False)
        assert not srv.is_serving()
        await srv.start_serving()
        assert srv.is_serving()
        assert await echo_once(loop, unix_path, family=socket.AF_UNIX) == b"ping"
        await closed_server(srv)
    loop.run_until_complete(main())


def test_unix_server_bad_arguments(loop, unix_path):
    async def main():
        with pytest.raises(ValueError, match="path was not specified, and no sock specified"):
            await loop.create_unix_server(asyncio.Protocol)
        with socket.socket() as s:
            with pytest.raises(ValueError, match="A UNIX Domain Stream Socket was expected"):
                await loop.create_unix_server(asyncio.Protocol, sock=s)
        with socket.socket(socket.AF_UNIX) as s:
            with pytest.raises(ValueError, match="path and sock can not be specified at the same time"):
                await loop.create_unix_server(asyncio.Protocol, unix_path, sock=s)
    loop.run_until_complete(main())


# --- streams --------------------------------------------------------------------------

async def stream_echo_handler(reader, writer):
    """Line protocol: echo each line; 'BULK n' -> n bytes; 'SHA' -> read to
    EOF and answer the sha256 of what came."""
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            if line.startswith(b"BULK "):
                n = int(line.split()[1])
                writer.write(b"z" * n)
                await writer.drain()
            elif line == b"SHA\n":
                data = await reader.read()
                writer.write(hashlib.sha256(data).hexdigest().encode() + b"\n")
                await writer.drain()
                break
            else:
                writer.write(line)
                await writer.drain()
    finally:
        writer.close()
        await writer.wait_closed()


def test_streams_round_trip(loop):
    async def main():
        srv = await asyncio.start_server(stream_echo_handler, "127.0.0.1", 0)
        addr = srv.sockets[0].getsockname()
        reader, writer = await asyncio.open_connection(*addr)
        assert isinstance(writer.transport, asyncio.Transport)
        assert writer.get_extra_info("peername") == addr
        writer.write(b"hello\n")
        assert await reader.readline() == b"hello\n"
        writer.writelines([b"one ", b"two\n", b"three!\n"])
        await writer.drain()
        assert await reader.readexactly(4) == b"one "
        assert await reader.readuntil(b"\n") == b"two\n"
        assert await reader.readuntil(b"!") == b"three!"
        assert await reader.readexactly(1) == b"\n"
        writer.write(b"BULK 3000000\n")
        assert await reader.readexactly(3000000) == b"z" * 3000000
        payload = os.urandom(5_000_000)
        writer.write(b"SHA\n")
        writer.write(payload)
        await writer.drain()
        assert writer.can_write_eof()
        writer.write_eof()
        assert await reader.readline() == hashlib.sha256(payload).hexdigest().encode() + b"\n"
        assert await reader.read() == b""
        assert reader.at_eof()
        writer.close()
        await writer.wait_closed()
        assert writer.is_closing()
        srv.close()
        await srv.wait_closed()
    loop.run_until_complete(main())


def test_streams_incomplete_read(loop):
    async def handler(reader, writer):
        writer.write(b"abc")
        writer.close()
        await writer.wait_closed()

    async def main():
        srv = await asyncio.start_server(handler, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(*srv.sockets[0].getsockname())
        with pytest.raises(asyncio.IncompleteReadError) as info:
            await reader.readexactly(10)
        assert info.value.partial == b"abc" and info.value.expected == 10
        writer.close()
        await writer.wait_closed()
        srv.close()
        await srv.wait_closed()
    loop.run_until_complete(main())


def test_streams_readline_limit(loop):
    async def handler(reader, writer):
        writer.write(b"x" * 100 + b"\n")
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def main():
        srv = await asyncio.start_server(handler, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(
            *srv.sockets[0].getsockname(), limit=16)
        # The message depends on whether the newline had arrived yet.
        with pytest.raises(ValueError, match="limit"):
            await reader.readline()
        writer.close()
        await writer.wait_closed()
        srv.close()
        await srv.wait_closed()
    loop.run_until_complete(main())


def test_streams_drain_waits_for_slow_reader(loop):
    big = 16 * 1024 * 1024
    release = None

    async def handler(reader, writer):
        await release
        got = 0
        while True:
            chunk = await reader.read(1 << 20)
            if not chunk:
                break
            got += len(chunk)
        writer.write(str(got).encode())
        writer.close()
        await writer.wait_closed()

    async def main():
        nonlocal release
        release = loop.create_future()
        srv = await asyncio.start_server(handler, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(*srv.sockets[0].getsockname())
        writer.write(b"d" * big)
        drain = asyncio.ensure_future(writer.drain())
        await asyncio.sleep(0.05)
        assert not drain.done()                 # paused: the reader is not reading
        release.set_result(None)
        await asyncio.wait_for(drain, 5)
        writer.write_eof()
        assert await reader.read() == str(big).encode()
        writer.close()
        await writer.wait_closed()
        srv.close()
        await srv.wait_closed()
    loop.run_until_complete(main())


@pytest.mark.libkqueue_differs("socket error")
def test_streams_reset_by_peer(loop):
    async def handler(reader, writer):
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def main():
        srv = await asyncio.start_server(handler, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(*srv.sockets[0].getsockname())
        with pytest.raises(ConnectionResetError):
            await reader.read()
        writer.close()
        with pytest.raises(ConnectionResetError):
            await writer.wait_closed()
        srv.close()
        await srv.wait_closed()
    loop.run_until_complete(main())


def test_unix_streams(loop, unix_path):
    async def main():
        srv = await asyncio.start_unix_server(stream_echo_handler, unix_path)
        reader, writer = await asyncio.open_unix_connection(unix_path)
        assert writer.get_extra_info("peername") == unix_path
        writer.write(b"over unix\n")
        assert await reader.readline() == b"over unix\n"
        writer.close()
        await writer.wait_closed()
        srv.close()
        await srv.wait_closed()
    loop.run_until_complete(main())


def test_start_server_plain_function_callback(loop):
    """client_connected_cb may be a plain function, not a coroutine."""
    async def main():
        writers = []
        srv = await asyncio.start_server(lambda r, w: writers.append(w), "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection(*srv.sockets[0].getsockname())
        await until(lambda: writers)
        writers[0].write(b"hi")
        assert await reader.readexactly(2) == b"hi"
        writers[0].close()
        await writers[0].wait_closed()
        writer.close()
        await writer.wait_closed()
        srv.close()
        await srv.wait_closed()
    loop.run_until_complete(main())
