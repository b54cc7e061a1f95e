"""loop.sock_sendfile() and loop.sendfile(), on both loops.

asyncio's semantics (base_events.py sock_sendfile/sendfile and their
fallbacks, unix_events.py _sock_sendfile_native, selector_events.py
_sendfile_native): what is sent, what is returned, where the file's
position is left, which errors come out, and what happens to the socket or
transport meanwhile and afterwards.  The sender is a socket or transport of
the loop under test; the peer is a plain socket read with the loop's
sock_recv(), or a blocking socket read in a thread where the test is about
throughput.
"""

import asyncio
import errno
import hashlib
import inspect
import io
import os
import random
import selectors
import socket
import ssl
import sys
import threading

import pytest

# More than loopback's socket buffers hold once they are made small: a
# sendfile of it must wait for the peer to read.
SIZE = 4 * 1024 * 1024 + 7
SMALL_BUFFER = 4096
# asyncio's native sock_sendfile() leaves the file at the offset reached even
# when it sent nothing from 3.14 (its position helper lost total_sent).
SEEKS_ALWAYS = "total_sent" not in inspect.signature(
    asyncio.unix_events._UnixSelectorEventLoop._sock_sendfile_update_filepos).parameters
PY312 = sys.version_info >= (3, 12)


@pytest.fixture(scope="module")
def data():
    return random.Random(1).randbytes(SIZE)


@pytest.fixture
def datafile(tmp_path, data):
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    with open(path, "rb") as f:
        yield f


def tcp_pair(small_buffers=False):
    """(sender, peer): a connected, non-blocking TCP pair on loopback."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        if small_buffers:
            # An accepted socket inherits the listener's receive buffer.
            server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
        sender = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
    if small_buffers:
        sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)
    sender.setblocking(False)
    peer.setblocking(False)
    return sender, peer


@pytest.fixture
def pair():
    sender, peer = tcp_pair()
    yield sender, peer
    sender.close()
    peer.close()


@pytest.fixture
def small_pair():
    sender, peer = tcp_pair(small_buffers=True)
    yield sender, peer
    sender.close()
    peer.close()


async def receive_all(loop, sock):
    """Everything sock receives until EOF."""
    received = bytearray()
    while True:
        chunk = await loop.sock_recv(sock, 256 * 1024)
        if not chunk:
            return bytes(received)
        received += chunk


def run_both(loop, first, second):
    """Run two coroutines concurrently on loop; their results."""
    async def main():
        return await asyncio.gather(first, second)
    return loop.run_until_complete(main())


async def until(predicate, loop_iterations=10000):
    for _ in range(loop_iterations):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never met")


class Proto(asyncio.Protocol):
    """The sending transport's protocol."""

    def __init__(self, loop):
        self.transport = None
        self.data = bytearray()
        self.lost = loop.create_future()

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.data += data

    def connection_lost(self, exc):
        if not self.lost.done():
            self.lost.set_result(exc)


async def connect(loop, sock):
    return await loop.create_connection(lambda: Proto(loop), sock=sock)


async def start_sendfile(loop, sock, file, *, before=None):
    """A transport on sock, `before` written to it, and loop.sendfile(file)
    started on it (one loop iteration run): (transport, protocol, task)."""
    tr, pr = await connect(loop, sock)
    if before is not None:
        tr.write(before)
    task = asyncio.ensure_future(loop.sendfile(tr, file))
    await asyncio.sleep(0)
    return tr, pr, task


# --- loop.sock_sendfile ------------------------------------------------------

