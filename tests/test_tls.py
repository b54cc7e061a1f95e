"""TLS on the loop: minloop's compiled TLS layer over its stream transport.

minloop does TLS as asyncio 3.11+ does, as a protocol between the socket
transport and the application's protocol, but with its own compiled copy of
that layer (minloop/tls.pyx: the states, callbacks, flow control and errors
of asyncio's sslproto.SSLProtocol, on every Python minloop supports,
3.10 included); loop._make_ssl_transport puts it over minloop's socket
transport.  What is tested here is the whole path through real sockets:
bulk data both ways, many short connections (no fd or memory growth),
handshake and shutdown timeouts (TLS 1.3's included), garbage instead of a
ClientHello, certificate failures, the extra info, flow control, abort,
exceptions raised by the application's protocol, close_notify and ragged
EOFs against a plain OpenSSL peer (BlockingTLSPeer), a server closing its
TLS clients, loop.start_tls / StreamWriter.start_tls, TLS over a Unix
socket and connect_accepted_socket(ssl=).  The layer alone, driven record
by record against asyncio's SSLProtocol, is tests/test_tls_protocol.py.

Every test runs on asyncio's loop and on minloop (the ``loop`` fixture);
asyncio's behaviour is the specification.  The certificates are
tests/tls_certs/ (ECDSA P-256, for cheap handshakes; see its README).
"""

import asyncio
import gc
import hashlib
import os
import random
import socket
import ssl
import sys
import threading

import pytest

from conftest import DAEMON_THREADS

CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tls_certs")
CA_PEM = os.path.join(CERTS, "ca.pem")
SERVER_PEM = os.path.join(CERTS, "server.pem")   # certificate + key, CN=localhost

HOST = "127.0.0.1"
HOSTNAME = "localhost"   # the name in the certificate

# Each test's coroutine must finish within this; the pytest-timeout limit
# (conftest.DEFAULT_TIMEOUT) is the backstop for a hung loop.
RUN_TIMEOUT = 10

PY311 = sys.version_info >= (3, 11)
needs_311 = pytest.mark.skipif(not PY311, reason="new in Python 3.11")


def server_context(*, tls13_only=False, client_cert=False):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(SERVER_PEM)
    if tls13_only:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(CA_PEM)
    return ctx


def client_context(*, tls13_only=False, client_cert=False):
    ctx = ssl.create_default_context(cafile=CA_PEM)
    if tls13_only:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if client_cert:
        ctx.load_cert_chain(SERVER_PEM)   # its EKU allows clientAuth too
    return ctx


def run(loop, coro, timeout=RUN_TIMEOUT, reported=None):
    """Run ``coro`` on ``loop`` within ``timeout`` seconds.

    What reaches the loop's exception handler meanwhile goes to ``reported``
    if the test wants to look at it; otherwise any report fails the test.
    """
    seen = [] if reported is None else reported
    loop.set_exception_handler(lambda lp, context: seen.append(context))
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, timeout))
    finally:
        # Let the callbacks scheduled last (connection_lost, ...) run.
        loop.run_until_complete(asyncio.sleep(0.01))
        loop.set_exception_handler(None)
        if reported is None:
            assert not seen, f"the loop's exception handler was called: {seen}"


