"""Pipe transports (connect_read_pipe, connect_write_pipe), on both loops.

asyncio's _UnixReadPipeTransport and _UnixWritePipeTransport
(Lib/asyncio/unix_events.py) are the specification: the fd kinds accepted,
the callbacks and their order, the exceptions reaching connection_lost(),
what goes to the exception handler, flow control.  Each test drives a pipe,
a FIFO, a pty or a socket from the other end with plain os calls or a second
transport of the same loop.
"""

import asyncio
import fcntl
import gc
import logging
import os
import socket
import stat
import struct
import sys
import termios
import threading
import time
import warnings

import pytest

BIG = 4 * 1024 * 1024   # far more than a pipe holds (64 KiB on Linux)


# --- helpers ---------------------------------------------------------------

class Reader(asyncio.Protocol):
    """Records a read pipe transport's callbacks, in order."""

    def __init__(self, loop):
        self.transport = None
        self.events = []
        self.data = bytearray()
        self.lost = loop.create_future()

    def connection_made(self, transport):
        self.transport = transport
        self.events.append("made")

    def data_received(self, data):
        assert type(data) is bytes
        self.events.append("data")
        self.data += data

    def eof_received(self):
        self.events.append("eof")

    def connection_lost(self, exc):
        self.events.append("lost")
        self.lost.set_result(exc)


class Writer(asyncio.BaseProtocol):
    """Records a write pipe transport's callbacks, in order."""

    def __init__(self, loop):
        self.transport = None
        self.events = []
        self.sizes_at_resume = []
        self.lost = loop.create_future()

    def connection_made(self, transport):
        self.transport = transport
        self.events.append("made")

    def pause_writing(self):
        self.events.append("pause")

    def resume_writing(self):
        self.events.append("resume")
        self.sizes_at_resume.append(self.transport.get_write_buffer_size())

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


async def iterations(n=5):
    for _ in range(n):
        await asyncio.sleep(0)


def read_available(fd):
    """Everything readable from a non-blocking fd now."""
    data = bytearray()
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return bytes(data)
        if not chunk:
            return bytes(data)
        data += chunk


@pytest.fixture
def pipe_files():
    """An os.pipe() as unbuffered file objects (read, write), closed afterwards."""
    r, w = os.pipe()
    rf, wf = open(r, "rb", 0), open(w, "wb", 0)
    yield rf, wf
    rf.close()
    wf.close()


@pytest.fixture
def handler_calls(loop):
    """The contexts the loop's exception handler receives."""
    calls = []
    loop.set_exception_handler(lambda lp, context: calls.append(context))
    return calls


# --- the read side -----------------------------------------------------------

def test_read_pipe_data_then_eof(loop, pipe_files):
    rf, wf = pipe_files

    async def main():
        transport, proto = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        assert isinstance(transport, asyncio.ReadTransport)
        assert proto.events == ["made"]
        assert transport.get_extra_info("pipe") is rf
        assert transport.get_extra_info("nothing", 7) == 7
        assert transport.get_protocol() is proto
        assert not transport.is_closing()
        assert not os.get_blocking(rf.fileno())
        wf.write(b"abc")
        await until(lambda: len(proto.data) == 3)
        wf.write(b"defg")
        await until(lambda: len(proto.data) == 7)
        wf.close()
        assert await proto.lost is None
        return transport, proto

    transport, proto = loop.run_until_complete(main())
    assert bytes(proto.data) == b"abcdefg"
    assert proto.events[0] == "made" and proto.events[-2:] == ["eof", "lost"]
    assert set(proto.events[1:-2]) == {"data"}
    # The transport closes itself on EOF, and the pipe with it.
    assert transport.is_closing()
    assert rf.closed
    assert transport.get_protocol() is None


def test_read_pipe_waiter_after_connection_made(loop, pipe_files):
    """connect_read_pipe() returns only once connection_made() has run, and
    connection_made() runs before any data_received()."""
    rf, wf = pipe_files
    wf.write(b"early")

    async def main():
        transport, proto = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        assert proto.events[0] == "made"
        await until(lambda: proto.data == b"early")
        transport.close()
        assert await proto.lost is None
        # close(): no eof_received.
        assert proto.events == ["made", "data", "lost"]

    loop.run_until_complete(main())