@pytest.mark.parametrize("offset, count, expected", [
    (0, None, slice(None)),
    (1000, 2000, slice(1000, 3000)),
    (1000, None, slice(1000, None)),
    (SIZE - 10, 1000, slice(SIZE - 10, None)),   # count beyond the end
    (SIZE + 10, None, slice(0, 0)),              # offset beyond the end
])
def test_sock_sendfile(loop, pair, datafile, data, offset, count, expected):
    sender, peer = pair

    async def send():
        try:
            return await loop.sock_sendfile(sender, datafile, offset, count)
        finally:
            sender.close()

    sent, received = run_both(loop, send(), receive_all(loop, peer))
    assert received == data[expected]
    assert sent == len(received)
    # Just after what was sent; a send of nothing leaves it alone before
    # 3.14, and puts it at the offset from 3.14 (asyncio's native path
    # seeks unconditionally there).
    assert datafile.tell() == (offset + sent if sent or SEEKS_ALWAYS else 0)


def test_sock_sendfile_empty_file(loop, pair, tmp_path):
    sender, peer = pair
    path = tmp_path / "empty"
    path.write_bytes(b"")
    with open(path, "rb") as f:
        assert loop.run_until_complete(loop.sock_sendfile(sender, f)) == 0
        assert f.tell() == 0
        assert loop.run_until_complete(loop.sock_sendfile(sender, f, 0, 100)) == 0


def test_sock_sendfile_waits_for_a_slow_peer(loop, small_pair, datafile, data):
    """Many partial sends, each waiting for the peer to make room."""
    sender, peer = small_pair

    async def send():
        try:
            return await loop.sock_sendfile(sender, datafile, fallback=False)
        finally:
            sender.close()

    async def slow_receive():
        received = bytearray()
        while True:
            await asyncio.sleep(0)
            chunk = await loop.sock_recv(peer, 64 * 1024)
            if not chunk:
                return bytes(received)
            received += chunk

    sent, received = run_both(loop, send(), slow_receive())
    assert sent == SIZE and received == data
    assert datafile.tell() == SIZE


def test_sock_sendfile_between_sendalls(loop, pair, datafile, data):
    sender, peer = pair

    async def send():
        await loop.sock_sendall(sender, b"head")
        sent = await loop.sock_sendfile(sender, datafile)
        await loop.sock_sendall(sender, b"tail")
        sender.close()
        return sent

    sent, received = run_both(loop, send(), receive_all(loop, peer))
    assert sent == SIZE
    assert received == b"head" + data + b"tail"


def test_sock_sendfile_not_a_regular_file(loop, pair):
    """A file without an fd: SendfileNotAvailableError without fallback, a
    read-and-send with it."""
    sender, peer = pair
    source = io.BytesIO(b"0123456789" * 1000)
    with pytest.raises(asyncio.SendfileNotAvailableError, match="not a regular file"):
        loop.run_until_complete(loop.sock_sendfile(sender, source, fallback=False))
    assert source.tell() == 0

    async def send():
        try:
            return await loop.sock_sendfile(sender, source, 5, 9000)
        finally:
            sender.close()

    sent, received = run_both(loop, send(), receive_all(loop, peer))
    assert sent == 9000
    assert received == source.getvalue()[5:9005]
    assert source.tell() == 9005


def test_sock_sendfile_from_a_pipe(loop, pair, pipe):
    """A file whose size fstat() does not know is "empty" to asyncio when
    no count is given: nothing is read or sent."""
    sender, peer = pair
    r, w = pipe
    os.write(w, b"x" * 5000)
    with open(r, "rb", closefd=False) as f:
        assert loop.run_until_complete(loop.sock_sendfile(sender, f)) == 0
    assert os.read(r, 10000) == b"x" * 5000


def test_sock_sendfile_to_a_closed_peer(loop, datafile):
    """The very first sendfile() fails: nothing was sent, so asyncio calls it
    unavailable (and, with fallback, the plain send fails as such)."""
    sender, peer = socket.socketpair()
    sender.setblocking(False)
    peer.close()
    try:
        with pytest.raises(asyncio.SendfileNotAvailableError, match="os.sendfile call failed"):
            loop.run_until_complete(loop.sock_sendfile(sender, datafile, fallback=False))
        assert datafile.tell() == 0
        with pytest.raises(ConnectionError):
            loop.run_until_complete(loop.sock_sendfile(sender, datafile))
    finally:
        sender.close()