async def _start_echo_server(**kwargs):
    """A streams TLS echo server (reads whatever comes, writes it back)."""
    async def echo(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
    return await asyncio.start_server(echo, HOST, 0, ssl=server_context(), **kwargs)


def _port(server):
    return server.sockets[0].getsockname()[1]


class BlockingTLSPeer:
    """A TLS server in a thread on blocking sockets (OpenSSL as-is, no asyncio).

    It accepts one connection and completes the handshake, then
    ``hold``s it (never reads again, so never answers a close_notify) until
    stop(), or ``answer``s: reads until the client's close_notify (recv()
    returns b'' only for one: ragged EOFs raise) and sends its own, or
    sends a few bytes and drops the connection without a close_notify
    (``ragged``).
    """

    def __init__(self, mode):
        self.mode = mode
        self.listener = socket.create_server((HOST, 0))
        # A test that fails early must not leave the thread blocked for good.
        self.listener.settimeout(RUN_TIMEOUT)
        self.port = self.listener.getsockname()[1]
        self.ctx = server_context()
        self.stopped = threading.Event()
        self.received = bytearray()
        self.got_close_notify = False
        self.error = None
        self.thread = threading.Thread(target=self._serve, daemon=DAEMON_THREADS)
        self.thread.start()

    def _serve(self):
        try:
            conn, _ = self.listener.accept()
            conn.settimeout(RUN_TIMEOUT)
            with self.ctx.wrap_socket(conn, server_side=True,
                                      suppress_ragged_eofs=False) as tls:
                if self.mode == "hold":
                    self.stopped.wait(RUN_TIMEOUT)
                    return
                if self.mode == "ragged":
                    tls.sendall(b"last words")
                    # shutdown(), not close(): the TCP FIN goes out with no
                    # close_notify before it, whoever still holds the fd.
                    tls.shutdown(socket.SHUT_RDWR)
                    return
                while data := tls.recv(65536):
                    self.received += data
                self.got_close_notify = True
                tls.unwrap().close()
        except Exception as exc:  # reported by stop()
            self.error = exc

    def stop(self):
        self.stopped.set()
        self.thread.join(RUN_TIMEOUT)
        self.listener.close()
        assert not self.thread.is_alive()


# ---------------------------------------------------------------------------
# Bulk data


TWENTY_MB = 20 * 1024 * 1024


def test_20mb_both_ways_concurrently(loop):
    """Each end sends 20 MB while receiving the other's 20 MB; sha256 on both."""
    to_server = random.Random(1).randbytes(TWENTY_MB)
    to_client = random.Random(2).randbytes(TWENTY_MB)

    async def send(writer, data):
        # Uneven chunks: record boundaries fall anywhere.
        view = memoryview(data)
        offset, step = 0, 100_003
        while offset < len(data):
            writer.write(view[offset:offset + step])
            await writer.drain()
            offset += step

    async def receive(reader, size):
        digest = hashlib.sha256()
        left = size
        while left:
            chunk = await reader.read(min(left, 1 << 20))
            assert chunk, "EOF before all the data came"
            digest.update(chunk)
            left -= len(chunk)
        return digest.hexdigest()

    async def handler(reader, writer):
        got, _ = await asyncio.gather(receive(reader, TWENTY_MB), send(writer, to_client))
        writer.write(bytes.fromhex(got))   # the server's digest of what came
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def main():
        server = await asyncio.start_server(handler, HOST, 0, ssl=server_context())
        async with server:
            reader, writer = await asyncio.open_connection(
                HOST, _port(server), ssl=client_context(), server_hostname=HOSTNAME)
            got, _ = await asyncio.gather(receive(reader, TWENTY_MB), send(writer, to_server))
            assert got == hashlib.sha256(to_client).hexdigest()
            assert await reader.readexactly(32) == hashlib.sha256(to_server).digest()
            writer.close()
            await writer.wait_closed()

    run(loop, main(), timeout=60)


# ---------------------------------------------------------------------------
# Many short connections


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.timeout(180)
def test_1000_handshakes_no_fd_or_memory_growth(loop, open_fds, assert_no_fd_leak):
    """1,000 connections: handshake, a few bytes each way, close.

    After a warm-up batch of 200 (caches, free lists, the allocator's arenas
    and the ssl module's lazily made objects settle), 800 more may not grow:
    - open fds at all (every socket is closed once its connection is);
    - Python memory (tracemalloc) by more than 256 KiB, 320 bytes per
      connection: without a leak it grows by a few KB in all; keeping just
      the ssl.SSLObject of every connection grows it by 270 KB, and a
      leaked protocol or transport keeps far more (SSLProtocol's 256 KiB
      read buffer, for one);
    - the resident set by more than 16 MiB, 20 KB per connection, for
      OpenSSL's memory, which tracemalloc does not see: without a leak it
      grows by well under 1 MiB; keeping every SSLObject (with OpenSSL's
      state behind it) grows it by about 34 MB.  The margin is for malloc's
      arenas and fragmentation, which are not leaks.
    """
    # Not importable in a sub-interpreter (scripts/pytest-in-interpreter).
    tracemalloc = pytest.importorskip("tracemalloc", exc_type=ImportError)
    WARMUP, LATER, PARALLEL = 200, 800, 8
    client_ctx = client_context()

    async def one(port, i):
        reader, writer = await asyncio.open_connection(
            HOST, port, ssl=client_ctx, server_hostname=HOSTNAME)
        message = b"hello %d\n" % i
        writer.write(message)
        assert await reader.readexactly(len(message)) == message
        writer.close()
        await writer.wait_closed()

    async def batch(port, count):
        for start in range(0, count, PARALLEL):
            await asyncio.gather(*(one(port, i) for i in range(start, min(count, start + PARALLEL))))
        # connection_lost and the server's last callbacks.
        await asyncio.sleep(0.05)

    def settle():
        gc.collect()
        return tracemalloc.get_traced_memory()[0], _rss()

    async def main():
        server = await _start_echo_server()
        async with server:
            port = _port(server)
            await batch(port, WARMUP)
            fds_before = open_fds()
            python_before, rss_before = settle()
            await batch(port, LATER)
            python_after, rss_after = settle()
            assert_no_fd_leak(fds_before, f"{LATER} TLS connections")
            return python_after - python_before, rss_after - rss_before

    tracemalloc.start()
    try:
        python_growth, rss_growth = run(loop, main(), timeout=150)
    finally:
        tracemalloc.stop()
    assert python_growth < 256 << 10, f"Python memory grew by {python_growth} bytes"
    assert rss_growth < 16 << 20, f"the resident set grew by {rss_growth} bytes"


# ---------------------------------------------------------------------------
# Handshake failures


def test_client_handshake_timeout(loop):
    """A server that never answers: ConnectionAbortedError after ssl_handshake_timeout."""
    accepted = []

    class Silent(asyncio.Protocol):
        def connection_made(self, transport):
            accepted.append(transport)

    async def main():
        server = await loop.create_server(Silent, HOST, 0)
        async with server:
            with pytest.raises(ConnectionAbortedError) as info:
                await loop.create_connection(
                    asyncio.Protocol, HOST, _port(server), ssl=client_context(),
                    server_hostname=HOSTNAME, ssl_handshake_timeout=0.2)
            assert str(info.value) == ("SSL handshake is taking longer than 0.2 "
                                       "seconds: aborting the connection")
            with pytest.raises(ConnectionAbortedError):
                await asyncio.open_connection(
                    HOST, _port(server), ssl=client_context(),
                    server_hostname=HOSTNAME, ssl_handshake_timeout=0.2)
            assert len(accepted) == 2
            for transport in accepted:
                transport.close()

    # An OSError: asyncio reports nothing to the exception handler.
    run(loop, main())


def test_server_handshake_timeout(loop):
    """A client that never sends a ClientHello is dropped; the server serves on."""
    async def main():
        # Long enough for the good client's handshake on a busy machine.
        server = await _start_echo_server(ssl_handshake_timeout=1.0)
        async with server:
            port = _port(server)
            silent = socket.create_connection((HOST, port))
            silent.setblocking(False)
            try:
                # The server closes it: EOF (or a reset) comes.
                assert await loop.sock_recv(silent, 100) == b""
            except ConnectionResetError:
                pass
            finally:
                silent.close()
            reader, writer = await asyncio.open_connection(
                HOST, port, ssl=client_context(), server_hostname=HOSTNAME)
            writer.write(b"still there?")
            assert await reader.readexactly(12) == b"still there?"
            writer.close()
            await writer.wait_closed()

    run(loop, main())


GARBAGE = {
    "http": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    # A handshake record whose body is not a ClientHello.
    "bad-record": b"\x16\x03\x01\x00\x08" + b"\xff" * 8,
}


@pytest.mark.parametrize("debug", [False, True], ids=["nodebug", "debug"])
@pytest.mark.parametrize("garbage", sorted(GARBAGE))
def test_garbage_instead_of_client_hello(loop, garbage, debug):
    """The bad connection is closed and reported as asyncio reports it; the
    server serves a good client afterwards."""
    handled = []

    async def handler(reader, writer):
        handled.append(writer.get_extra_info("peername"))
        writer.write(await reader.readexactly(4))
        writer.close()

    async def main():
        server = await asyncio.start_server(handler, HOST, 0, ssl=server_context())
        async with server:
            port = _port(server)
            bad = socket.create_connection((HOST, port))
            bad.setblocking(False)
            try:
                await loop.sock_sendall(bad, GARBAGE[garbage])
                # Whatever the server answers (an alert, or nothing), the
                # connection ends.
                try:
                    while await loop.sock_recv(bad, 4096):
                        pass
                except ConnectionResetError:
                    pass
            finally:
                bad.close()
            reader, writer = await asyncio.open_connection(
                HOST, port, ssl=client_context(), server_hostname=HOSTNAME)
            writer.write(b"good")
            assert await reader.readexactly(4) == b"good"
            writer.close()
            await writer.wait_closed()
        assert len(handled) == 1   # the handler never saw the bad connection

    loop.set_debug(debug)
    reported = []
    run(loop, main(), reported=reported)
    if debug:
        # asyncio's _accept_connection2 reports a failed incoming
        # connection only in debug mode; the handshake's SSLError is an
        # OSError, which SSLProtocol itself only logs at debug level.
        assert [c["message"] for c in reported] == [
            "Error on transport creation for incoming connection"]
        assert isinstance(reported[0]["exception"], ssl.SSLError)
        assert isinstance(reported[0]["protocol"], asyncio.StreamReaderProtocol)
    else:
        assert reported == []


def test_certificate_verification_failure(loop):
    """A certificate for another name: the client's create_connection raises
    SSLCertVerificationError, both ends close, the server serves on."""
    async def main():
        server = await _start_echo_server()
        async with server:
            port = _port(server)
            with pytest.raises(ssl.SSLCertVerificationError):
                await asyncio.open_connection(
                    HOST, port, ssl=client_context(), server_hostname="not-this-host")
            reader, writer = await asyncio.open_connection(
                HOST, port, ssl=client_context(), server_hostname=HOSTNAME)
            writer.write(b"fine")
            assert await reader.readexactly(4) == b"fine"
            writer.close()
            await writer.wait_closed()

    # Both handshake errors are OSErrors: nothing is reported.
    run(loop, main())


# ---------------------------------------------------------------------------
# Extra info


@pytest.mark.parametrize("mutual", [False, True], ids=["server-cert", "mutual"])
def test_extra_info(loop, mutual):
    server_ctx = server_context(client_cert=mutual)
    client_ctx = client_context(client_cert=mutual)
    server_seen = loop.create_future()

    def check(transport, ctx, peer_has_cert):
        ssl_object = transport.get_extra_info("ssl_object")
        assert isinstance(ssl_object, ssl.SSLObject)
        assert ssl_object.version() in ("TLSv1.2", "TLSv1.3")
        assert transport.get_extra_info("sslcontext") is ctx
        assert transport.get_extra_info("cipher") == ssl_object.cipher()
        assert len(transport.get_extra_info("cipher")) == 3
        assert transport.get_extra_info("compression") == ssl_object.compression()
        peercert = transport.get_extra_info("peercert")
        if peer_has_cert:
            assert dict(name[0] for name in peercert["subject"])["commonName"] == HOSTNAME
            assert peercert == ssl_object.getpeercert()
        else:
            assert peercert is None
        # What the socket transport underneath knows shows through.
        assert isinstance(transport.get_extra_info("socket"), asyncio.trsock.TransportSocket)
        assert transport.get_extra_info("sockname")[0] == HOST
        assert transport.get_extra_info("peername")[0] == HOST
        assert transport.get_extra_info("no such thing", "dflt") == "dflt"

    async def handler(reader, writer):
        try:
            check(writer.transport, server_ctx, peer_has_cert=mutual)
        except BaseException as exc:
            server_seen.set_exception(exc)
        else:
            server_seen.set_result(None)
        await reader.read()
        writer.close()

    async def main():
        server = await asyncio.start_server(handler, HOST, 0, ssl=server_ctx)
        async with server:
            reader, writer = await asyncio.open_connection(
                HOST, _port(server), ssl=client_ctx, server_hostname=HOSTNAME)
            check(writer.transport, client_ctx, peer_has_cert=True)
            await server_seen
            writer.close()
            await writer.wait_closed()

    run(loop, main())


# ---------------------------------------------------------------------------
# Flow control and abort


def test_flow_control_under_tls(loop):
    """A server that does not read: the TLS layer stops reading the socket
    (the socket transport underneath is paused) and the writer is paused;
    once the server reads again everything arrives intact and the writer
    resumes."""
    CHUNK = 256 * 1024
    chunk_source = random.Random(4)
    server_side = {"expected": None}
    writer_events = []

    class Server(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport
            self.digest = hashlib.sha256()
            self.size = 0
            transport.pause_reading()
            server_side["proto"] = self
            server_side["connected"].set_result(None)

        def data_received(self, chunk):
            self.digest.update(chunk)
            self.size += len(chunk)
            if self.size == server_side["expected"]:
                self.transport.write(self.digest.digest())

    class Client(asyncio.Protocol):
        def __init__(self):
            self.resumed = None
            self.answer = loop.create_future()

        def pause_writing(self):
            writer_events.append("pause")
            self.resumed = loop.create_future()

        def resume_writing(self):
            writer_events.append("resume")
            self.resumed.set_result(None)

        def data_received(self, chunk):
            self.answer.set_result(chunk)

    async def main():
        server_side["connected"] = loop.create_future()
        server = await loop.create_server(Server, HOST, 0, ssl=server_context())
        async with server:
            transport, client = await loop.create_connection(
                Client, HOST, _port(server), ssl=client_context(),
                server_hostname=HOSTNAME)
            await server_side["connected"]
            # Write until told to stop: the kernel's buffers take what they
            # take first (up to tcp_rmem + tcp_wmem), then the transports'.
            sent, digest = 0, hashlib.sha256()
            while not writer_events:
                chunk = chunk_source.randbytes(CHUNK)
                transport.write(chunk)
                digest.update(chunk)
                sent += len(chunk)
                assert sent < 512 << 20, "never paused"
                await asyncio.sleep(0)
            assert writer_events == ["pause"]
            # The TLS layer's buffer fills and it pauses the socket transport
            # under it (a private attribute: the app transport hides it).
            raw = server_side["proto"].transport._ssl_protocol._transport
            while raw.is_reading():
                await asyncio.sleep(0.01)
            assert not client.resumed.done()
            server_side["expected"] = sent
            server_side["proto"].transport.resume_reading()
            await client.resumed
            assert await client.answer == digest.digest()
            assert writer_events == ["pause", "resume"]
            transport.close()

    run(loop, main(), timeout=30)


def test_abort(loop):
    """abort() on a TLS transport drops the connection at once, without a
    close_notify: connection_lost(None) here, a ragged EOF or a reset there."""
    lost = []
    server_saw = loop.create_future()

    class Client(asyncio.Protocol):
        def connection_lost(self, exc):
            lost.append(exc)

    async def handler(reader, writer):
        try:
            await reader.read()
        except BaseException as exc:
            server_saw.set_result(exc)
        else:
            server_saw.set_result(None)
        writer.close()

    async def main():
        server = await asyncio.start_server(handler, HOST, 0, ssl=server_context())
        async with server:
            transport, _ = await loop.create_connection(
                Client, HOST, _port(server), ssl=client_context(),
                server_hostname=HOSTNAME)
            transport.write(b"x" * 1_000_000)
            transport.abort()
            assert transport.is_closing()
            exc = await server_saw
            # No close_notify came: the server's read ends without one.
            assert exc is None or isinstance(exc, (ConnectionError, ssl.SSLError)), exc
            await asyncio.sleep(0)
        assert lost == [None]

    run(loop, main())


@pytest.mark.skipif(sys.version_info < (3, 13), reason="Server.close_clients/abort_clients are new in 3.13")
@pytest.mark.parametrize("how", ["close_clients", "abort_clients"])
def test_server_drops_its_tls_clients(loop, how):
    """Server.close_clients()/abort_clients() end live TLS connections, and
    wait_closed() (which waits for them) returns."""
    async def handler(reader, writer):
        await reader.read()
        writer.close()

    async def main():
        server = await asyncio.start_server(handler, HOST, 0, ssl=server_context())
        readers = []
        for _ in range(3):
            reader, writer = await asyncio.open_connection(
                HOST, _port(server), ssl=client_context(), server_hostname=HOSTNAME)
            writer.write(b"x")
            readers.append((reader, writer))
        # (A connection whose server side is still in its handshake is
        # closed all the same: the server tracks the socket transports.)
        server.close()
        getattr(server, how)()
        await server.wait_closed()
        for reader, writer in readers:
            try:
                assert await reader.read() == b""
            except (ConnectionError, ssl.SSLError):
                pass
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, ssl.SSLError):
                pass

    run(loop, main())


# ---------------------------------------------------------------------------
# Errors in the application's protocol


class Boom(Exception):
    pass


def test_data_received_raises(loop):
    """An exception from the application's data_received under TLS: reported
    once, the connection is dropped, connection_lost() gets the exception."""
    lost = loop.create_future()

    class Server(asyncio.Protocol):
        def data_received(self, data):
            raise Boom(data)

        def connection_lost(self, exc):
            lost.set_result(exc)

    async def main():
        server = await loop.create_server(Server, HOST, 0, ssl=server_context())
        async with server:
            reader, writer = await asyncio.open_connection(
                HOST, _port(server), ssl=client_context(), server_hostname=HOSTNAME)
            writer.write(b"boom")
            exc = await lost
            assert isinstance(exc, Boom) and exc.args == (b"boom",)
            # The client sees the connection end (no close_notify came).
            try:
                assert await reader.read() == b""
            except (ConnectionError, ssl.SSLError):
                pass
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, ssl.SSLError):
                pass

    reported = []
    run(loop, main(), reported=reported)
    assert len(reported) == 1, reported
    # The message is the TLS layer's: 3.11 rewrote it.
    assert reported[0]["message"] in ("Fatal error on SSL protocol",
                                      "application protocol failed to receive SSL data")
    assert isinstance(reported[0]["exception"], Boom)