def test_read_pipe_close_twice_and_after_eof(loop, pipe_files):
    rf, wf = pipe_files

    async def main():
        transport, proto = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        transport.close()
        transport.close()
        assert transport.is_closing()
        await proto.lost
        transport.close()
        transport.pause_reading()
        transport.resume_reading()
        assert proto.events == ["made", "lost"]

    loop.run_until_complete(main())


def test_read_pipe_pause_resume(loop, pipe_files):
    rf, wf = pipe_files

    async def main():
        transport, proto = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        if sys.version_info >= (3, 11):
            assert transport.is_reading()
        transport.pause_reading()
        transport.pause_reading()   # no-op
        if sys.version_info >= (3, 11):
            assert not transport.is_reading()
        wf.write(b"held")
        await iterations(10)
        assert proto.data == b""
        transport.resume_reading()
        transport.resume_reading()   # no-op
        if sys.version_info >= (3, 11):
            assert transport.is_reading()
        await until(lambda: proto.data == b"held")
        transport.close()
        await proto.lost

    loop.run_until_complete(main())


def test_read_pipe_paused_before_connection_made(loop, loop_kind, pipe_files):
    """pause_reading() before reading starts holds (asyncio since 3.11)."""
    if loop_kind == "asyncio" and sys.version_info < (3, 11):
        pytest.skip("3.10's asyncio starts reading even if paused")
    rf, wf = pipe_files
    wf.write(b"x")

    async def main():
        proto = Reader(loop)
        waiter = loop.create_future()
        transport = loop._make_read_pipe_transport(rf, proto, waiter)
        transport.pause_reading()
        await waiter
        await iterations(10)
        assert proto.data == b""
        transport.resume_reading()
        await until(lambda: proto.data == b"x")
        transport.close()
        await proto.lost

    loop.run_until_complete(main())


def test_read_pipe_is_reading_on_310(loop):
    """3.10's read pipe transport has no is_reading() (ReadTransport's raises)."""
    if sys.version_info >= (3, 11):
        pytest.skip("is_reading() exists since 3.11")
    r, w = os.pipe()
    rf = open(r, "rb", 0)

    async def main():
        transport, proto = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        with pytest.raises(NotImplementedError):
            transport.is_reading()
        transport.close()
        await proto.lost

    try:
        loop.run_until_complete(main())
    finally:
        os.close(w)


def test_read_pipe_set_protocol(loop, pipe_files):
    rf, wf = pipe_files

    async def main():
        transport, first = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        second = Reader(loop)
        transport.set_protocol(second)
        assert transport.get_protocol() is second
        wf.write(b"to the second")
        wf.close()
        await second.lost
        assert second.data == b"to the second"
        assert first.events == ["made"]
        assert second.events[-2:] == ["eof", "lost"]

    loop.run_until_complete(main())


def test_read_pipe_data_received_error_goes_to_handler(loop, pipe_files, handler_calls):
    """What data_received() raises reaches the exception handler; the
    transport stays open and keeps reading (asyncio does not catch it)."""
    rf, wf = pipe_files

    class Failing(Reader):
        def data_received(self, data):
            super().data_received(data)
            if len(self.data) == 1:
                raise ZeroDivisionError("boom")

    async def main():
        transport, proto = await loop.connect_read_pipe(lambda: Failing(loop), rf)
        wf.write(b"1")
        await until(lambda: handler_calls)
        assert isinstance(handler_calls[0]["exception"], ZeroDivisionError)
        assert not transport.is_closing()
        wf.write(b"2")
        await until(lambda: proto.data == b"12")
        transport.close()
        await proto.lost

    loop.run_until_complete(main())


@pytest.mark.libkqueue_differs("socket error")
def test_read_error_is_fatal_and_reported(loop, handler_calls):
    """A read error other than EIO: 'Fatal read error on pipe transport' to
    the handler, then connection_lost(exc).  (A TCP reset: sockets are
    accepted as pipes.)"""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()

    async def main():
        transport, proto = await loop.connect_read_pipe(lambda: Reader(loop), client)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        server.close()
        exc = await proto.lost
        assert isinstance(exc, ConnectionResetError)
        assert proto.events == ["made", "lost"]
        assert len(handler_calls) == 1
        context = handler_calls[0]
        assert context["message"] == "Fatal read error on pipe transport"
        assert context["exception"] is exc
        assert context["transport"] is transport
        assert context["protocol"] is proto
        assert client.fileno() == -1   # closed by the transport

    loop.run_until_complete(main())