def test_sock_sendfile_peer_closes_midway(loop, small_pair, datafile):
    sender, peer = small_pair

    async def main():
        task = asyncio.ensure_future(loop.sock_sendfile(sender, datafile))
        received = await loop.sock_recv(peer, 1024)
        assert received
        # Closing with unread data resets the connection.
        peer.close()
        with pytest.raises(ConnectionError):
            await task

    loop.run_until_complete(main())
    # An error leaves the file just after what was sent.
    assert 0 < datafile.tell() < SIZE


def test_sock_sendfile_cancelled(loop, small_pair, datafile, data):
    """Cancelled while waiting for room: no writer is left on the socket,
    which goes on working; the file's position is where it was (asyncio
    does not move it on cancellation)."""
    sender, peer = small_pair

    async def main():
        task = asyncio.ensure_future(loop.sock_sendfile(sender, datafile))
        await asyncio.sleep(0)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert datafile.tell() == 0

        async def finish():
            await loop.sock_sendall(sender, b"after")
            sender.close()

        _, received = await asyncio.gather(finish(), receive_all(loop, peer))
        return received

    received = loop.run_until_complete(main())
    assert received.endswith(b"after")
    assert 0 < len(received) - 5 < SIZE
    assert received[:-5] == data[:len(received) - 5]


def test_sock_sendfile_closed_unfinished(loop, small_pair, datafile):
    """A sendfile coroutine closed while it waits (as when its task is
    garbage-collected) leaves the file's position alone, as asyncio's."""
    sender, peer = small_pair
    coro = loop.sock_sendfile(sender, datafile)
    waiting_for = coro.send(None)
    assert asyncio.isfuture(waiting_for)
    coro.close()
    assert datafile.tell() == 0


@pytest.mark.parametrize("args, exc, match", [
    ((0, "count"), TypeError, "count must be a positive integer"),
    ((0, 0), ValueError, "count must be a positive integer"),
    ((0, -1), ValueError, "count must be a positive integer"),
    (("offset",), TypeError, "offset must be a non-negative integer"),
    ((-1,), ValueError, "offset must be a non-negative integer"),
])
def test_sock_sendfile_bad_arguments(loop, pair, datafile, args, exc, match):
    sender, _ = pair
    with pytest.raises(exc, match=match):
        loop.run_until_complete(loop.sock_sendfile(sender, datafile, *args))
    assert datafile.tell() == 0


def test_sock_sendfile_text_file(loop, pair, tmp_path):
    sender, _ = pair
    path = tmp_path / "text"
    path.write_text("text")
    with open(path, encoding="utf-8") as f:
        with pytest.raises(ValueError, match="binary mode"):
            loop.run_until_complete(loop.sock_sendfile(sender, f))


def test_sock_sendfile_datagram_socket(loop, datafile):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        with pytest.raises(ValueError, match="only SOCK_STREAM type"):
            loop.run_until_complete(loop.sock_sendfile(sock, datafile))


def test_sock_sendfile_blocking_socket_in_debug_mode(loop, datafile):
    loop.set_debug(True)
    with socket.socket() as sock:
        with pytest.raises(ValueError, match="must be non-blocking"):
            loop.run_until_complete(loop.sock_sendfile(sock, datafile))


def test_sock_sendfile_ssl_socket(loop, datafile):
    with socket.socket() as raw:
        ctx = ssl.create_default_context()
        with ctx.wrap_socket(raw, do_handshake_on_connect=False,
                             server_hostname="x") as sock:
            with pytest.raises(TypeError, match="Socket cannot be of type SSLSocket"):
                loop.run_until_complete(loop.sock_sendfile(sock, datafile))


# --- loop.sendfile on a transport ---------------------------------------------