def test_connection_made_raises(loop):
    """connection_made() raising once the client's handshake completes:
    reported once (3.11+: by the socket transport, as the failure of the
    call that fed the handshake), and create_connection() raises it."""
    class Client(asyncio.Protocol):
        def connection_made(self, transport):
            raise Boom("connection_made")

    async def main():
        server = await _start_echo_server()
        async with server:
            with pytest.raises(Boom):
                await loop.create_connection(
                    Client, HOST, _port(server), ssl=client_context(),
                    server_hostname=HOSTNAME)

    reported = []
    run(loop, main(), reported=reported)
    assert len(reported) == 1, reported
    if PY311 or not isinstance(loop, asyncio.BaseEventLoop):
        # The socket transport's report: SSLProtocol (a BufferedProtocol
        # from 3.11 on; minloop's on every Python) lets the exception out
        # of buffer_updated().
        assert reported[0]["message"] == "Fatal error: protocol.buffer_updated() call failed."
    else:
        # asyncio 3.10's SSLProtocol catches it itself.
        assert reported[0]["message"] == "SSL error in data received"
    assert isinstance(reported[0]["exception"], Boom)
    assert isinstance(reported[0]["transport"], asyncio.Transport)


# ---------------------------------------------------------------------------
# Shutdown


def test_close_sends_close_notify(loop):
    """close() sends close_notify; the peer's answer completes the shutdown."""
    peer = BlockingTLSPeer("answer")

    async def main():
        reader, writer = await asyncio.open_connection(
            HOST, peer.port, ssl=client_context(), server_hostname=HOSTNAME)
        writer.write(b"bye")
        await writer.drain()
        writer.close()
        await writer.wait_closed()   # no exception: a clean shutdown

    try:
        run(loop, main())
    finally:
        peer.stop()
    assert peer.error is None, peer.error
    assert peer.got_close_notify
    assert peer.received == b"bye"


