"""TCP and Unix stream transports: what a protocol sees, on both loops.

Each test connects a transport of the loop under test (create_connection,
create_unix_connection, connect_accepted_socket) to a plain socket, the
"peer", driven with the loop's sock_* coroutines, and checks the protocol
callbacks and transport methods against asyncio's selector transport
(Lib/asyncio/selector_events.py, _SelectorSocketTransport): the same calls,
the same order, the same exception types and messages.
"""

import asyncio
import gc
import logging
import math
import os
import socket
import struct
import sys
import tempfile
import warnings
from asyncio import constants, trsock

import pytest

BIG = 32 * 1024 * 1024   # more than loopback's socket buffers can hold


# --- helpers ---------------------------------------------------------------

class Recorder(asyncio.Protocol):
    """A protocol that records every callback, in order."""

    def __init__(self, loop, eof_result=None):
        self.transport = None
        self.events = []
        self.data = bytearray()
        self.chunks = []
        self.eof_result = eof_result
        self.made = loop.create_future()
        self.lost = loop.create_future()

    def connection_made(self, transport):
        self.transport = transport
        self.events.append("made")
        self.made.set_result(None)

    def data_received(self, data):
        self.events.append("data")
        self.chunks.append(data)
        self.data += data

    def eof_received(self):
        self.events.append("eof")
        return self.eof_result

    def pause_writing(self):
        self.events.append("pause")

    def resume_writing(self):
        self.events.append("resume")

    def connection_lost(self, exc):
        self.events.append("lost")
        self.lost.set_result(exc)


class BufRecorder(asyncio.BufferedProtocol):
    """A BufferedProtocol with a fixed-size buffer that records what it got."""

    def __init__(self, loop, size=64 * 1024):
        self.transport = None
        self.buf = bytearray(size)
        self.data = bytearray()
        self.hints = []
        self.updates = []
        self.events = []
        self.made = loop.create_future()
        self.lost = loop.create_future()

    def connection_made(self, transport):
        self.transport = transport
        self.events.append("made")
        self.made.set_result(None)

    def get_buffer(self, sizehint):
        self.hints.append(sizehint)
        return self.buf

    def buffer_updated(self, nbytes):
        self.updates.append(nbytes)
        self.data += self.buf[:nbytes]

    def eof_received(self):
        self.events.append("eof")

    def connection_lost(self, exc):
        self.events.append("lost")
        self.lost.set_result(exc)


async def until(cond, timeout=5.0):
    """Wait (polling the running loop) until cond() is true."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {cond}")
        await asyncio.sleep(0.001)


async def recv_exactly(loop, sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = await loop.sock_recv(sock, min(n - len(data), 1 << 20))
        if not chunk:
            break
        data += chunk
    return bytes(data)


async def recv_all(loop, sock):
    """Everything the peer receives until EOF (or a reset)."""
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


def rst(sock):
    """Close ``sock`` so that the kernel sends a RST instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def peers(loop):
    """A list to put peer sockets in; they are closed before the loop is."""
    socks = []
    yield socks
    for s in socks:
        s.close()


@pytest.fixture
def tcp(loop, peers):
    """tcp(factory, **kw) -> (transport, protocol, peer): a create_connection
    transport connected to a plain non-blocking socket (the peer)."""
    async def connect(factory, **kwargs):
        listener = socket.create_server(("127.0.0.1", 0))
        try:
            tr, pr = await loop.create_connection(
                factory, *listener.getsockname(), **kwargs)
            peer, _ = listener.accept()    # already queued by the kernel
        finally:
            listener.close()
        peer.setblocking(False)
        peers.append(peer)
        return tr, pr, peer
    return connect


async def close_and_wait(tr, proto):
    tr.close()
    return await asyncio.wait_for(asyncio.shield(proto.lost), 5)


def handler_log(loop):
    """Record the contexts given to the loop's exception handler."""
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))
    return contexts


# --- the transport object ----------------------------------------------------