def send_on_transport(loop, sender, peer, coro_factory, *, before=b"", after=b""):
    """Run coro_factory(transport) between two writes; (its result, what the
    peer received, the protocol)."""

    async def send():
        tr, pr = await connect(loop, sender)
        tr.write(before)
        try:
            result = await coro_factory(tr)
            tr.write(after)
        finally:
            tr.close()
        return result, pr

    (result, pr), received = run_both(loop, send(), receive_all(loop, peer))
    return result, received, pr


@pytest.mark.parametrize("offset, count, expected", [
    (0, None, slice(None)),
    (1000, 100, slice(1000, 1100)),
    (SIZE - 10, 1000, slice(SIZE - 10, None)),
])
def test_sendfile(loop, pair, datafile, data, offset, count, expected):
    sender, peer = pair
    sent, received, _ = send_on_transport(
        loop, sender, peer,
        lambda tr: loop.sendfile(tr, datafile, offset, count),
        before=b"before", after=b"after")
    assert sent == len(data[expected])
    assert received == b"before" + data[expected] + b"after"
    assert datafile.tell() == offset + sent


def test_sendfile_empty_file(loop, pair, tmp_path):
    sender, peer = pair
    path = tmp_path / "empty"
    path.write_bytes(b"")
    with open(path, "rb") as f:
        sent, received, _ = send_on_transport(
            loop, sender, peer, lambda tr: loop.sendfile(tr, f), after=b"x")
        assert f.tell() == 0
    assert sent == 0 and received == b"x"


def test_sendfile_keeps_reading_state(loop, pair, datafile):
    """Reading is paused while the file goes out, and resumed after; data
    the peer sent meanwhile reaches the protocol afterwards."""
    sender, peer = pair

    async def main():
        tr, pr = await connect(loop, sender)
        peer.send(b"hello")
        sent = await loop.sendfile(tr, datafile, 0, 1000)
        assert tr.is_reading()
        await until(lambda: pr.data == b"hello")
        tr.pause_reading()
        await loop.sendfile(tr, datafile, 0, 1000)
        assert not tr.is_reading()   # not resumed by sendfile
        tr.close()
        return sent

    assert loop.run_until_complete(main()) == 1000


def test_sendfile_not_a_regular_file(loop, pair):
    """A file without an fd: SendfileNotAvailableError without fallback; with
    it, asyncio's read-and-write fallback (write() still works meanwhile)."""
    sender, peer = pair
    source = io.BytesIO(bytes(range(256)) * 400)

    async def send(tr):
        with pytest.raises(asyncio.SendfileNotAvailableError, match="not a regular file"):
            await loop.sendfile(tr, source, fallback=False)
        assert tr.is_reading()
        assert source.tell() == 0
        sent = await loop.sendfile(tr, source, 10, 50000)
        assert type(tr.get_protocol()) is Proto   # restored
        return sent

    sent, received, pr = send_on_transport(loop, sender, peer, send, after=b"!")
    assert sent == 50000
    assert received == source.getvalue()[10:50010] + b"!"
    assert source.tell() == 50010


def test_sendfile_fallback_with_small_write_buffer(loop, loop_kind, small_pair, data):
    """The fallback waits for the transport's buffer (pause_writing) and
    restores the protocol and its paused state afterwards."""
    if loop_kind == "asyncio" and PY312:
        # Not strict: it depends on how much the socket takes at once.
        pytest.xfail("asyncio bug: since 3.12 (zero-copy write, GH-91166) its "
                     "transport queues a view of the bytearray that the fallback "
                     "reads the next chunk into, so queued bytes are overwritten")
    sender, peer = small_pair
    source = io.BytesIO(data[:1024 * 1024])

    async def send(tr):
        tr.set_write_buffer_limits(high=SMALL_BUFFER)
        return await loop.sendfile(tr, source)

    sent, received, pr = send_on_transport(loop, sender, peer, send)
    assert sent == 1024 * 1024
    assert received == data[:1024 * 1024]