def test_ragged_eof(loop):
    """The peer closes TCP without a close_notify: asyncio's TLS layer takes
    it as an end of stream, after the data that came before it."""
    peer = BlockingTLSPeer("ragged")

    async def main():
        reader, writer = await asyncio.open_connection(
            HOST, peer.port, ssl=client_context(), server_hostname=HOSTNAME)
        assert await reader.read() == b"last words"
        assert reader.at_eof()
        writer.close()
        await writer.wait_closed()

    try:
        run(loop, main())
    finally:
        peer.stop()
    assert peer.error is None, peer.error


def test_server_closes_during_handshake(loop):
    """A server that closes each connection at once: the client's handshake
    sees the EOF and create_connection() raises asyncio's
    ConnectionResetError."""
    class Closer(asyncio.Protocol):
        def connection_made(self, transport):
            transport.close()

    async def main():
        server = await loop.create_server(Closer, HOST, 0)
        async with server:
            with pytest.raises(ConnectionResetError):
                await loop.create_connection(
                    asyncio.Protocol, HOST, _port(server), ssl=client_context(),
                    server_hostname=HOSTNAME)

    run(loop, main())


@needs_311
def test_shutdown_timeout_when_peer_never_answers(loop):
    """A peer that never answers close_notify: after ssl_shutdown_timeout the
    connection is dropped and connection_lost() gets asyncio's TimeoutError."""
    peer = BlockingTLSPeer("hold")
    lost = loop.create_future()

    class Client(asyncio.Protocol):
        def connection_lost(self, exc):
            lost.set_result(exc)

    async def main():
        transport, _ = await loop.create_connection(
            Client, HOST, peer.port, ssl=client_context(),
            server_hostname=HOSTNAME, ssl_shutdown_timeout=0.3)
        transport.write(b"x")
        transport.close()
        exc = await lost
        assert isinstance(exc, TimeoutError)
        assert str(exc) == "SSL shutdown timed out"

    try:
        run(loop, main())
    finally:
        peer.stop()
    assert peer.error is None, peer.error


