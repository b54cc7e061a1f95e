"""Data integrity and scale through stream transports, on both loops.

Every byte that goes in comes out, in order, under flow control, resets,
half-closes and ten thousand concurrent connections; and nothing (fd,
transport) is left behind: the loop fixture checks that no descriptor
stays open after each test.
"""

import asyncio
import hashlib
import os
import random
import resource
import socket
import struct
import subprocess
import sys
import textwrap

import pytest

MiB = 1024 * 1024
GiB = 1024 * MiB


def random_sizes(rng, total, largest=MiB):
    """Write sizes from 1 byte to ``largest``, log-uniform, summing to total."""
    left = total
    while left:
        n = min(left, int(2 ** rng.uniform(0, largest.bit_length() - 1)))
        left -= n
        yield n


class Pool:
    """Random bytes to slice writes from (slices of an immutable bytes:
    a transport may keep a reference to what it was given)."""

    def __init__(self, rng, size=8 * MiB):
        self.data = rng.randbytes(size) if hasattr(rng, "randbytes") else os.urandom(size)
        self.view = memoryview(self.data)

    def slice(self, rng, n):
        start = rng.randrange(len(self.data) - n + 1)
        return self.view[start:start + n]


# --- 1 GiB through an echo server -----------------------------------------------

class EchoServer(asyncio.BufferedProtocol):
    """Echoes what it reads, hashing it; stops reading while its own writes
    are paused, so a slow client slows the whole pipe down."""

    def __init__(self, loop):
        self.buf = memoryview(bytearray(256 * 1024))
        self.sha = hashlib.sha256()
        self.received = 0
        self.lost = loop.create_future()

    def connection_made(self, transport):
        self.transport = transport

    def get_buffer(self, sizehint):
        return self.buf

    def buffer_updated(self, nbytes):
        chunk = bytes(self.buf[:nbytes])
        self.sha.update(chunk)
        self.received += nbytes
        self.transport.write(chunk)

    def pause_writing(self):
        self.transport.pause_reading()

    def resume_writing(self):
        self.transport.resume_reading()

    def eof_received(self):
        return None          # close(): flushes the echo, then FIN

    def connection_lost(self, exc):
        self.lost.set_result(exc)


class EchoClient(asyncio.Protocol):
    """Sends ``total`` random bytes in random-sized writes under flow
    control, then write_eof(); hashes what it sent and what came back."""

    def __init__(self, loop, total, seed):
        self.rng = random.Random(seed)
        self.pool = Pool(self.rng)
        self.sizes = random_sizes(self.rng, total)
        self.total = total
        self.sent = 0
        self.received = 0
        self.sha_sent = hashlib.sha256()
        self.sha_back = hashlib.sha256()
        self.paused = False
        self.pauses = 0
        self.eof = False
        self.lost = loop.create_future()

    def connection_made(self, transport):
        self.transport = transport
        self.send_more()

    def send_more(self):
        for n in self.sizes:
            chunk = self.pool.slice(self.rng, n)
            self.sha_sent.update(chunk)
            self.sent += n
            self.transport.write(chunk)
            if self.paused:
                return
        self.transport.write_eof()

    def pause_writing(self):
        assert not self.paused
        self.paused = True
        self.pauses += 1

    def resume_writing(self):
        assert self.paused
        self.paused = False
        self.send_more()

    def data_received(self, data):
        self.sha_back.update(data)
        self.received += len(data)

    def eof_received(self):
        self.eof = True

    def connection_lost(self, exc):
        self.lost.set_result(exc)


# 1 GiB each way, 3 GiB hashed: about 7 s on asyncio's loop (2 vCPUs).
ECHO_SIZE = GiB