def test_sendfile_write_during_sendfile(loop, small_pair, datafile, data):
    sender, peer = small_pair

    async def main():
        tr, pr, task = await start_sendfile(loop, sender, datafile)
        assert not task.done()
        with pytest.raises(RuntimeError, match="unable to write; sendfile is in progress"):
            tr.write(b"data")
        writelines = "writelines" if PY312 else "write"
        with pytest.raises(RuntimeError, match=f"unable to {writelines}; sendfile is in progress"):
            tr.writelines([b"data"])
        received = await receive_until(loop, peer, SIZE)
        sent = await task
        tr.write(b"end")
        tr.close()
        received += await receive_all(loop, peer)
        return sent, received

    sent, received = loop.run_until_complete(main())
    assert sent == SIZE and received == data + b"end"


async def receive_until(loop, sock, size):
    received = bytearray()
    while len(received) < size:
        chunk = await loop.sock_recv(sock, size - len(received))
        assert chunk
        received += chunk
    return bytes(received)


def test_sendfile_waits_for_the_write_buffer(loop, small_pair, datafile, data):
    """Data written before sendfile() goes out first."""
    sender, peer = small_pair
    head = b"h" * (1024 * 1024)
    sent, received, _ = send_on_transport(
        loop, sender, peer, lambda tr: loop.sendfile(tr, datafile), before=head)
    assert sent == SIZE
    assert received == head + data


def test_sendfile_peer_closes_midway(loop, small_pair, datafile):
    sender, peer = small_pair

    async def main():
        tr, pr = await connect(loop, sender)
        task = asyncio.ensure_future(loop.sendfile(tr, datafile))
        assert await loop.sock_recv(peer, 1024)
        peer.close()   # with unread data: a reset
        with pytest.raises(ConnectionError):
            await task
        await pr.lost   # the transport reads the reset once reading resumes
        assert tr.is_closing()

    loop.run_until_complete(main())
    assert 0 < datafile.tell() < SIZE


def test_sendfile_cancelled(loop, small_pair, datafile, data):
    """Cancelled mid-way: reading resumes, write() works again, nothing more
    of the file is sent, and the file's position is where it was (asyncio)."""
    sender, peer = small_pair

    async def main():
        tr, pr, task = await start_sendfile(loop, sender, datafile)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert tr.is_reading()
        assert datafile.tell() == 0
        tr.write(b"after")
        tr.close()
        return await receive_all(loop, peer)

    received = loop.run_until_complete(main())
    assert received.endswith(b"after")
    assert 0 < len(received) - 5 < SIZE
    assert received[:-5] == data[:len(received) - 5]


def test_sendfile_aborted_while_waiting_for_the_buffer(loop, small_pair, datafile):
    sender, peer = small_pair

    async def main():
        # More than the socket takes.
        tr, pr, task = await start_sendfile(loop, sender, datafile, before=b"x" * (1024 * 1024))
        tr.abort()
        with pytest.raises(ConnectionError, match="Connection is closed by peer"):
            await task
        assert datafile.tell() == 0

    loop.run_until_complete(main())


@pytest.mark.parametrize("close", ["close", "abort"])
def test_sendfile_transport_closed_midway(loop, minloop_only, small_pair, datafile, data, close):
    """minloop is stricter: asyncio's sendfile waits forever (and its
    transport reports InvalidStateError) when the transport is closed while
    the file goes out; minloop's fails with ConnectionError and leaves the
    file just after what was sent."""
    sender, peer = small_pair

    async def main():
        tr, pr, task = await start_sendfile(loop, sender, datafile)
        assert not task.done()
        getattr(tr, close)()
        with pytest.raises(ConnectionError, match="Connection is closed by peer"):
            await task
        return await receive_all(loop, peer)

    received = loop.run_until_complete(main())
    assert received == data[:len(received)]
    assert datafile.tell() == len(received)