@needs_311
def test_shutdown_timeout_streams(loop):
    """The same through streams: wait_closed() raises the TimeoutError."""
    peer = BlockingTLSPeer("hold")

    async def main():
        _, writer = await asyncio.open_connection(
            HOST, peer.port, ssl=client_context(), server_hostname=HOSTNAME,
            ssl_shutdown_timeout=0.3)
        writer.close()
        with pytest.raises(TimeoutError, match="SSL shutdown timed out"):
            await writer.wait_closed()

    try:
        run(loop, main())
    finally:
        peer.stop()


@pytest.mark.parametrize("who", ["client", "server", "both"])
def test_tls13_shutdown_does_not_hang(loop, who):
    """TLS 1.3 on both ends; whichever side closes first (or both at once),
    both connections end cleanly, long before the shutdown timeout."""
    server_done = loop.create_future()

    async def handler(reader, writer):
        try:
            assert writer.get_extra_info("ssl_object").version() == "TLSv1.3"
            writer.write(await reader.readexactly(5))
            await writer.drain()
            if who in ("server", "both"):
                writer.close()
            else:
                assert await reader.read() == b""   # the client's close_notify
                writer.close()
            await writer.wait_closed()
        except BaseException as exc:
            server_done.set_exception(exc)
        else:
            server_done.set_result(None)

    async def main():
        server = await asyncio.start_server(
            handler, HOST, 0, ssl=server_context(tls13_only=True))
        async with server:
            reader, writer = await asyncio.open_connection(
                HOST, _port(server), ssl=client_context(tls13_only=True),
                server_hostname=HOSTNAME)
            writer.write(b"hello")
            assert await reader.readexactly(5) == b"hello"
            if who in ("client", "both"):
                writer.close()
            else:
                assert await reader.read() == b""   # the server's close_notify
                writer.close()
            await writer.wait_closed()
            await server_done

    # Well under the default 30 s shutdown timeout: a hang fails here.
    run(loop, main())