@pytest.mark.timeout(60)
def test_echo_integrity(loop):
    total = ECHO_SIZE
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    async def main():
        servers = []

        def factory():
            servers.append(EchoServer(loop))
            return servers[-1]
        srv = await loop.create_server(factory, "127.0.0.1", 0)
        tr, client = await loop.create_connection(
            lambda: EchoClient(loop, total, seed=1234), *srv.sockets[0].getsockname())
        assert await asyncio.wait_for(client.lost, 50) is None
        server = servers[0]
        assert await asyncio.wait_for(server.lost, 5) is None
        srv.close()
        await srv.wait_closed()
        return client, server

    client, server = loop.run_until_complete(main())
    assert contexts == []
    assert client.sent == server.received == client.received == total
    assert client.sha_sent.hexdigest() == server.sha.hexdigest() == client.sha_back.hexdigest()
    assert client.eof
    assert client.pauses > 0          # flow control was exercised


# --- 10,000 concurrent connections -------------------------------------------------

N_CONNECTIONS = 10_000
FD_MARGIN = 500        # the loop, pytest, the subprocess pipes, ...


@pytest.fixture
def many_fds():
    """Raise RLIMIT_NOFILE's soft limit to the hard limit for the test (the
    peer subprocess inherits it); skip if even the hard limit is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = N_CONNECTIONS + FD_MARGIN
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"RLIMIT_NOFILE hard limit is {hard}; {N_CONNECTIONS} "
                    f"connections need {need} descriptors in this process")
    target = need * 2 if hard == resource.RLIM_INFINITY else hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, target), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# The other end of the 10,000 connections runs in a child process on
# asyncio's own loop, so this process holds one descriptor per connection,
# not two (loopback on one host: the hard limit is often 2 x 10,000).
PEER_CLIENTS = textwrap.dedent("""
    import asyncio, sys
    host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    async def one(i, sem, streams):
        async with sem:
            r, w = await asyncio.open_connection(host, port)
        w.write(b"hello %d\\n" % i)
        line = await r.readline()
        assert line == b"hello %d\\n" % i, line
        streams.append((r, w))

    async def main():
        sem = asyncio.Semaphore(256)
        streams = []
        await asyncio.gather(*(one(i, sem, streams) for i in range(n)))
        # Every connection is open now: close them all.
        for r, w in streams:
            w.close()
        for r, w in streams:
            await w.wait_closed()
        print(len(streams))

    asyncio.run(main())