def test_sendfile_closed_while_waiting_for_the_buffer(loop, minloop_only, small_pair, datafile):
    """minloop is stricter: close() while sendfile() waits for the buffer to
    drain gives ConnectionError once it has (asyncio: InvalidStateError in
    the transport, then AttributeError on the socket it has dropped)."""
    sender, peer = small_pair

    async def main():
        tr, pr, task = await start_sendfile(loop, sender, datafile, before=b"x" * (1024 * 1024))
        tr.close()
        received = await receive_all(loop, peer)
        with pytest.raises(ConnectionError, match="Connection is closed by peer"):
            await task
        return received

    assert loop.run_until_complete(main()) == b"x" * (1024 * 1024)


def test_sendfile_closing_transport(loop, pair, datafile):
    sender, peer = pair

    async def main():
        tr, pr = await connect(loop, sender)
        tr.close()
        with pytest.raises(RuntimeError, match="Transport is closing"):
            await loop.sendfile(tr, datafile)

    loop.run_until_complete(main())
    assert datafile.tell() == 0


def test_sendfile_datagram_transport(loop, datafile):
    async def main():
        tr, pr = await loop.create_datagram_endpoint(
            asyncio.DatagramProtocol, local_addr=("127.0.0.1", 0))
        try:
            with pytest.raises(RuntimeError, match="not supported"):
                await loop.sendfile(tr, datafile)
        finally:
            tr.close()

    loop.run_until_complete(main())


def test_sendfile_text_file(loop, pair, tmp_path):
    sender, peer = pair
    path = tmp_path / "text"
    path.write_text("text")

    async def main():
        tr, pr = await connect(loop, sender)
        with open(path, encoding="utf-8") as f:
            with pytest.raises(ValueError, match="binary mode"):
                await loop.sendfile(tr, f)
        assert tr.is_reading()
        tr.close()

    loop.run_until_complete(main())


def test_sendfile_buffered_protocol(loop, pair, datafile, data):
    """A BufferedProtocol is restored after the fallback swapped it out."""
    sender, peer = pair

    class Buffered(asyncio.BufferedProtocol):
        def __init__(self):
            self.buf = bytearray(100)
            self.got = bytearray()

        def get_buffer(self, hint):
            return self.buf

        def buffer_updated(self, n):
            self.got += self.buf[:n]

    async def main():
        tr, pr = await loop.create_connection(Buffered, sock=sender)
        await loop.sendfile(tr, io.BytesIO(b"abc"))
        await loop.sendfile(tr, datafile, 0, 10)
        assert tr.get_protocol() is pr
        peer.send(b"ping")
        await until(lambda: pr.got == b"ping")
        tr.close()
        return await receive_all(loop, peer)

    assert loop.run_until_complete(main()) == b"abc" + data[:10]


# --- TLS: the fallback -------------------------------------------------------

def tls_contexts():
    test_utils = pytest.importorskip("test.test_asyncio.utils")
    return test_utils.simple_server_sslcontext(), test_utils.simple_client_sslcontext()