def test_transport_is_asyncio_transport(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        assert isinstance(tr, asyncio.Transport)
        assert isinstance(tr, asyncio.ReadTransport)
        assert isinstance(tr, asyncio.WriteTransport)
        assert isinstance(tr, asyncio.BaseTransport)
        assert pr.transport is tr
        assert pr.events == ["made"]       # made before create_connection returns
        assert tr.get_protocol() is pr
        assert not tr.is_closing()
        assert tr.is_reading()
        assert tr.can_write_eof() is True
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


def test_extra_info(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        sock = tr.get_extra_info("socket")
        assert isinstance(sock, trsock.TransportSocket)
        assert sock.family == socket.AF_INET
        assert sock.type == socket.SOCK_STREAM
        assert tr.get_extra_info("sockname") == peer.getpeername()
        assert tr.get_extra_info("peername") == peer.getsockname()
        assert sock.getsockname() == tr.get_extra_info("sockname")
        assert tr.get_extra_info("no such key") is None
        assert tr.get_extra_info("no such key", "dflt") == "dflt"
        # The transport sets TCP_NODELAY on TCP sockets.
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


def test_instance_attributes_and_patching(loop, tcp):
    """Attributes can be set on a live transport, as on asyncio's (which has
    an instance dict): mock.patch.object(transport, "write") intercepts the
    calls made through the attribute and is undone on exit; a cycle through
    the instance dict is collected.  CPython 3.14's test_ssl patches write()
    on the socket transport under a TLS connection this way."""
    from unittest import mock
    import weakref

    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        tr.note = "mine"
        assert tr.note == "mine" and tr.__dict__["note"] == "mine"
        with mock.patch.object(tr, "write", wraps=tr.write) as patched:
            tr.write(b"ab")
        assert patched.call_count == 1
        assert "write" not in tr.__dict__      # the patch is undone
        tr.write(b"cd")
        assert await recv_exactly(loop, peer, 4) == b"abcd"
        tr.me = tr                             # a cycle through the dict
        ref = weakref.ref(tr)
        await close_and_wait(tr, pr)
        return ref
    ref = loop.run_until_complete(main())
    gc.collect()
    assert ref() is None


def test_read_ready_cb_and_sock_as_asyncio_has_them(loop, tcp):
    """asyncio's private _read_ready_cb (the method reads go through; None
    once closing where asyncio's close() clears it, 3.12+) and a writable
    _sock, which CPython's tests read and swap."""
    import inspect
    from asyncio import selector_events
    close_clears = "_read_ready_cb = None" in inspect.getsource(
        selector_events._SelectorSocketTransport.close)

    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        assert callable(tr._read_ready_cb)
        sock = tr._sock
        tr._sock = sock                        # writable, as asyncio's is
        assert tr._sock is sock
        tr.close()
        if close_clears:
            assert tr._read_ready_cb is None
        await asyncio.wait_for(asyncio.shield(pr.lost), 5)
    loop.run_until_complete(main())


def test_repr_names_fd(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        fd = tr.get_extra_info("socket").fileno()
        assert f"fd={fd}" in repr(tr)
        # asyncio's state fields: read=polling|idle, write=<polling|idle, bufsize=N>
        assert "read=polling" in repr(tr)
        assert "write=<idle, bufsize=0>" in repr(tr)
        tr.pause_reading()
        assert "read=idle" in repr(tr)
        tr.resume_reading()
        tr.write(b"x" * BIG)
        assert f"write=<polling, bufsize={tr.get_write_buffer_size()}>" in repr(tr)
        tr.abort()
        assert "closing" in repr(tr)
        await pr.lost
        assert "closed" in repr(tr)
    loop.run_until_complete(main())


def test_unclosed_transport_warns(loop, tcp):
    """A transport that is dropped unclosed warns (ResourceWarning) and
    closes its socket."""
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        # Not reading: nothing in the loop holds the transport any more.
        tr.pause_reading()
        return tr.get_extra_info("socket").fileno()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fd = loop.run_until_complete(main())
        gc.collect()
    msgs = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert any("unclosed transport" in m for m in msgs), msgs
    with pytest.raises(OSError):
        os.fstat(fd)     # the transport's socket was closed


# --- reading -----------------------------------------------------------------

def test_data_received_in_order(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        for i in range(5):
            await loop.sock_sendall(peer, b"chunk%d;" % i)
            await until(lambda: pr.data.endswith(b"chunk%d;" % i))
        assert bytes(pr.data) == b"chunk0;chunk1;chunk2;chunk3;chunk4;"
        assert all(type(c) is bytes for c in pr.chunks)
        peer.close()
        assert await pr.lost is None
        # eof_received returned None, so the transport closed itself.
        assert pr.events[0] == "made"
        assert pr.events[-2:] == ["eof", "lost"]
        assert set(pr.events[1:-2]) == {"data"}
        assert tr.is_closing()
    loop.run_until_complete(main())


def test_pause_resume_reading(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        assert tr.is_reading()
        tr.pause_reading()
        assert not tr.is_reading()
        tr.pause_reading()                   # idempotent
        await loop.sock_sendall(peer, b"held back")
        await asyncio.sleep(0.05)
        assert pr.data == b""
        tr.resume_reading()
        assert tr.is_reading()
        tr.resume_reading()                  # idempotent
        await until(lambda: pr.data == b"held back")
        await close_and_wait(tr, pr)
        assert not tr.is_reading()           # closing: not reading
        tr.resume_reading()                  # no effect once closing
        assert not tr.is_reading()
    loop.run_until_complete(main())


def test_buffered_protocol_small_buffer(loop, tcp):
    """A buffer smaller than the data: it arrives in buffer-sized pieces."""
    async def main():
        tr, pr, peer = await tcp(lambda: BufRecorder(loop, size=7))
        payload = bytes(range(256)) * 40
        await loop.sock_sendall(peer, payload)
        await until(lambda: len(pr.data) >= len(payload))
        assert bytes(pr.data) == payload
        assert all(0 < n <= 7 for n in pr.updates)
        assert all(isinstance(h, int) for h in pr.hints)
        peer.close()
        assert await pr.lost is None
        assert pr.events == ["made", "eof", "lost"]
    loop.run_until_complete(main())


@pytest.mark.parametrize("bad", ["raise", "empty"])
def test_buffered_protocol_get_buffer_fails(loop, tcp, bad):
    contexts = handler_log(loop)

    class Bad(BufRecorder):
        def get_buffer(self, sizehint):
            if bad == "raise":
                raise ZeroDivisionError("no buffer")
            return bytearray()

    async def main():
        tr, pr, peer = await tcp(lambda: Bad(loop))
        await loop.sock_sendall(peer, b"data")
        exc = await asyncio.wait_for(pr.lost, 5)
        assert tr.is_closing()
        assert len(contexts) == 1
        ctx = contexts[0]
        assert ctx["message"] == "Fatal error: protocol.get_buffer() call failed."
        assert ctx["transport"] is tr
        assert ctx["protocol"] is pr
        if bad == "raise":
            assert isinstance(ctx["exception"], ZeroDivisionError)
        else:
            assert isinstance(ctx["exception"], RuntimeError)
            assert str(ctx["exception"]) == "get_buffer() returned an empty buffer"
        assert exc is ctx["exception"]
        assert await recv_all(loop, peer) == b""    # the transport closed the socket
    loop.run_until_complete(main())


def test_buffered_protocol_buffer_updated_fails(loop, tcp):
    contexts = handler_log(loop)

    class Bad(BufRecorder):
        def buffer_updated(self, nbytes):
            raise ZeroDivisionError

    async def main():
        tr, pr, peer = await tcp(lambda: Bad(loop))
        await loop.sock_sendall(peer, b"data")
        exc = await asyncio.wait_for(pr.lost, 5)
        assert [c["message"] for c in contexts] == [
            "Fatal error: protocol.buffer_updated() call failed."]
        assert isinstance(exc, ZeroDivisionError)
    loop.run_until_complete(main())


def test_data_received_raises(loop, tcp):
    contexts = handler_log(loop)

    class Bad(Recorder):
        def data_received(self, data):
            super().data_received(data)
            raise ZeroDivisionError("boom")

    async def main():
        tr, pr, peer = await tcp(lambda: Bad(loop))
        await loop.sock_sendall(peer, b"data")
        exc = await asyncio.wait_for(pr.lost, 5)
        assert tr.is_closing()
        assert len(contexts) == 1
        ctx = contexts[0]
        assert ctx["message"] == "Fatal error: protocol.data_received() call failed."
        assert isinstance(ctx["exception"], ZeroDivisionError)
        assert ctx["transport"] is tr
        assert ctx["protocol"] is pr
        # connection_lost gets the protocol's exception.
        assert exc is ctx["exception"]
        assert pr.events == ["made", "data", "lost"]
        assert await recv_all(loop, peer) == b""
    loop.run_until_complete(main())


def test_eof_received_raises(loop, tcp):
    contexts = handler_log(loop)

    class Bad(Recorder):
        def eof_received(self):
            raise ZeroDivisionError

    async def main():
        tr, pr, peer = await tcp(lambda: Bad(loop))
        peer.shutdown(socket.SHUT_WR)
        exc = await asyncio.wait_for(pr.lost, 5)
        assert [c["message"] for c in contexts] == [
            "Fatal error: protocol.eof_received() call failed."]
        assert isinstance(exc, ZeroDivisionError)
    loop.run_until_complete(main())


@pytest.mark.libkqueue_differs("socket error")
def test_peer_reset_gives_connection_reset(loop, tcp, peers):
    contexts = handler_log(loop)

    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        peers.remove(peer)
        rst(peer)
        exc = await asyncio.wait_for(pr.lost, 5)
        assert isinstance(exc, ConnectionResetError)
        assert tr.is_closing()
        assert "eof" not in pr.events
        # An OSError is not reported to the exception handler.
        assert contexts == []
    loop.run_until_complete(main())


# --- writing -----------------------------------------------------------------

def test_write_bytes_like(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        tr.write(b"bytes;")
        tr.write(bytearray(b"bytearray;"))
        tr.write(memoryview(b"xmemoryview;")[1:])
        tr.write(memoryview(bytearray(b"ints")).cast("B"))
        tr.write(b"")                          # nothing, no error
        expected = b"bytes;bytearray;memoryview;ints"
        assert await recv_exactly(loop, peer, len(expected)) == expected
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


@pytest.mark.parametrize("bad", ["text", 1, None, [b"x"]])
def test_write_rejects_non_bytes(loop, tcp, bad):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        with pytest.raises(TypeError) as info:
            tr.write(bad)
        # asyncio's own words on the running Python (3.14 reworded them).
        with pytest.raises(TypeError) as want:
            asyncio.selector_events._SelectorSocketTransport.write(None, bad)
        assert str(info.value) == str(want.value)
        assert not tr.is_closing()
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


def test_writelines(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        tr.writelines([b"a", bytearray(b"b"), memoryview(b"c"), b""])
        tr.writelines(iter([b"d", b"e"]))
        tr.writelines([])
        assert await recv_exactly(loop, peer, 5) == b"abcde"
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


def test_write_eof(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop, eof_result=None))
        assert tr.can_write_eof()
        tr.write(b"last words")
        tr.write_eof()
        tr.write_eof()                                  # idempotent
        assert not tr.is_closing()
        assert await recv_all(loop, peer) == b"last words"   # then EOF
        with pytest.raises(RuntimeError, match=r"^Cannot call write\(\) after write_eof\(\)$"):
            tr.write(b"more")
        with pytest.raises(RuntimeError, match="write_eof"):
            tr.writelines([b"more"])
        # Half-closed in our direction only: the peer can still send.
        await loop.sock_sendall(peer, b"reply")
        await until(lambda: pr.data == b"reply")
        peer.close()
        assert await pr.lost is None
        assert pr.events[-2:] == ["eof", "lost"]
    loop.run_until_complete(main())


def test_write_eof_after_buffered_write(loop, tcp):
    """EOF is sent after the buffered data, not before."""
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        payload = os.urandom(1024) * (BIG // 1024)
        tr.write(payload)
        assert tr.get_write_buffer_size() > 0
        tr.write_eof()
        got = await recv_all(loop, peer)
        assert len(got) == len(payload) and got == payload
        assert tr.get_write_buffer_size() == 0
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


@pytest.mark.parametrize("keep_open", [True, False])
def test_half_close_by_peer(loop, tcp, keep_open):
    """eof_received() returning true keeps the transport open for writing;
    returning a false value closes it."""
    async def main():
        tr, pr, peer = await tcp(
            lambda: Recorder(loop, eof_result=True if keep_open else None))
        await loop.sock_sendall(peer, b"request")
        peer.shutdown(socket.SHUT_WR)
        await until(lambda: "eof" in pr.events)
        assert pr.data == b"request"
        if keep_open:
            await asyncio.sleep(0.01)
            assert not tr.is_closing()
            assert not pr.lost.done()
            tr.write(b"response")
            assert await recv_exactly(loop, peer, 8) == b"response"
            tr.close()
        assert await asyncio.wait_for(pr.lost, 5) is None
        assert tr.is_closing()
        assert pr.events == ["made", "data", "eof", "lost"]
        assert await recv_all(loop, peer) == b""
    loop.run_until_complete(main())


def test_write_buffer_limits(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        assert tr.get_write_buffer_limits() == (16 * 1024, 64 * 1024)
        tr.set_write_buffer_limits(high=100, low=10)
        assert tr.get_write_buffer_limits() == (10, 100)
        tr.set_write_buffer_limits(high=100)
        assert tr.get_write_buffer_limits() == (25, 100)
        tr.set_write_buffer_limits(low=10)
        assert tr.get_write_buffer_limits() == (10, 40)
        tr.set_write_buffer_limits()
        assert tr.get_write_buffer_limits() == (16 * 1024, 64 * 1024)
        tr.set_write_buffer_limits(high=0)
        assert tr.get_write_buffer_limits() == (0, 0)
        with pytest.raises(ValueError, match=r"^high \(1\) must be >= low \(2\) must be >= 0$"):
            tr.set_write_buffer_limits(high=1, low=2)
        with pytest.raises(ValueError, match="must be >= 0"):
            tr.set_write_buffer_limits(high=1, low=-1)
        assert tr.get_write_buffer_limits() == (0, 0)     # unchanged
        assert tr.get_write_buffer_size() == 0
        assert "pause" not in pr.events
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


def test_pause_resume_writing_at_water_marks(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        tr.set_write_buffer_limits(high=64 * 1024, low=16 * 1024)
        tr.write(b"x" * BIG)
        # write() itself calls pause_writing() once over the high-water mark.
        assert pr.events == ["made", "pause"]
        size = tr.get_write_buffer_size()
        assert size > 64 * 1024
        tr.write(b"y")
        assert tr.get_write_buffer_size() == size + 1
        assert pr.events == ["made", "pause"]              # paused only once
        # The slow reader catches up: resume_writing() at or below low water.
        sizes_at_resume = []

        def resume_writing():
            sizes_at_resume.append(tr.get_write_buffer_size())
            pr.events.append("resume")
        pr.resume_writing = resume_writing
        got = await recv_exactly(loop, peer, BIG + 1)
        assert got == b"x" * BIG + b"y"
        await until(lambda: tr.get_write_buffer_size() == 0)
        assert pr.events == ["made", "pause", "resume"]
        assert sizes_at_resume[0] <= 16 * 1024
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


def test_set_limits_below_buffer_pauses(loop, tcp):
    """Lowering the high-water mark under the buffered size pauses at once."""
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        tr.set_write_buffer_limits(high=BIG * 2)
        tr.write(b"x" * BIG)
        assert "pause" not in pr.events
        assert tr.get_write_buffer_size() > 0
        tr.set_write_buffer_limits(high=1024)
        assert pr.events == ["made", "pause"]
        tr.abort()
        assert await pr.lost is None
    loop.run_until_complete(main())


@pytest.mark.parametrize("high, low", [
    (1e6, None), (2 ** 70, None), (float("inf"), 1024), (BIG * 2.5, 10.5)])
def test_water_marks_may_be_any_numbers(loop, tcp, high, low):
    """asyncio takes floats and numbers past Py_ssize_t (float('inf') for
    "never pause"): the same comparisons, nothing raised."""
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        tr.set_write_buffer_limits(high=high, low=low)
        got_low, got_high = tr.get_write_buffer_limits()
        # asyncio keeps the number; minloop the whole bytes it compares with.
        assert got_high in (high, sys.maxsize if high >= sys.maxsize else math.floor(high))
        tr.write(b"x" * BIG)
        size = tr.get_write_buffer_size()
        assert 0 < size <= BIG
        assert ("pause" in pr.events) == (size > high)
        tr.set_write_buffer_limits(high=size - 0.5, low=0)
        assert "pause" in pr.events          # size > size - 0.5
        tr.abort()
        assert await pr.lost is None
    loop.run_until_complete(main())


def test_close_flushes_then_connection_lost(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        payload = os.urandom(1024) * (BIG // 1024)
        tr.write(payload)
        assert tr.get_write_buffer_size() > 0
        tr.close()
        assert tr.is_closing()
        tr.close()                                   # idempotent
        await asyncio.sleep(0.01)
        assert not pr.lost.done()                    # still flushing
        got = await recv_all(loop, peer)
        assert got == payload
        assert await asyncio.wait_for(pr.lost, 5) is None
        assert pr.events.count("lost") == 1
        assert tr.get_write_buffer_size() == 0
    loop.run_until_complete(main())


def test_close_with_empty_buffer_calls_connection_lost_soon(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        tr.close()
        assert tr.is_closing()
        assert pr.events == ["made"]                 # not synchronously
        assert await asyncio.wait_for(pr.lost, 5) is None
        assert await recv_all(loop, peer) == b""
    loop.run_until_complete(main())


def test_abort_drops_buffer(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        tr.write(b"x" * BIG)
        assert tr.get_write_buffer_size() > 0
        tr.abort()
        assert tr.is_closing()
        assert pr.events == ["made", "pause"]        # lost is called soon, not now
        assert await asyncio.wait_for(pr.lost, 5) is None
        assert tr.get_write_buffer_size() == 0
        got = await recv_all(loop, peer)
        assert len(got) < BIG
        tr.abort()                                   # no effect now
        tr.close()
        assert pr.events.count("lost") == 1
    loop.run_until_complete(main())


def test_writes_after_connection_lost(loop, tcp, caplog):
    """Writes to a lost connection are dropped; after a few, asyncio's
    warning is logged (constants.LOG_THRESHOLD_FOR_CONNLOST_WRITES)."""
    threshold = constants.LOG_THRESHOLD_FOR_CONNLOST_WRITES

    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        tr.abort()
        await pr.lost
        caplog.set_level(logging.WARNING, logger="asyncio")
        caplog.clear()
        for _ in range(threshold - 1):
            tr.write(b"dropped")
        assert [r for r in caplog.records if r.name == "asyncio"] == []
        tr.write(b"dropped")
        tr.write(b"dropped")
        records = [r for r in caplog.records if r.name == "asyncio"]
        assert [r.getMessage() for r in records] == ["socket.send() raised exception."] * 2
        assert all(r.levelno == logging.WARNING for r in records)
    loop.run_until_complete(main())


# --- protocols ----------------------------------------------------------------

def test_set_protocol_mid_stream(loop, tcp):
    async def main():
        tr, first, peer = await tcp(lambda: Recorder(loop))
        second = Recorder(loop)
        await loop.sock_sendall(peer, b"one")
        await until(lambda: first.data == b"one")
        tr.set_protocol(second)
        assert tr.get_protocol() is second
        await loop.sock_sendall(peer, b"two")
        await until(lambda: second.data == b"two")
        peer.close()
        assert await asyncio.wait_for(second.lost, 5) is None
        assert first.events == ["made", "data"]
        assert second.events == ["data", "eof", "lost"]   # no connection_made
    loop.run_until_complete(main())


def test_set_protocol_to_buffered_mid_stream(loop, tcp):
    async def main():
        tr, first, peer = await tcp(lambda: Recorder(loop))
        second = BufRecorder(loop, size=3)
        await loop.sock_sendall(peer, b"one")
        await until(lambda: first.data == b"one")
        tr.set_protocol(second)
        await loop.sock_sendall(peer, b"two and more")
        await until(lambda: second.data == b"two and more")
        assert max(second.updates) <= 3
        assert first.data == b"one"
        await close_and_wait(tr, second)
        assert not first.lost.done()
    loop.run_until_complete(main())


# --- create_connection ----------------------------------------------------------

def test_create_connection_host_port(loop, peers):
    async def main():
        with socket.create_server(("127.0.0.1", 0)) as listener:
            addr = listener.getsockname()
            tr, pr = await loop.create_connection(lambda: Recorder(loop), *addr)
            peer, _ = listener.accept()
        peers.append(peer)
        assert isinstance(pr, Recorder) and pr.transport is tr
        assert tr.get_extra_info("peername") == addr
        tr.write(b"hi")
        peer.setblocking(False)
        assert await recv_exactly(loop, peer, 2) == b"hi"
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


def test_create_connection_port_as_string(loop, peers):
    async def main():
        with socket.create_server(("127.0.0.1", 0)) as listener:
            host, port = listener.getsockname()
            tr, pr = await loop.create_connection(lambda: Recorder(loop), host, str(port))
            peers.append(listener.accept()[0])
        assert tr.get_extra_info("peername") == (host, port)
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


def test_create_connection_sock(loop, peers):
    async def main():
        with socket.create_server(("127.0.0.1", 0)) as listener:
            sock = socket.create_connection(listener.getsockname())
            peers.append(listener.accept()[0])
        fd = sock.fileno()
        tr, pr = await loop.create_connection(lambda: Recorder(loop), sock=sock)
        assert tr.get_extra_info("socket").fileno() == fd
        assert tr.get_extra_info("peername") == sock.getpeername()
        # asyncio makes the socket non-blocking.
        assert sock.getblocking() is False
        await close_and_wait(tr, pr)
        assert sock.fileno() == -1          # the transport closed it
    loop.run_until_complete(main())


def test_create_connection_unix_socket_as_sock(loop, peers):
    """create_connection(sock=) takes any SOCK_STREAM socket, AF_UNIX too."""
    async def main():
        a, b = socket.socketpair()
        peers.append(b)
        b.setblocking(False)
        tr, pr = await loop.create_connection(lambda: Recorder(loop), sock=a)
        tr.write(b"unix")
        assert await recv_exactly(loop, b, 4) == b"unix"
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


def test_create_connection_local_addr(loop, peers):
    async def main():
        port = free_port()
        with socket.create_server(("127.0.0.1", 0)) as listener:
            tr, pr = await loop.create_connection(
                lambda: Recorder(loop), *listener.getsockname(),
                local_addr=("127.0.0.1", port))
            peer, addr = listener.accept()
        peers.append(peer)
        assert tr.get_extra_info("sockname") == ("127.0.0.1", port) == addr
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


def test_create_connection_local_addr_in_use(loop, peers):
    async def main():
        with socket.create_server(("127.0.0.1", 0)) as listener, \
                socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            with pytest.raises(OSError) as info:
                await loop.create_connection(
                    lambda: Recorder(loop), *listener.getsockname(),
                    local_addr=taken.getsockname())
        assert info.value.errno == __import__("errno").EADDRINUSE
        assert "error while attempting to bind on address" in str(info.value)
    loop.run_until_complete(main())


def test_create_connection_family(loop, peers):
    async def main():
        with socket.create_server(("127.0.0.1", 0)) as listener:
            port = listener.getsockname()[1]
            tr, pr = await loop.create_connection(
                lambda: Recorder(loop), "localhost", port, family=socket.AF_INET)
            peers.append(listener.accept()[0])
        assert tr.get_extra_info("socket").family == socket.AF_INET
        assert tr.get_extra_info("peername") == ("127.0.0.1", port)
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


@pytest.mark.parametrize("kwargs", [
    {"happy_eyeballs_delay": 0.25},
    {"happy_eyeballs_delay": 0.01, "interleave": 2},
    {"interleave": 1},
])
def test_create_connection_happy_eyeballs(loop, peers, kwargs):
    """'localhost' may resolve to ::1 first, where nobody listens: the race
    (or the sequential walk) still ends on 127.0.0.1."""
    async def main():
        with socket.create_server(("127.0.0.1", 0)) as listener:
            port = listener.getsockname()[1]
            tr, pr = await loop.create_connection(
                lambda: Recorder(loop), "localhost", port, **kwargs)
            peers.append(listener.accept()[0])
        assert tr.get_extra_info("peername")[:2] == ("127.0.0.1", port)
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


@pytest.mark.libkqueue_differs("socket error")
def test_create_connection_refused(loop):
    async def main():
        with pytest.raises(ConnectionRefusedError):
            await loop.create_connection(asyncio.Protocol, "127.0.0.1", free_port())
    loop.run_until_complete(main())


@pytest.mark.skipif(sys.version_info < (3, 12), reason="all_errors is new in Python 3.12")
def test_create_connection_all_errors(loop):
    async def main():
        with pytest.raises(ExceptionGroup) as info:    # noqa: F821 (3.11+)
            await loop.create_connection(asyncio.Protocol, "127.0.0.1",
                                         free_port(), all_errors=True)
        assert str(info.value).startswith("create_connection failed")
        assert [type(e) for e in info.value.exceptions] == [ConnectionRefusedError]
    loop.run_until_complete(main())


def test_create_connection_bad_arguments(loop):
    async def main():
        with pytest.raises(ValueError, match="host and port was not specified and no sock specified"):
            await loop.create_connection(asyncio.Protocol)
        with socket.socket() as s:
            with pytest.raises(ValueError, match="host/port and sock can not be specified at the same time"):
                await loop.create_connection(asyncio.Protocol, "127.0.0.1", 1, sock=s)
        with socket.socket(type=socket.SOCK_DGRAM) as s:
            with pytest.raises(ValueError, match="A Stream Socket was expected"):
                await loop.create_connection(asyncio.Protocol, sock=s)
        with pytest.raises(ValueError, match="server_hostname is only meaningful with ssl"):
            await loop.create_connection(asyncio.Protocol, "127.0.0.1", 1,
                                         server_hostname="x")
        with pytest.raises(ValueError, match="ssl_handshake_timeout is only meaningful with ssl"):
            await loop.create_connection(asyncio.Protocol, "127.0.0.1", 1,
                                         ssl_handshake_timeout=1)
    loop.run_until_complete(main())


def test_create_connection_protocol_factory_raises(loop):
    """A failing protocol factory: the error propagates, the socket is closed
    (the fd-leak check of the loop fixture proves it)."""
    async def main():
        with socket.create_server(("127.0.0.1", 0)) as listener:
            def factory():
                raise ZeroDivisionError
            with pytest.raises(ZeroDivisionError):
                await loop.create_connection(factory, *listener.getsockname())
            conn, _ = listener.accept()
            conn.close()
    loop.run_until_complete(main())


# --- connect_accepted_socket --------------------------------------------------

def test_connect_accepted_socket(loop, peers):
    async def main():
        with socket.create_server(("127.0.0.1", 0)) as listener:
            client = socket.create_connection(listener.getsockname())
            peers.append(client)
            accepted, _ = listener.accept()
        tr, pr = await loop.connect_accepted_socket(lambda: Recorder(loop), accepted)
        assert isinstance(tr, asyncio.Transport)
        assert pr.events == ["made"]
        assert tr.get_extra_info("peername") == client.getsockname()
        client.setblocking(False)
        await loop.sock_sendall(client, b"ping")
        await until(lambda: pr.data == b"ping")
        tr.write(b"pong")
        assert await recv_exactly(loop, client, 4) == b"pong"
        await close_and_wait(tr, pr)
        assert accepted.fileno() == -1
    loop.run_until_complete(main())


def test_connect_accepted_socket_rejects_datagram(loop):
    async def main():
        with socket.socket(type=socket.SOCK_DGRAM) as s:
            with pytest.raises(ValueError, match="A Stream Socket was expected"):
                await loop.connect_accepted_socket(asyncio.Protocol, s)
    loop.run_until_complete(main())


# --- Unix sockets ---------------------------------------------------------------

@pytest.fixture
def unix_path():
    with tempfile.TemporaryDirectory(prefix="minloop-") as d:
        yield os.path.join(d, "sock")


def test_unix_connection_round_trip(loop, unix_path):
    async def main():
        server_protos = []

        def factory():
            p = Recorder(loop, eof_result=True)
            server_protos.append(p)
            return p
        srv = await loop.create_unix_server(factory, unix_path)
        tr, pr = await loop.create_unix_connection(lambda: Recorder(loop), unix_path)
        assert isinstance(tr, asyncio.Transport)
        assert tr.get_extra_info("peername") == unix_path
        assert tr.get_extra_info("socket").family == socket.AF_UNIX
        await until(lambda: server_protos)
        sp = server_protos[0]
        await sp.made
        assert sp.transport.get_extra_info("sockname") == unix_path
        tr.write(b"hello")
        tr.write_eof()
        await until(lambda: "eof" in sp.events)
        assert sp.data == b"hello"
        sp.transport.write(b"bye")
        sp.transport.close()
        assert await asyncio.wait_for(pr.lost, 5) is None
        assert pr.data == b"bye"
        assert await sp.lost is None
        srv.close()
        await srv.wait_closed()
    loop.run_until_complete(main())


def test_unix_abstract_namespace(loop):
    name = f"\0minloop-test-{os.getpid()}-{id(loop)}"

    async def main():
        srv = await loop.create_unix_server(lambda: Recorder(loop), name)
        assert srv.sockets[0].getsockname() == name.encode()
        tr, pr = await loop.create_unix_connection(lambda: Recorder(loop), name)
        assert tr.get_extra_info("peername") == name.encode()
        await close_and_wait(tr, pr)
        srv.close()
        await srv.wait_closed()
    loop.run_until_complete(main())


def test_unix_sock_arguments(loop, unix_path):
    async def main():
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(unix_path)
        srv = await loop.create_unix_server(lambda: Recorder(loop), sock=lsock)
        assert srv.sockets[0].fileno() == lsock.fileno()
        csock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        csock.connect(unix_path)
        tr, pr = await loop.create_unix_connection(lambda: Recorder(loop), sock=csock)
        assert tr.get_extra_info("socket").fileno() == csock.fileno()
        await close_and_wait(tr, pr)
        srv.close()
        await srv.wait_closed()
        assert lsock.fileno() == -1
    loop.run_until_complete(main())


def test_unix_connection_missing_path(loop, unix_path):
    async def main():
        with pytest.raises(FileNotFoundError):
            await loop.create_unix_connection(asyncio.Protocol, unix_path)
    loop.run_until_complete(main())


def test_unix_connection_refused(loop, unix_path):
    """A socket file nobody listens on: ConnectionRefusedError."""
    async def main():
        s = socket.socket(socket.AF_UNIX)
        s.bind(unix_path)
        try:
            with pytest.raises(ConnectionRefusedError):
                await loop.create_unix_connection(asyncio.Protocol, unix_path)
        finally:
            s.close()
    loop.run_until_complete(main())


@pytest.mark.skipif(sys.version_info < (3, 13), reason="cleanup_socket is new in Python 3.13")
@pytest.mark.parametrize("cleanup", [None, True, False])
def test_unix_server_cleanup_socket(loop, unix_path, cleanup):
    async def main():
        kwargs = {} if cleanup is None else {"cleanup_socket": cleanup}
        srv = await loop.create_unix_server(asyncio.Protocol, unix_path, **kwargs)
        assert os.path.exists(unix_path)
        srv.close()
        await srv.wait_closed()
        assert os.path.exists(unix_path) is (cleanup is False)
    loop.run_until_complete(main())


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="before 3.13 the file stays")
def test_unix_server_leaves_socket_file(loop, unix_path):
    async def main():
        srv = await loop.create_unix_server(asyncio.Protocol, unix_path)
        srv.close()
        await srv.wait_closed()
        assert os.path.exists(unix_path)
    loop.run_until_complete(main())


def test_unix_server_replaces_stale_socket_file(loop, unix_path):
    async def main():
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(unix_path)
        stale.close()
        srv = await loop.create_unix_server(asyncio.Protocol, unix_path)
        tr, pr = await loop.create_unix_connection(lambda: Recorder(loop), unix_path)
        await close_and_wait(tr, pr)
        srv.close()
        await srv.wait_closed()
    loop.run_until_complete(main())


def test_unix_server_path_is_regular_file(loop, unix_path):
    async def main():
        open(unix_path, "w").close()
        with pytest.raises(OSError, match="Address .* is already in use"):
            await loop.create_unix_server(asyncio.Protocol, unix_path)
    loop.run_until_complete(main())


# --- edges: what happens inside callbacks, and after close() ----------------------

@pytest.mark.parametrize("action", ["close", "abort", "pause_reading"])
def test_no_delivery_after_close_or_pause_in_callback(loop, tcp, action):
    """Closing, aborting or pausing from inside buffer_updated() stops
    delivery at once, with more data already waiting in the socket."""
    class Stopper(BufRecorder):
        def buffer_updated(self, nbytes):
            super().buffer_updated(nbytes)
            if len(self.updates) == 1:
                getattr(self.transport, action)()

    async def main():
        tr, pr, peer = await tcp(lambda: Stopper(loop, size=10))
        await loop.sock_sendall(peer, b"a" * 1000)
        await until(lambda: pr.updates)
        await asyncio.sleep(0.05)
        assert pr.updates == [10]
        if action == "pause_reading":
            assert not tr.is_reading()
            tr.resume_reading()
            await until(lambda: len(pr.data) == 1000)
            await close_and_wait(tr, pr)
        else:
            assert await pr.lost is None
            assert pr.events == ["made", "lost"]
    loop.run_until_complete(main())


def test_peer_closes_while_paused(loop, tcp):
    """EOF is not seen while reading is paused; resuming delivers the data,
    then eof_received(), then connection_lost()."""
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        tr.pause_reading()
        await loop.sock_sendall(peer, b"last")
        peer.shutdown(socket.SHUT_WR)
        await asyncio.sleep(0.05)
        assert pr.events == ["made"]
        assert not tr.is_closing()
        tr.resume_reading()
        assert await asyncio.wait_for(pr.lost, 5) is None
        assert pr.data == b"last"
        assert pr.events == ["made", "data", "eof", "lost"]
    loop.run_until_complete(main())


def test_write_after_close_with_pending_data_is_sent(loop, tcp):
    """asyncio's close() with data still buffered keeps accepting writes
    until the buffer drains; they are flushed with the rest."""
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        payload = b"x" * BIG
        tr.write(payload)
        assert tr.get_write_buffer_size() > 0
        tr.close()
        tr.write(b"tail")
        got = await recv_all(loop, peer)
        assert len(got) == BIG + 4 and got.endswith(b"tail")
        assert await asyncio.wait_for(pr.lost, 5) is None
    loop.run_until_complete(main())


def test_write_after_close_with_empty_buffer_is_dropped(loop, tcp):
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        tr.close()
        tr.write(b"dropped")                 # no exception
        assert await asyncio.wait_for(pr.lost, 5) is None
        assert await recv_all(loop, peer) == b""
    loop.run_until_complete(main())


@pytest.mark.parametrize("which", ["pause_writing", "resume_writing"])
def test_flow_control_callback_raises(loop, tcp, which):
    contexts = handler_log(loop)

    class Bad(Recorder):
        pass

    def boom():
        raise ZeroDivisionError(which)
    setattr(Bad, which, lambda self: boom())

    async def main():
        tr, pr, peer = await tcp(lambda: Bad(loop))
        tr.write(b"x" * BIG)
        got = await recv_exactly(loop, peer, BIG)
        assert len(got) == BIG
        await until(lambda: tr.get_write_buffer_size() == 0)
        assert [c["message"] for c in contexts] == [f"protocol.{which}() failed"]
        ctx = contexts[0]
        assert isinstance(ctx["exception"], ZeroDivisionError)
        assert ctx["transport"] is tr and ctx["protocol"] is pr
        assert not tr.is_closing()          # the transport carries on
        tr.write(b"more")
        assert await recv_exactly(loop, peer, 4) == b"more"
        await close_and_wait(tr, pr)
    loop.run_until_complete(main())


def test_unix_accepted_transport_extra_info(loop, unix_path):
    """An accepted Unix connection's peername is what accept() returned: ''
    for an unbound client."""
    async def main():
        protos = []
        srv = await loop.create_unix_server(
            lambda: protos.append(Recorder(loop)) or protos[-1], unix_path)
        tr, pr = await loop.create_unix_connection(lambda: Recorder(loop), unix_path)
        await until(lambda: protos)
        await protos[0].made
        st = protos[0].transport
        assert st.get_extra_info("peername") == ""
        assert st.get_extra_info("sockname") == unix_path
        assert tr.get_extra_info("sockname") == ""
        await close_and_wait(tr, pr)
        await asyncio.wait_for(protos[0].lost, 5)
        srv.close()
        await srv.wait_closed()
    loop.run_until_complete(main())


@pytest.mark.libkqueue_differs("socket error")
def test_stream_drain_after_connection_lost(loop, tcp, peers):
    """StreamWriter.drain() on a lost connection raises ConnectionResetError."""
    async def main():
        with socket.create_server(("127.0.0.1", 0)) as listener:
            reader, writer = await asyncio.open_connection(*listener.getsockname())
            peer, _ = listener.accept()
        rst(peer)
        with pytest.raises(ConnectionResetError):
            await reader.read()
        writer.write(b"x")
        with pytest.raises(ConnectionResetError):
            await writer.drain()
        writer.close()
        with pytest.raises(ConnectionResetError):
            await writer.wait_closed()
    loop.run_until_complete(main())


def test_transport_collected_after_loop_close(loop, tcp):
    """A transport left open when its loop closes is not kept alive by the
    closed loop: dropping it warns (ResourceWarning) and closes its socket."""
    async def main():
        tr, pr, peer = await tcp(lambda: Recorder(loop))
        return tr.get_extra_info("socket").fileno()

    fd = loop.run_until_complete(main())
    loop.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    msgs = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert any("unclosed transport" in m for m in msgs), msgs
    with pytest.raises(OSError):
        os.fstat(fd)


@pytest.mark.parametrize("kind", ["read-only", "non-contiguous"])
def test_buffered_protocol_unwritable_buffer(loop, tcp, kind):
    """A buffer recv_into() cannot write to is a fatal read error: the
    TypeError socket.recv_into() raises (not an OSError, so the exception
    handler hears of it)."""
    contexts = handler_log(loop)

    class ReadOnly(BufRecorder):
        def get_buffer(self, sizehint):
            if kind == "read-only":
                return memoryview(b"read only buffer")
            return memoryview(bytearray(32))[::2]

    async def main():
        tr, pr, peer = await tcp(lambda: ReadOnly(loop))
        await loop.sock_sendall(peer, b"data")
        exc = await asyncio.wait_for(pr.lost, 5)
        assert [c["message"] for c in contexts] == ["Fatal read error on socket transport"]
        assert exc is contexts[0]["exception"]
        assert isinstance(exc, TypeError), repr(exc)
        assert "must be read-write bytes-like object" in str(exc)
    loop.run_until_complete(main())


@pytest.mark.parametrize("steps", range(6))
def test_create_connection_cancelled(loop, peers, steps):
    """Cancelling create_connection() at any point leaks nothing: either it
    raises CancelledError (the socket closed) or it completed."""
    async def main():
        with socket.create_server(("127.0.0.1", 0)) as listener:
            listener.setblocking(False)
            task = asyncio.ensure_future(loop.create_connection(
                lambda: Recorder(loop), *listener.getsockname()))
            for _ in range(steps):
                await asyncio.sleep(0)
            task.cancel()
            try:
                tr, pr = await task
            except asyncio.CancelledError:
                pass
            else:
                await close_and_wait(tr, pr)
            await asyncio.sleep(0.01)
            try:
                conn, _ = listener.accept()
                peers.append(conn)
            except BlockingIOError:
                pass
    loop.run_until_complete(main())