def test_large_reads_then_small_ones_arrive_whole(loop, pipe_files):
    """Reads of more than 16 KiB, then small ones, then EOF: every byte in
    order.  (minloop reads into a new bytes object while reads are large,
    into its shared buffer while they are small: both ways and the switch
    between them are crossed here.)"""
    rf, wf = pipe_files
    large = bytes(range(256)) * 4096 + b"!"      # 1 MiB and a byte
    small = [b"small %d;" % i for i in range(5)]

    def unread():
        return struct.unpack("i", fcntl.ioctl(rf.fileno(), termios.FIONREAD, b"\0" * 4))[0]

    def write_all():
        wf.write(large)   # blocking: the loop reads as it goes
        for piece in small:
            # Into an empty pipe: each small piece is a read of its own.
            while unread():
                time.sleep(0.001)
            wf.write(piece)
        wf.close()

    async def main():
        transport, proto = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        writer = threading.Thread(target=write_all)
        writer.start()
        assert await proto.lost is None
        writer.join()
        return proto

    proto = loop.run_until_complete(main())
    assert bytes(proto.data) == large + b"".join(small)
    assert proto.events[-2:] == ["eof", "lost"]


@pytest.mark.libkqueue_differs("socket error")
def test_read_error_after_large_reads_is_reported(loop, handler_calls):
    """A reset after reads of more than 16 KiB (minloop's no-copy reads)
    reaches connection_lost() and the handler as ConnectionResetError."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    sent = bytes(range(251)) * 500   # 125,500 bytes: each read of it > 16 KiB

    async def main():
        transport, proto = await loop.connect_read_pipe(lambda: Reader(loop), client)
        server.sendall(sent)
        await until(lambda: len(proto.data) == len(sent))
        server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        server.close()
        exc = await proto.lost
        assert isinstance(exc, ConnectionResetError)
        assert bytes(proto.data) == sent
        assert [c["message"] for c in handler_calls] == ["Fatal read error on pipe transport"]
        assert handler_calls[0]["exception"] is exc

    loop.run_until_complete(main())


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs os.openpty()")
def test_read_pty_master_eio_after_slave_closes(loop, handler_calls):
    """A pty master reads EIO once the slave is closed: connection_lost(EIO),
    no eof_received(), nothing for the exception handler (asyncio's rule)."""
    master, slave = os.openpty()
    mf = open(master, "rb", 0)

    async def main():
        transport, proto = await loop.connect_read_pipe(lambda: Reader(loop), mf)
        os.write(slave, b"hello")
        await until(lambda: proto.data == b"hello")
        os.close(slave)
        exc = await proto.lost
        assert isinstance(exc, OSError) and exc.errno == 5   # EIO
        assert proto.events == ["made", "data", "lost"]
        assert handler_calls == []
        assert mf.closed

    loop.run_until_complete(main())


def test_fifo_both_ways(loop, tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    # O_NONBLOCK: opening a FIFO's read end would block until a writer comes.
    rfd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    wfd = os.open(path, os.O_WRONLY)
    rf, wf = open(rfd, "rb", 0), open(wfd, "wb", 0)
    assert stat.S_ISFIFO(os.fstat(rfd).st_mode)

    async def main():
        rt, reader = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        wt, writer = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        payload = os.urandom(300_000)
        wt.write(payload)
        wt.close()
        assert await writer.lost is None
        assert await reader.lost is None
        assert bytes(reader.data) == payload
        assert reader.events[-2:] == ["eof", "lost"]

    loop.run_until_complete(main())
    assert rf.closed and wf.closed


# --- the write side ----------------------------------------------------------

def test_write_pipe_writes_at_once(loop, pipe_files):
    rf, wf = pipe_files
    os.set_blocking(rf.fileno(), False)

    async def main():
        transport, proto = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        assert isinstance(transport, asyncio.WriteTransport)
        assert transport.get_extra_info("pipe") is wf
        assert transport.can_write_eof()
        assert not os.get_blocking(wf.fileno())
        transport.write(b"bytes ")
        # A small write goes out in write() itself.
        assert transport.get_write_buffer_size() == 0
        assert read_available(rf.fileno()) == b"bytes "
        buf = bytearray(b"bytearray ")
        transport.write(buf)
        buf[:] = b"changed!!!"
        transport.write(memoryview(b"memoryview"))
        transport.write(b"")
        transport.writelines([b"line1 ", bytearray(b"line2")])
        assert read_available(rf.fileno()) == b"bytearray memoryviewline1 line2"
        transport.close()
        assert transport.is_closing()
        assert await proto.lost is None
        assert proto.events == ["made", "lost"]
        assert wf.closed

    loop.run_until_complete(main())


def test_write_rejects_non_bytes(loop, pipe_files):
    """asyncio's check is an assert: AssertionError with repr(data)."""
    if not __debug__:
        pytest.skip("asyncio's check is an assert")
    rf, wf = pipe_files

    async def main():
        transport, proto = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        with pytest.raises(AssertionError, match="'text'"):
            transport.write("text")
        with pytest.raises(AssertionError):
            transport.write(42)
        transport.close()
        await proto.lost

    loop.run_until_complete(main())


def test_large_write_flow_control(loop, pipe_files):
    """A write larger than the pipe is queued; pause_writing() past the high
    mark; resume_writing() once all of it is written (asyncio resumes a pipe
    only on an empty buffer); the reader gets every byte, in order."""
    rf, wf = pipe_files
    payload = os.urandom(BIG)

    async def main():
        rt, reader = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        wt, writer = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        assert wt.get_write_buffer_limits() == (16 * 1024, 64 * 1024)
        wt.write(payload)
        assert 0 < wt.get_write_buffer_size() < len(payload)
        assert writer.events == ["made", "pause"]
        assert wt.get_write_buffer_size() > 0
        await until(lambda: "resume" in writer.events)
        assert writer.sizes_at_resume == [0]
        wt.write(b"tail")
        wt.close()
        await writer.lost
        await reader.lost
        assert bytes(reader.data) == payload + b"tail"
        assert writer.events == ["made", "pause", "resume", "lost"]

    loop.run_until_complete(main())


def test_many_small_writes_queue_in_order(loop, pipe_files):
    """Thousands of queued writes (more than one writev takes) arrive in order."""
    rf, wf = pipe_files
    chunks = [os.urandom(1 + i % 700) for i in range(5000)]

    async def main():
        rt, reader = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        wt, writer = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        wt.set_write_buffer_limits(high=1 << 30)
        for i, chunk in enumerate(chunks):
            wt.write(chunk if i % 3 else bytearray(chunk))
        assert wt.get_write_buffer_size() > 0
        wt.close()
        await reader.lost
        assert bytes(reader.data) == b"".join(chunks)

    loop.run_until_complete(main())


def test_write_buffer_limits(loop, pipe_files):
    rf, wf = pipe_files

    async def main():
        transport, proto = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        transport.set_write_buffer_limits(high=100)
        assert transport.get_write_buffer_limits() == (25, 100)
        transport.set_write_buffer_limits(low=40)
        assert transport.get_write_buffer_limits() == (40, 160)
        transport.set_write_buffer_limits()
        assert transport.get_write_buffer_limits() == (16 * 1024, 64 * 1024)
        with pytest.raises(ValueError, match=r"high \(1\) must be >= low \(2\) must be >= 0"):
            transport.set_write_buffer_limits(high=1, low=2)
        # Fill the pipe, then lower the high mark below what is queued.
        transport.set_write_buffer_limits(high=1 << 30)
        transport.write(b"x" * (1 << 20))
        assert proto.events == ["made"]
        transport.set_write_buffer_limits(high=10)
        assert proto.events == ["made", "pause"]
        transport.abort()
        await proto.lost

    loop.run_until_complete(main())


def test_write_eof_flushes_then_connection_lost(loop, pipe_files):
    rf, wf = pipe_files
    payload = os.urandom(BIG // 4)

    async def main():
        rt, reader = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        wt, writer = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        wt.write(payload)
        wt.write_eof()
        assert wt.is_closing()
        wt.write_eof()   # no-op
        wt.write(b"dropped")   # after write_eof: counted, not written
        assert await writer.lost is None
        assert await reader.lost is None
        assert bytes(reader.data) == payload
        assert reader.events[-2:] == ["eof", "lost"]

    loop.run_until_complete(main())


def test_abort_drops_the_buffer(loop, pipe_files):
    rf, wf = pipe_files

    async def main():
        rt, reader = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        wt, writer = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        wt.write(b"x" * BIG)
        assert wt.get_write_buffer_size() > 0
        wt.abort()
        assert wt.get_write_buffer_size() == 0
        assert wt.is_closing()
        assert await writer.lost is None
        assert await reader.lost is None
        assert len(reader.data) < BIG

    loop.run_until_complete(main())


def test_reader_closed_with_empty_buffer(loop, pipe_files):
    """The read end closing is seen without a write (the write end polls in
    error): connection_lost(None) when nothing was queued."""
    rf, wf = pipe_files

    async def main():
        transport, proto = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        transport.write(b"some")
        rf.close()
        assert await proto.lost is None
        assert transport.is_closing()
        assert wf.closed

    loop.run_until_complete(main())


def test_reader_closed_with_data_queued(loop, pipe_files, handler_calls):
    """... and connection_lost(BrokenPipeError()) with data still queued."""
    rf, wf = pipe_files

    async def main():
        transport, proto = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        transport.write(b"x" * BIG)
        assert transport.get_write_buffer_size() > 0
        rf.close()
        exc = await proto.lost
        assert isinstance(exc, BrokenPipeError)
        assert transport.get_write_buffer_size() == 0
        assert handler_calls == []   # OSErrors are not reported

    loop.run_until_complete(main())


def test_write_to_closed_reader_is_epipe(loop, pipe_files, handler_calls, caplog):
    """A write that meets EPIPE before the loop noticed: connection_lost()
    with it; later writes are dropped and, past a threshold, logged."""
    rf, wf = pipe_files

    async def main():
        transport, proto = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        rf.close()
        transport.write(b"data")
        assert transport.is_closing()
        exc = await proto.lost
        assert isinstance(exc, BrokenPipeError)
        assert handler_calls == []
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            for _ in range(asyncio.constants.LOG_THRESHOLD_FOR_CONNLOST_WRITES + 1):
                transport.write(b"more")
        assert ("pipe closed by peer or os.write(pipe, data) raised exception."
                in caplog.messages)

    loop.run_until_complete(main())


def test_write_after_close_is_dropped(loop, pipe_files, caplog):
    rf, wf = pipe_files
    os.set_blocking(rf.fileno(), False)

    async def main():
        transport, proto = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        transport.close()
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            for _ in range(asyncio.constants.LOG_THRESHOLD_FOR_CONNLOST_WRITES):
                transport.write(b"late")
            assert caplog.messages == []
            transport.write(b"late")
            assert caplog.messages == [
                "pipe closed by peer or os.write(pipe, data) raised exception."]
        await proto.lost
        assert read_available(rf.fileno()) == b""

    loop.run_until_complete(main())


def test_socket_as_write_pipe(loop):
    """A socket's peer closing ends the transport (the reader trick)."""
    a, b = socket.socketpair()

    async def main():
        transport, proto = await loop.connect_write_pipe(lambda: Writer(loop), a)
        transport.write(b"hi")
        b.setblocking(False)
        assert await loop.sock_recv(b, 10) == b"hi"
        b.close()
        assert await proto.lost is None
        assert a.fileno() == -1

    loop.run_until_complete(main())


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs os.openpty()")
def test_write_pty_slave(loop):
    """A pty slave is a character device: no peer watching, writes go out."""
    master, slave = os.openpty()
    import tty
    tty.setraw(slave)
    sf = open(slave, "wb", 0)
    os.set_blocking(master, False)

    async def main():
        transport, proto = await loop.connect_write_pipe(lambda: Writer(loop), sf)
        transport.write(b"to the master")
        data = bytearray()
        await until(lambda: data.extend(read_available(master)) or data == b"to the master")
        transport.close()
        assert await proto.lost is None
        assert sf.closed

    try:
        loop.run_until_complete(main())
    finally:
        os.close(master)


def test_write_pipe_set_protocol(loop, pipe_files):
    rf, wf = pipe_files

    async def main():
        transport, first = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        second = Writer(loop)
        transport.set_protocol(second)
        assert transport.get_protocol() is second
        transport.close()
        await second.lost
        assert first.events == ["made"]
        assert second.events == ["lost"]

    loop.run_until_complete(main())


def test_pause_writing_error_goes_to_handler(loop, pipe_files, handler_calls):
    rf, wf = pipe_files

    class Failing(Writer):
        def pause_writing(self):
            raise ZeroDivisionError

    async def main():
        transport, proto = await loop.connect_write_pipe(lambda: Failing(loop), wf)
        transport.write(b"x" * BIG)
        assert handler_calls[0]["message"] == "protocol.pause_writing() failed"
        assert isinstance(handler_calls[0]["exception"], ZeroDivisionError)
        assert handler_calls[0]["transport"] is transport
        transport.abort()
        await proto.lost

    loop.run_until_complete(main())


# --- what both sides share ---------------------------------------------------

@pytest.mark.parametrize("side", ["read", "write"])
def test_regular_file_is_refused(loop, side, tmp_path):
    path = tmp_path / "file"
    path.write_bytes(b"content")
    message = ("Pipe transport is for pipes/sockets only." if side == "read"
               else "Pipe transport is only for pipes, sockets and character devices")
    proto = Reader(loop) if side == "read" else Writer(loop)
    connect = loop.connect_read_pipe if side == "read" else loop.connect_write_pipe
    with open(path, "rb" if side == "read" else "ab", 0) as f:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(ValueError) as info:
                loop.run_until_complete(connect(lambda: proto, f))
            gc.collect()   # the half-made transport must not warn
        assert str(info.value) == message
        assert not f.closed
        assert os.get_blocking(f.fileno())   # untouched
    assert proto.events == []


@pytest.mark.parametrize("side", ["read", "write"])
def test_closed_file_is_refused(loop, side, pipe_files):
    rf, wf = pipe_files
    f = rf if side == "read" else wf
    f.close()
    connect = loop.connect_read_pipe if side == "read" else loop.connect_write_pipe
    with pytest.raises(ValueError, match="closed file"):
        loop.run_until_complete(connect(lambda: Reader(loop), f))


@pytest.mark.parametrize("side", ["read", "write"])
# asyncio's half-made transport fails in its __del__ (its repr needs fields
# the failed __init__ never set).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_closed_loop(loop, side, pipe_files):
    rf, wf = pipe_files
    loop.close()
    connect = loop.connect_read_pipe if side == "read" else loop.connect_write_pipe
    coro = connect(lambda: Reader(loop), rf if side == "read" else wf)
    with warnings.catch_warnings():
        # asyncio's half-made transport warns from __del__.
        warnings.simplefilter("ignore", ResourceWarning)
        with pytest.raises(RuntimeError, match="Event loop is closed"):
            coro.send(None)
        gc.collect()


@pytest.mark.parametrize("side", ["read", "write"])
def test_unclosed_transport_warns(loop, side, pipe_files):
    rf, wf = pipe_files

    class Forgetful(asyncio.Protocol):
        pass   # keeps no reference to its transport

    connect = loop.connect_read_pipe if side == "read" else loop.connect_write_pipe
    f = rf if side == "read" else wf
    transport, _ = loop.run_until_complete(connect(Forgetful, f))
    loop.close()
    assert "open" in repr(transport)
    with pytest.warns(ResourceWarning, match="unclosed transport"):
        del transport
        gc.collect()
    assert f.closed


def test_repr(loop, pipe_files):
    rf, wf = pipe_files

    async def main():
        rt, reader = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        wt, writer = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        rfd, wfd = rf.fileno(), wf.fileno()
        name_r, name_w = type(rt).__name__, type(wt).__name__
        assert repr(rt) == f"<{name_r} fd={rfd} polling>"
        assert repr(wt) == f"<{name_w} fd={wfd} idle bufsize=0>"
        rt.pause_reading()
        assert repr(rt) == f"<{name_r} fd={rfd} idle>"
        wt.set_write_buffer_limits(high=1 << 30)
        wt.write(b"x" * BIG)
        size = wt.get_write_buffer_size()
        assert repr(wt) == f"<{name_w} fd={wfd} polling bufsize={size}>"
        wt.abort()
        assert repr(wt) == f"<{name_w} closing fd={wfd} idle bufsize=0>"
        rt.close()
        assert repr(rt) == f"<{name_r} closing fd={rfd} idle>"
        await reader.lost
        await writer.lost
        assert repr(rt) == f"<{name_r} closed fd={rfd} closed>"
        assert repr(wt) == f"<{name_w} closed fd={wfd} closed>"

    loop.run_until_complete(main())


def test_fd_reuse_after_connection_lost(loop):
    """A new pipe on the numbers of a closed transport's pipe works: the
    closed transport left nothing behind in the loop."""

    async def one_round():
        r, w = os.pipe()
        rf, wf = open(r, "rb", 0), open(w, "wb", 0)
        rt, reader = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        wt, writer = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        wt.write(b"round")
        wt.close()
        await reader.lost
        await writer.lost
        assert reader.data == b"round"
        return r, w

    async def main():
        first = await one_round()
        second = await one_round()
        assert first == second   # the same fd numbers came back

    loop.run_until_complete(main())


def test_debug_mode_logs(loop, pipe_files, caplog):
    rf, wf = pipe_files
    loop.set_debug(True)

    async def main():
        with caplog.at_level(logging.DEBUG, logger="asyncio"):
            rt, reader = await loop.connect_read_pipe(lambda: Reader(loop), rf)
            rt.pause_reading()
            rt.resume_reading()
            wf.close()
            await reader.lost
        text = "\n".join(caplog.messages)
        assert "Read pipe" in text and "connected" in text
        assert "pauses reading" in text and "resumes reading" in text
        assert "was closed by peer" in text

    loop.run_until_complete(main())


# --- minloop's promises beyond asyncio ----------------------------------------

def test_abort_after_close_is_harmless(loop, pipe_files, handler_calls, minloop_only):
    """asyncio schedules connection_lost() a second time, which fails; minloop
    does nothing."""
    rf, wf = pipe_files

    async def main():
        transport, proto = await loop.connect_write_pipe(lambda: Writer(loop), wf)
        transport.close()
        transport.abort()
        transport.abort()
        await proto.lost
        transport.abort()
        await iterations()
        assert proto.events == ["made", "lost"]
        assert handler_calls == []

    loop.run_until_complete(main())


def test_closed_loop_leaves_the_pipe_alone(loop, pipe_files, minloop_only):
    """On a closed loop, the pipe is neither made non-blocking nor closed
    (asyncio's half-made transport closes it, with a ResourceWarning)."""
    rf, wf = pipe_files
    loop.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for factory in (loop._make_read_pipe_transport, loop._make_write_pipe_transport):
            with pytest.raises(RuntimeError, match="Event loop is closed"):
                factory(rf, Reader(loop))
        gc.collect()
    assert not rf.closed and os.get_blocking(rf.fileno())


def test_close_from_resume_writing_flushes(loop, pipe_files, minloop_only):
    """resume_writing() that writes more and then closes: all of it reaches
    the reader (asyncio closes the pipe with that last write queued)."""
    rf, wf = pipe_files
    payload = os.urandom(BIG)

    class Closer(Writer):
        def resume_writing(self):
            super().resume_writing()
            self.transport.write(payload)
            self.transport.close()

    async def main():
        rt, reader = await loop.connect_read_pipe(lambda: Reader(loop), rf)
        wt, writer = await loop.connect_write_pipe(lambda: Closer(loop), wf)
        wt.write(payload)
        assert writer.events == ["made", "pause"]
        assert await writer.lost is None
        await reader.lost
        assert len(reader.data) == 2 * BIG
        assert bytes(reader.data) == payload * 2

    loop.run_until_complete(main())


def test_transport_cannot_exist_without_a_loop(minloop_module):
    """An instance made without __init__ still has its loop (no crash)."""
    from minloop import pipes
    loop = minloop_module.new_event_loop()
    try:
        for cls in (pipes.ReadPipeTransport, pipes.WritePipeTransport):
            with pytest.raises(TypeError):
                cls.__new__(cls)
            with pytest.raises(TypeError):
                cls.__new__(cls, object())
            transport = cls.__new__(cls, loop)
            assert "closed" in repr(transport)
            for name in ("pause_reading", "resume_reading", "close", "abort",
                         "write_eof", "get_write_buffer_size"):
                method = getattr(transport, name, None)
                if method is not None:
                    try:
                        method()
                    except (ValueError, AssertionError, NotImplementedError):
                        # NotImplementedError: the write pipe's read methods
                        # are asyncio.ReadTransport's.
                        pass
    finally:
        loop.close()


def test_write_on_closed_loop(loop, pipe_files):
    """A write that cannot go out at once needs the loop: on a closed one it
    raises, and nothing stays queued."""
    rf, wf = pipe_files
    transport, proto = loop.run_until_complete(
        loop.connect_write_pipe(lambda: Writer(loop), wf))
    loop.close()
    transport.write(b"fits")   # written at once: the loop is not needed
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        transport.write(b"x" * BIG)
    assert transport.get_write_buffer_size() == 0
    assert proto.events == ["made"]
    transport._pipe = None   # as CPython's test_unclosed_pipe_transport does
    wf.close()