""")

PEER_SERVER = textwrap.dedent("""
    import asyncio, sys

    async def echo(reader, writer):
        while line := await reader.readline():
            writer.write(line)
        writer.close()

    async def main():
        srv = await asyncio.start_server(echo, "127.0.0.1", 0, backlog=4096)
        print(srv.sockets[0].getsockname()[1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    asyncio.run(main())
""")


class CountingEcho(asyncio.Protocol):
    live = 0
    peak = 0

    def __init__(self, loop, lost):
        self.lost = lost

    def connection_made(self, transport):
        self.transport = transport
        CountingEcho.live += 1
        CountingEcho.peak = max(CountingEcho.peak, CountingEcho.live)

    def data_received(self, data):
        self.transport.write(data)

    def connection_lost(self, exc):
        CountingEcho.live -= 1
        self.lost.append(exc)


@pytest.mark.timeout(120)
def test_ten_thousand_server_connections(loop, many_fds):
    """The loop serves 10,000 connections open at once; the peers close
    them; every server-side transport is lost cleanly."""
    CountingEcho.live = CountingEcho.peak = 0
    lost = []
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    async def main():
        srv = await loop.create_server(lambda: CountingEcho(loop, lost),
                                       "127.0.0.1", 0, backlog=4096)
        host, port = srv.sockets[0].getsockname()
        proc = subprocess.Popen(
            [sys.executable, "-c", PEER_CLIENTS, host, str(port), str(N_CONNECTIONS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = await loop.run_in_executor(None, proc.communicate)
        assert proc.returncode == 0, err.decode()
        assert int(out) == N_CONNECTIONS
        while len(lost) < N_CONNECTIONS:
            await asyncio.sleep(0.01)
        srv.close()
        await srv.wait_closed()

    loop.run_until_complete(asyncio.wait_for(main(), 100))
    assert contexts == []
    assert CountingEcho.peak == N_CONNECTIONS
    assert CountingEcho.live == 0
    assert lost == [None] * N_CONNECTIONS


class LineClient(asyncio.Protocol):
    def __init__(self, loop, i):
        self.line = b"hello %d\n" % i
        self.data = b""
        self.echoed = loop.create_future()
        self.lost = loop.create_future()

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.line)

    def data_received(self, data):
        self.data += data
        if self.data == self.line:
            self.echoed.set_result(None)

    def connection_lost(self, exc):
        self.lost.set_result(exc)


@pytest.mark.timeout(120)
def test_ten_thousand_client_connections(loop, many_fds):
    """The loop opens 10,000 connections at once (create_connection) to a
    peer process, checks an echo on each, and closes them all."""
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))
    proc = subprocess.Popen([sys.executable, "-c", PEER_SERVER],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        port = int(proc.stdout.readline())

        async def one(i, sem):
            async with sem:
                tr, pr = await loop.create_connection(
                    lambda: LineClient(loop, i), "127.0.0.1", port)
            await pr.echoed
            return tr, pr

        async def main():
            sem = asyncio.Semaphore(256)
            pairs = await asyncio.gather(*(one(i, sem) for i in range(N_CONNECTIONS)))
            for tr, pr in pairs:
                assert not tr.is_closing()
                tr.close()
            return await asyncio.gather(*(pr.lost for tr, pr in pairs))

        lost = loop.run_until_complete(asyncio.wait_for(main(), 100))
    finally:
        proc.stdin.close()
        proc.wait(10)
        proc.stdout.close()
    assert contexts == []
    assert lost == [None] * N_CONNECTIONS


# --- resets, half-closes, slow readers ------------------------------------------------

class Firehose(asyncio.Protocol):
    """Writes as fast as flow control lets it, until the connection goes."""

    def __init__(self, loop):
        self.lost = loop.create_future()
        self.chunk = b"f" * (256 * 1024)
        self.paused = False
        self.written = 0

    def connection_made(self, transport):
        self.transport = transport
        self.fill()

    def fill(self):
        while not self.paused and not self.transport.is_closing():
            self.transport.write(self.chunk)
            self.written += len(self.chunk)

    def pause_writing(self):
        self.paused = True

    def resume_writing(self):
        self.paused = False
        self.fill()

    def connection_lost(self, exc):
        self.lost.set_result(exc)


def test_peer_resets_mid_write(loop):
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    async def main():
        hoses = []
        srv = await loop.create_server(lambda: hoses.append(Firehose(loop)) or hoses[-1],
                                       "127.0.0.1", 0)
        peer = socket.socket()
        peer.setblocking(False)
        await loop.sock_connect(peer, srv.sockets[0].getsockname())
        got = 0
        while got < 4 * MiB:
            got += len(await loop.sock_recv(peer, MiB))
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.close()                           # RST while the server writes
        exc = await asyncio.wait_for(hoses[0].lost, 5)
        hose = hoses[0]
        assert isinstance(exc, (ConnectionResetError, BrokenPipeError)), repr(exc)
        assert hose.transport.is_closing()
        assert hose.transport.get_write_buffer_size() == 0
        hose.transport.write(b"into the void")   # no exception
        srv.close()
        await srv.wait_closed()

    loop.run_until_complete(main())
    assert contexts == []     # OSErrors are not the exception handler's business


class HalfCloseServer(asyncio.Protocol):
    """Reads until EOF, then answers the sha256 of the request followed by a
    long reply, on a connection whose other direction is already closed."""

    def __init__(self, loop, reply):
        self.sha = hashlib.sha256()
        self.reply = reply
        self.lost = loop.create_future()

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.sha.update(data)

    def eof_received(self):
        assert not self.transport.is_closing()
        self.transport.write(self.sha.digest())
        self.transport.write(self.reply)
        self.transport.close()
        return True

    def connection_lost(self, exc):
        self.lost.set_result(exc)


class HalfCloseClient(asyncio.Protocol):
    def __init__(self, loop, request):
        self.request = request
        self.data = bytearray()
        self.eof = False
        self.lost = loop.create_future()

    def connection_made(self, transport):
        self.transport = transport
        rng = random.Random(7)
        pos = 0
        for n in random_sizes(rng, len(self.request)):
            transport.write(self.request[pos:pos + n])
            pos += n
        transport.write_eof()

    def data_received(self, data):
        self.data += data

    def eof_received(self):
        self.eof = True

    def connection_lost(self, exc):
        self.lost.set_result(exc)


def test_half_close_both_directions_intact(loop):
    request = os.urandom(8 * MiB)
    reply = os.urandom(16 * MiB)

    async def main():
        servers = []
        srv = await loop.create_server(
            lambda: servers.append(HalfCloseServer(loop, reply)) or servers[-1],
            "127.0.0.1", 0)
        tr, client = await loop.create_connection(
            lambda: HalfCloseClient(loop, request), *srv.sockets[0].getsockname())
        assert await asyncio.wait_for(client.lost, 10) is None
        assert await asyncio.wait_for(servers[0].lost, 5) is None
        srv.close()
        await srv.wait_closed()
        return client

    client = loop.run_until_complete(main())
    assert client.eof
    assert bytes(client.data[:32]) == hashlib.sha256(request).digest()
    assert client.data[32:] == reply


class SlowReader(asyncio.Protocol):
    """Stops reading for a few milliseconds after every MiB."""

    def __init__(self, loop):
        self.loop = loop
        self.sha = hashlib.sha256()
        self.received = 0
        self.lost = loop.create_future()

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        before = self.received
        self.received += len(data)
        self.sha.update(data)
        if before // MiB != self.received // MiB:
            self.transport.pause_reading()
            self.loop.call_later(0.003, self.transport.resume_reading)

    def connection_lost(self, exc):
        self.lost.set_result(exc)


class WatchedSender(EchoClient):
    """EchoClient that checks the water marks each time it is paused/resumed."""

    def __init__(self, *args, high, low, **kwargs):
        super().__init__(*args, **kwargs)
        self.limits = dict(high=high, low=low)
        self.marks = []

    def connection_made(self, transport):
        transport.set_write_buffer_limits(**self.limits)
        super().connection_made(transport)

    def pause_writing(self):
        self.marks.append(("pause", self.transport.get_write_buffer_size()))
        super().pause_writing()

    def resume_writing(self):
        self.marks.append(("resume", self.transport.get_write_buffer_size()))
        super().resume_writing()


def test_slow_reader_forces_pause_writing(loop):
    total = 32 * MiB

    async def main():
        readers = []
        srv = await loop.create_server(
            lambda: readers.append(SlowReader(loop)) or readers[-1], "127.0.0.1", 0)
        tr, sender = await loop.create_connection(
            lambda: WatchedSender(loop, total, seed=99, high=256 * 1024, low=32 * 1024),
            *srv.sockets[0].getsockname())
        while sender.sent < total or tr.get_write_buffer_size():
            await asyncio.sleep(0.01)
        await asyncio.wait_for(readers[0].lost, 10)   # write_eof -> EOF -> close
        tr.close()
        await asyncio.wait_for(sender.lost, 5)
        srv.close()
        await srv.wait_closed()
        return sender, readers[0]

    sender, reader = loop.run_until_complete(main())
    assert reader.received == total
    assert reader.sha.hexdigest() == sender.sha_sent.hexdigest()
    assert sender.pauses >= 2
    kinds = [k for k, _ in sender.marks]
    assert kinds == ["pause", "resume"] * (len(kinds) // 2) + ["pause"] * (len(kinds) % 2)
    for kind, size in sender.marks:
        if kind == "pause":
            assert size > 256 * 1024
        else:
            assert size <= 32 * 1024