def test_sendfile_over_tls(loop, datafile, data):
    server_ctx, client_ctx = tls_contexts()

    async def main():
        received = bytearray()
        done = loop.create_future()

        class Receiver(asyncio.Protocol):
            def data_received(self, chunk):
                received.extend(chunk)

            def connection_lost(self, exc):
                done.set_result(exc)

        server = await loop.create_server(Receiver, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        tr, pr = await loop.create_connection(
            lambda: Proto(loop), "127.0.0.1", port, ssl=client_ctx,
            server_hostname="localhost")
        with pytest.raises(RuntimeError, match="fallback is disabled"):
            await loop.sendfile(tr, datafile, fallback=False)
        tr.write(b"<")
        sent = await loop.sendfile(tr, datafile, 100, 1024 * 1024)
        tr.write(b">")
        tr.close()
        assert await done is None
        server.close()
        await server.wait_closed()
        return sent, bytes(received)

    sent, received = loop.run_until_complete(main())
    assert sent == 1024 * 1024
    assert received == b"<" + data[100:100 + 1024 * 1024] + b">"
    assert datafile.tell() == 100 + 1024 * 1024


# --- a large file --------------------------------------------------------------

BIG_SIZE = 100 * 1024 * 1024


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    """A 100 MB file and its sha256."""
    path = tmp_path_factory.mktemp("sendfile") / "big.bin"
    digest = hashlib.sha256()
    rng = random.Random(2)
    with open(path, "wb") as f:
        for _ in range(BIG_SIZE // (4 * 1024 * 1024)):
            chunk = rng.randbytes(4 * 1024 * 1024)
            digest.update(chunk)
            f.write(chunk)
    yield path, digest.hexdigest()
    path.unlink()


def hash_in_thread(sock):
    """Read sock (blocking, in a thread) until EOF; a dict filled with the
    byte count and sha256 when the thread ends."""
    result = {}

    def run():
        digest = hashlib.sha256()
        buf = bytearray(1024 * 1024)
        view = memoryview(buf)
        total = 0
        while True:
            n = sock.recv_into(buf)
            if not n:
                break
            digest.update(view[:n])
            total += n
        result.update(size=total, sha256=digest.hexdigest())

    sock.setblocking(True)
    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


@pytest.mark.timeout(120)
@pytest.mark.parametrize("api", ["sock_sendfile", "sendfile"])
def test_100mb_over_loopback(loop, pair, big_file, api):
    path, expected = big_file
    sender, peer = pair
    thread, result = hash_in_thread(peer)

    async def main():
        with open(path, "rb") as f:
            if api == "sock_sendfile":
                sent = await loop.sock_sendfile(sender, f, fallback=False)
                sender.close()
            else:
                tr, pr = await connect(loop, sender)
                sent = await loop.sendfile(tr, f, fallback=False)
                tr.close()
                await pr.lost
            assert f.tell() == BIG_SIZE
        return sent

    try:
        assert loop.run_until_complete(main()) == BIG_SIZE
    finally:
        sender.close()
        thread.join()
    assert result == {"size": BIG_SIZE, "sha256": expected}


# --- asyncio's native step: loop._sock_sendfile_native_impl ------------------
#
# asyncio's unix_events sends with _sock_sendfile_native_impl(fut,
# registered_fd, sock, fileno, offset, count, blocksize, total_sent), which
# completes fut; code outside the loop (CPython's tests) calls it directly.
# Each chunk is an os.sendfile() call, looked up when it is made.

def start_native_impl(loop, sock, file, offset=0, count=None, total_sent=0,
                      registered_fd=None, fut=None):
    """loop._sock_sendfile_native_impl as asyncio's _sock_sendfile_native
    calls it (blocksize: the file's size when count is None); the future."""
    fut = fut or loop.create_future()
    blocksize = count if count else os.fstat(file.fileno()).st_size
    loop._sock_sendfile_native_impl(fut, registered_fd, sock, file.fileno(),
                                    offset, count, blocksize, total_sent)
    return fut


def is_registered(loop, sock):
    try:
        key = loop._selector.get_key(sock)
    except KeyError:
        return False
    return bool(key.events & selectors.EVENT_WRITE)


def test_native_impl_sends_all_and_completes_its_future(loop, small_pair, datafile, data):
    sender, peer = small_pair

    async def send():
        fut = start_native_impl(loop, sender, datafile)
        try:
            sent = await fut
            assert not is_registered(loop, sender)
            return sent
        finally:
            sender.close()

    sent, received = run_both(loop, send(), receive_all(loop, peer))
    assert sent == SIZE and received == data
    assert datafile.tell() == SIZE


def test_native_impl_resumes_a_send(loop, pair, datafile, data):
    """registered_fd and total_sent: the bytes sent so far count in the
    result; that fd's writer (none here) is removed first."""
    sender, peer = pair

    async def send():
        fut = start_native_impl(loop, sender, datafile, offset=1000,
                                total_sent=1000, registered_fd=sender.fileno())
        try:
            return await fut
        finally:
            sender.close()

    sent, received = run_both(loop, send(), receive_all(loop, peer))
    assert received == data[1000:]
    assert sent == SIZE
    assert datafile.tell() == SIZE


def test_native_impl_cancelled_stops_waiting(loop, small_pair, datafile):
    """Cancelled while the socket is full: its writer goes, the file's
    position stays where it was."""
    sender, peer = small_pair

    async def main():
        fut = start_native_impl(loop, sender, datafile)
        assert not fut.done()
        assert is_registered(loop, sender)
        fut.cancel()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not is_registered(loop, sender)

    loop.run_until_complete(main())
    assert datafile.tell() == 0


def test_native_impl_with_a_cancelled_future(loop, pair, datafile):
    """A step that finds its future cancelled sends nothing, and seeks the
    file past what was sent before (total_sent)."""
    sender, peer = pair
    fut = loop.create_future()
    fut.cancel()
    start_native_impl(loop, sender, datafile, offset=1000, total_sent=1000,
                      registered_fd=sender.fileno(), fut=fut)
    assert not is_registered(loop, sender)
    assert datafile.tell() == 1000
    peer.setblocking(False)
    with pytest.raises(BlockingIOError):
        peer.recv(1)


def test_native_impl_errors_go_to_the_future(loop, pair, datafile, monkeypatch):
    """The first sendfile() failing: SendfileNotAvailableError; a later one:
    its own error, the position just after what was sent."""
    sender, peer = pair
    err = OSError(errno.EINVAL, "no")

    def failing_sendfile(*args):
        raise err

    monkeypatch.setattr(os, "sendfile", failing_sendfile)
    fut = start_native_impl(loop, sender, datafile)
    with pytest.raises(asyncio.SendfileNotAvailableError, match="os.sendfile call failed"):
        fut.result()
    assert datafile.tell() == 0
    fut = start_native_impl(loop, sender, datafile, offset=1000, total_sent=1000,
                            registered_fd=sender.fileno())
    assert fut.exception() is err
    assert datafile.tell() == 1000
    assert not is_registered(loop, sender)


def test_os_sendfile_replaced_at_run_time_is_used(loop, pair, datafile, data, monkeypatch):
    sender, peer = pair
    calls = []
    real_sendfile = os.sendfile

    def counting_sendfile(*args):
        calls.append(args[2:])
        return real_sendfile(*args)

    monkeypatch.setattr(os, "sendfile", counting_sendfile)

    async def send():
        try:
            return await loop.sock_sendfile(sender, datafile, 1000, None, fallback=False)
        finally:
            sender.close()

    sent, received = run_both(loop, send(), receive_all(loop, peer))
    assert received == data[1000:] and sent == SIZE - 1000
    assert calls and calls[0][0] == 1000


def test_without_os_sendfile(loop, pair, datafile, data, monkeypatch):
    """Where os has no sendfile(), the native path is not available: without
    fallback that is the error; with it, sock_sendfile() and sendfile() read
    and send."""
    sender, peer = pair
    monkeypatch.delattr(os, "sendfile")
    with pytest.raises(asyncio.SendfileNotAvailableError,
                       match="os[.]sendfile[(][)] is not available"):
        loop.run_until_complete(loop.sock_sendfile(sender, datafile, fallback=False))
    assert datafile.tell() == 0

    async def send():
        sent = await loop.sock_sendfile(sender, datafile, 0, 1000)
        tr, pr = await connect(loop, sender)
        sent += await loop.sendfile(tr, datafile, 1000)
        tr.close()
        await pr.lost
        return sent

    sent, received = run_both(loop, send(), receive_all(loop, peer))
    assert sent == SIZE and received == data