# ---------------------------------------------------------------------------
# Upgrading a plain connection


def test_loop_start_tls_both_sides(loop):
    """A plain dialogue, then both ends upgrade with loop.start_tls()."""
    server_ctx, client_ctx = server_context(), client_context()

    class Server(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport

        def data_received(self, data):
            if data == b"STARTTLS":
                self.transport.write(b"GO")
                loop.create_task(self.upgrade())
            else:
                self.transport.write(b"secure:" + data)

        async def upgrade(self):
            self.transport = await loop.start_tls(
                self.transport, self, server_ctx, server_side=True)
            # Only now may the client talk: data_received writes to
            # self.transport, the TLS transport from here on.
            self.transport.write(b"READY")

    class Client(asyncio.Protocol):
        def __init__(self):
            self.queue = asyncio.Queue()

        def data_received(self, data):
            self.queue.put_nowait(data)

        def connection_lost(self, exc):
            self.queue.put_nowait(None)

    async def main():
        server = await loop.create_server(Server, HOST, 0)
        async with server:
            transport, proto = await loop.create_connection(Client, HOST, _port(server))
            assert transport.get_extra_info("ssl_object") is None
            transport.write(b"STARTTLS")
            assert await proto.queue.get() == b"GO"
            tls = await loop.start_tls(transport, proto, client_ctx,
                                       server_hostname=HOSTNAME)
            assert tls.get_extra_info("ssl_object") is not None
            assert tls.get_protocol() is proto
            assert await proto.queue.get() == b"READY"
            tls.write(b"ping")
            assert await proto.queue.get() == b"secure:ping"
            tls.close()
            assert await proto.queue.get() is None

    run(loop, main())


@needs_311
def test_streamwriter_start_tls(loop):
    server_ctx, client_ctx = server_context(), client_context()

    async def handler(reader, writer):
        assert await reader.readline() == b"STARTTLS\n"
        writer.write(b"GO\n")
        await writer.drain()
        await writer.start_tls(server_ctx)
        while line := await reader.readline():
            writer.write(b"secure:" + line)
            await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def main():
        server = await asyncio.start_server(handler, HOST, 0, limit=1 << 20)
        async with server:
            reader, writer = await asyncio.open_connection(HOST, _port(server), limit=1 << 20)
            writer.write(b"STARTTLS\n")
            assert await reader.readline() == b"GO\n"
            await writer.start_tls(client_ctx, server_hostname=HOSTNAME)
            assert writer.get_extra_info("peercert") is not None
            big = b"y" * 300_000 + b"\n"
            writer.write(b"a\n" + big)
            assert await reader.readline() == b"secure:a\n"
            assert await reader.readline() == b"secure:" + big
            writer.close()
            await writer.wait_closed()

    run(loop, main())


# ---------------------------------------------------------------------------
# Other ways in


def test_tls_over_unix_socket(loop, tmp_path):
    path = str(tmp_path / "tls.sock")

    async def main():
        async def echo(reader, writer):
            writer.write(await reader.readexactly(100_000))
            await writer.drain()
            writer.close()

        server = await asyncio.start_unix_server(echo, path, ssl=server_context())
        async with server:
            reader, writer = await asyncio.open_unix_connection(
                path, ssl=client_context(), server_hostname=HOSTNAME)
            assert writer.get_extra_info("ssl_object") is not None
            data = random.Random(3).randbytes(100_000)
            writer.write(data)
            assert await reader.readexactly(len(data)) == data
            writer.close()
            await writer.wait_closed()

    run(loop, main())


def test_connect_accepted_socket_with_ssl(loop):
    """A socket accepted by hand, then served over TLS through
    connect_accepted_socket(ssl=)."""
    listener = socket.create_server((HOST, 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]

    class Echo(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport

        def data_received(self, data):
            self.transport.write(data)

    async def main():
        connect = asyncio.ensure_future(asyncio.open_connection(
            HOST, port, ssl=client_context(), server_hostname=HOSTNAME))
        conn, _ = await loop.sock_accept(listener)
        transport, _ = await loop.connect_accepted_socket(
            Echo, conn, ssl=server_context())
        assert transport.get_extra_info("ssl_object") is not None
        reader, writer = await connect
        writer.write(b"accepted")
        assert await reader.readexactly(8) == b"accepted"
        writer.close()
        await writer.wait_closed()
        transport.close()

    try:
        run(loop, main())
    finally:
        listener.close()
