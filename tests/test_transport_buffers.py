"""Every kind of buffer through write(), writelines() and sendto(), on both loops.

asyncio's write() and sendto() take bytes, bytearray and memoryview (of any
format and shape, as long as it is contiguous); writelines() takes any
object with the buffer protocol (array.array, mmap, ctypes arrays ...):
before 3.12 it is WriteTransport's write(b''.join(list_of_data)), from 3.12
the socket transport queues memoryview(data) of each item.  The table says
what each transport does with each kind of buffer, and the bytes that
arrive at the other end are compared byte for byte.
"""

import array
import asyncio
import ctypes
import mmap
import os
import pickle
import socket
import ssl
import sys
from dataclasses import dataclass

import pytest
from asyncio import selector_events

CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tls_certs")
PY = sys.version_info[:2]


def _mmap():
    m = mmap.mmap(-1, 5)
    m.write(b"mmap!")
    return m


# name -> a fresh buffer of that kind
BUFFERS = {
    "bytes": lambda: b"abc",
    "bytearray": lambda: bytearray(b"abc"),
    "memoryview(bytes)": lambda: memoryview(b"abc"),
    "memoryview(bytearray)": lambda: memoryview(bytearray(b"abc")),
    "non-contiguous": lambda: memoryview(b"abcdef")[::2],
    "format i": lambda: memoryview(array.array("i", [1, 2])),
    "2-d": lambda: memoryview(bytearray(b"abcdef")).cast("B", (2, 3)),
    "array": lambda: array.array("i", [1, 2]),
    "mmap": _mmap,
    "PickleBuffer": lambda: pickle.PickleBuffer(b"pickle"),
    "ctypes array": lambda: (ctypes.c_char * 3)(*b"xyz"),
    "ctypes int (0-d)": lambda: ctypes.c_int(0x41424344),
    "empty bytes": lambda: b"",
    "empty bytearray": lambda: bytearray(),
    "empty memoryview": lambda: memoryview(b""),
    "empty array": lambda: array.array("i"),
    "str": lambda: "abc",
    "int": lambda: 5,
}


# --- outcomes ------------------------------------------------------------------

@dataclass(frozen=True)
class Sent:
    """No error; the buffer's bytes arrive."""


@dataclass(frozen=True)
class Raises:
    """The call raises `type` with `message` ({type} and {repr} filled in);
    nothing of the call arrives."""
    type: type
    message: str


@dataclass(frozen=True)
class Fatal:
    """The call returns; the exception handler gets `message` with an
    exception of `type`, and the transport closes.  `sent`: the bytes
    arrive all the same."""
    type: type
    message: str
    sent: bool = False


@dataclass(frozen=True)
class Accident:
    """asyncio (where `happens`) does `asyncio` (None: a state no outcome
    here describes, not run); minloop does `repaired`."""
    asyncio: object
    repaired: object
    happens: bool = True


SENT = Sent()
NOT_BYTES_LIKE = Raises(TypeError, "data argument must be a bytes-like object, not {type!r}")


def _stream_refusal():
    # The socket transport's message, asked of the running asyncio (3.14
    # reworded it); its write() checks the type first.
    with pytest.raises(TypeError) as info:
        asyncio.selector_events._SelectorSocketTransport.write(None, None)
    return Raises(TypeError, str(info.value).replace("'NoneType'", "{type!r}"))


STREAM_NOT_BYTES_LIKE = _stream_refusal()
TLS_NOT_BYTES_LIKE = Raises(TypeError, "data: expecting a bytes-like instance, got {type}")
PIPE_ASSERT = Raises(AssertionError, "{repr}")
NOT_CONTIGUOUS = "memoryview: underlying buffer is not C-contiguous"
STREAM_FATAL = Fatal(BufferError, "Fatal write error on socket transport")
PIPE_FATAL = Fatal(BufferError, "Fatal write error on pipe transport")
TLS_FATAL = Fatal(BufferError, "Fatal error on SSL protocol")
UDP_FATAL = Fatal(BufferError, "Fatal write error on datagram transport")
# b''.join()'s refusal (writelines() before 3.12, and the pipe's always).
JOIN_REFUSES = Raises(TypeError, "sequence item 1: expected a bytes-like object, {type} found")
# memoryview()'s refusal (the socket's writelines() from 3.12).
VIEW_REFUSES = Raises(TypeError, "memoryview: a bytes-like object is required, not '{type}'")

WRITELINES_JOINS = PY < (3, 12)
# The socket's writelines() for what join() refuses: TypeError before 3.12;
# from 3.12 a non-contiguous buffer is queued and its send fails.
WL_STREAM_NOT_CONTIGUOUS = JOIN_REFUSES if WRITELINES_JOINS else STREAM_FATAL
WL_STREAM_NOT_BUFFER = JOIN_REFUSES if WRITELINES_JOINS else VIEW_REFUSES


def wl_stream_formatted(error):
    """asyncio 3.12+'s socket writelines() counts a buffer of another
    format or shape in items, not bytes (len(memoryview)): its bookkeeping
    fails after the bytes went out."""
    return Accident(Fatal(error, "Fatal write error on socket transport", sent=True),
                    SENT, happens=not WRITELINES_JOINS)


# asyncio 3.15's socket writelines() queues item by item, adding len() of
# each to a running count: an item memoryview() refuses, or one without
# len(), raises with the items before it queued and no writer armed.  They
# are never sent, and close() never ends (it waits for them).  Not run on
# asyncio there; minloop raises as before, or sends, with nothing left
# behind.
_writelines = vars(selector_events._SelectorSocketTransport).get('writelines')
WRITELINES_WEDGES = (_writelines is not None
                     and '_buffer_size' in _writelines.__code__.co_names)


def wl_stream_wedged(repaired):
    return Accident(None, repaired, happens=WRITELINES_WEDGES)


# asyncio's write pipe compares os.write()'s byte count with len(data), an
# item count for these: it then writes from an empty buffer and fails.
PIPE_FORMATTED = Accident(Fatal(AssertionError, "Exception in callback "
                                "_UnixWritePipeTransport._write_ready()", sent=True),
                          SENT)
# The TLS layer sums len() of what it queues: objects without len() fail
# after being queued.
TLS_NO_LEN = Raises(TypeError, "object of type '{tp_name}' has no len()")

# 3.13 sends empty datagrams (gh-113812).
EMPTY_DATAGRAM = SENT

COLUMNS = ("stream.write", "stream.writelines", "pipe.write", "pipe.writelines",
           "tls.write", "tls.writelines", "udp.sendto")

TABLE = {
    #                        stream.write    stream.writelines        pipe.write      pipe.writelines  tls.write           tls.writelines  udp.sendto
    "bytes":                 (SENT,          SENT,                    SENT,           SENT,            SENT,               SENT,           SENT),
    "bytearray":             (SENT,          SENT,                    SENT,           SENT,            SENT,               SENT,           SENT),
    "memoryview(bytes)":     (SENT,          SENT,                    SENT,           SENT,            SENT,               SENT,           SENT),
    "memoryview(bytearray)": (SENT,          SENT,                    SENT,           SENT,            SENT,               SENT,           SENT),
    "non-contiguous":        (STREAM_FATAL,  WL_STREAM_NOT_CONTIGUOUS, PIPE_FATAL,    JOIN_REFUSES,    TLS_FATAL,          TLS_FATAL,      UDP_FATAL),
    "format i":              (SENT,          wl_stream_formatted(IndexError), PIPE_FORMATTED, SENT,    SENT,               SENT,           SENT),
    "2-d":                   (SENT,          wl_stream_formatted(IndexError), PIPE_FORMATTED, SENT,    SENT,               SENT,           SENT),
    "array":                 (STREAM_NOT_BYTES_LIKE, wl_stream_formatted(IndexError), PIPE_ASSERT,   SENT,    TLS_NOT_BYTES_LIKE, SENT,           NOT_BYTES_LIKE),
    "mmap":                  (STREAM_NOT_BYTES_LIKE, SENT,                   PIPE_ASSERT,    SENT,            TLS_NOT_BYTES_LIKE, SENT,           NOT_BYTES_LIKE),
    "PickleBuffer":          (STREAM_NOT_BYTES_LIKE, wl_stream_wedged(SENT), PIPE_ASSERT,    SENT,            TLS_NOT_BYTES_LIKE, TLS_NO_LEN,     NOT_BYTES_LIKE),
    "ctypes array":          (STREAM_NOT_BYTES_LIKE, SENT,                   PIPE_ASSERT,    SENT,            TLS_NOT_BYTES_LIKE, SENT,           NOT_BYTES_LIKE),
    "ctypes int (0-d)":      (STREAM_NOT_BYTES_LIKE, wl_stream_wedged(wl_stream_formatted(TypeError)), PIPE_ASSERT, SENT,       TLS_NOT_BYTES_LIKE, TLS_NO_LEN,     NOT_BYTES_LIKE),
    "empty bytes":           (SENT,          SENT,                    SENT,           SENT,            SENT,               SENT,           EMPTY_DATAGRAM),
    "empty bytearray":       (SENT,          SENT,                    SENT,           SENT,            SENT,               SENT,           EMPTY_DATAGRAM),
    "empty memoryview":      (SENT,          SENT,                    SENT,           SENT,            SENT,               SENT,           EMPTY_DATAGRAM),
    "empty array":           (STREAM_NOT_BYTES_LIKE, SENT,                   PIPE_ASSERT,    SENT,            TLS_NOT_BYTES_LIKE, SENT,           NOT_BYTES_LIKE),
    "str":                   (STREAM_NOT_BYTES_LIKE, wl_stream_wedged(WL_STREAM_NOT_BUFFER), PIPE_ASSERT,    JOIN_REFUSES,    TLS_NOT_BYTES_LIKE, None,           NOT_BYTES_LIKE),
    "int":                   (STREAM_NOT_BYTES_LIKE, wl_stream_wedged(WL_STREAM_NOT_BUFFER), PIPE_ASSERT,    JOIN_REFUSES,    TLS_NOT_BYTES_LIKE, None,           NOT_BYTES_LIKE),
}
# (None: asyncio's TLS layer queues a str or an int and fails later, in
# ways that depend on the handshake's timing; not compared.)


def _cases():
    cases = []
    for name, row in TABLE.items():
        for column, outcome in zip(COLUMNS, row):
            if outcome is not None:
                cases.append(pytest.param(column, name, outcome, id=f"{column}-{name}"))
    return cases


# --- running one case ------------------------------------------------------------

class Proto(asyncio.Protocol):
    def __init__(self, loop):
        self.lost = loop.create_future()
        self.data = bytearray()

    def data_received(self, data):
        self.data += data

    def connection_lost(self, exc):
        if not self.lost.done():
            self.lost.set_result(exc)

    def datagram_received(self, data, addr):
        pass

    def error_received(self, exc):
        pass


def payload(buf):
    """The bytes a buffer holds, in order."""
    if isinstance(buf, (str, int)):
        return None
    return memoryview(buf).tobytes()


def tp_name(obj):
    """The type's name as CPython's C code prints it (tp_name)."""
    cls = type(obj)
    if cls.__flags__ & (1 << 9) or cls.__module__ == "builtins":   # a heap type
        return cls.__name__
    return f"{cls.__module__}.{cls.__qualname__}"


async def read_stream(loop, sock):
    sock.setblocking(False)
    out = bytearray()
    while True:
        try:
            data = await loop.sock_recv(sock, 65536)
        except ConnectionResetError:
            break
        if not data:
            return bytes(out)
        out += data
    return bytes(out)


async def read_pipe(fd):
    os.set_blocking(fd, False)
    out = bytearray()
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            await asyncio.sleep(0.005)
            continue
        if not data:
            return bytes(out)
        out += data


async def exchange(loop, transport_kind, method, buf):
    """Call transport.<method> with buf (wrapped in b'<', b'>' for
    writelines()); (what the call raised or None, what arrived)."""
    proto = Proto(loop)
    args = [b"<", buf, b">"] if method == "writelines" else buf
    raised = None
    if transport_kind == "stream":
        a, b = socket.socketpair()
        with b:
            transport, _ = await loop.create_connection(lambda: proto, sock=a)
            try:
                getattr(transport, method)(args)
            except Exception as exc:
                raised = exc
            transport.close()
            got = await read_stream(loop, b)
    elif transport_kind == "pipe":
        r, w = os.pipe()
        try:
            transport, _ = await loop.connect_write_pipe(lambda: proto, os.fdopen(w, "wb"))
            try:
                getattr(transport, method)(args)
            except Exception as exc:
                raised = exc
            transport.close()
            got = await read_pipe(r)
        finally:
            os.close(r)
    elif transport_kind == "tls":
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(os.path.join(CERTS, "server.pem"))
        client_ctx = ssl.create_default_context(cafile=os.path.join(CERTS, "ca.pem"))
        server_proto = Proto(loop)
        server = await loop.create_server(lambda: server_proto, "127.0.0.1", 0,
                                          ssl=server_ctx)
        try:
            host, port = server.sockets[0].getsockname()[:2]
            transport, _ = await loop.create_connection(
                lambda: proto, host, port, ssl=client_ctx, server_hostname="localhost")
            try:
                getattr(transport, method)(args)
            except Exception as exc:
                raised = exc
            transport.close()
            await asyncio.wait_for(server_proto.lost, 5)
            got = bytes(server_proto.data)
        finally:
            server.close()
            await asyncio.wait_for(server.wait_closed(), 5)
    elif transport_kind == "udp":
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
            peer.bind(("127.0.0.1", 0))
            peer.setblocking(False)
            transport, _ = await loop.create_datagram_endpoint(
                lambda: proto, remote_addr=peer.getsockname())
            try:
                transport.sendto(buf)
            except Exception as exc:
                raised = exc
            await asyncio.sleep(0.01)
            got = []
            while True:
                try:
                    got.append(peer.recv(65536))
                except BlockingIOError:
                    break
            transport.close()
    await asyncio.wait_for(proto.lost, 5)
    return raised, got


@pytest.mark.parametrize("column, name, outcome", _cases())
def test_buffer_kinds(loop, loop_kind, column, name, outcome):
    transport_kind, method = column.split(".")
    while isinstance(outcome, Accident):
        outcome = (outcome.asyncio if loop_kind == "asyncio" and outcome.happens
                   else outcome.repaired)
    if outcome is None:
        pytest.skip("asyncio's socket transport is left wedged (WRITELINES_WEDGES)")
    if transport_kind == "tls" and loop_kind == "asyncio" and PY < (3, 11):
        pytest.skip("3.10's asyncio has the older TLS layer; minloop runs "
                    "3.11's there (README)")
    reported = []
    loop.set_exception_handler(lambda lp, context: reported.append(context))
    buf = BUFFERS[name]()
    data = payload(buf)
    raised, got = loop.run_until_complete(
        asyncio.wait_for(exchange(loop, transport_kind, method, buf), 10))

    def framed(data):
        if transport_kind == "udp":
            # 3.13 sends empty datagrams, earlier versions drop them.
            return [data] if data or PY >= (3, 13) else []
        return b"<" + data + b">" if method == "writelines" else data

    if isinstance(outcome, Sent):
        assert raised is None
        assert reported == []
        assert got == framed(data)
    elif isinstance(outcome, Raises):
        assert type(raised) is outcome.type
        assert str(raised) == outcome.message.format(
            type=type(buf).__name__, tp_name=tp_name(buf), repr=repr(buf))
        assert not got
    elif isinstance(outcome, Fatal):
        assert raised is None
        # (The TLS layer reports it twice: on the write, and on the flush
        # of the shutdown.)
        assert reported
        assert all(type(c.get("exception")) is outcome.type for c in reported)
        assert reported[0]["message"].startswith(outcome.message)
        if outcome.type is BufferError:
            assert str(reported[0]["exception"]) == NOT_CONTIGUOUS
        assert got == (framed(data) if outcome.sent else (b"" if transport_kind != "udp" else []))
    else:  # pragma: no cover - a table bug
        raise AssertionError(outcome)


# --- a buffer changed after write() returns ---------------------------------------

@pytest.mark.parametrize("method", ["write", "writelines"])
def test_stream_buffer_changed_after_write(loop, loop_kind, method):
    """What write() could not send at once is sent as it was when write()
    returned.  (asyncio 3.12+ queues the caller's object itself, so a later
    change is sent: README, "Where minloop differs".)"""
    size = 4 * 1024 * 1024   # more than the socket pair holds
    original = bytes(range(256)) * (size // 256)
    buf = bytearray(original)
    a, b = socket.socketpair()

    async def main():
        proto = Proto(loop)
        transport, _ = await loop.create_connection(lambda: proto, sock=a)
        getattr(transport, method)(buf if method == "write" else [buf])
        assert transport.get_write_buffer_size() > 0
        buf[:] = b"\xff" * size          # same size: allowed while viewed
        transport.close()
        got = await read_stream(loop, b)
        await proto.lost
        return got

    with b:
        got = loop.run_until_complete(main())
    queues_callers_object = loop_kind == "asyncio" and PY >= (3, 12)
    if queues_callers_object:
        assert got != original and got[-1:] == b"\xff"
    else:
        assert got == original


def test_pipe_buffer_changed_after_write(loop):
    """The write pipe queues a copy on every version (asyncio appends to a
    bytearray)."""
    size = 1024 * 1024   # more than a pipe holds
    original = bytes(range(256)) * (size // 256)
    buf = bytearray(original)
    r, w = os.pipe()

    async def main():
        proto = Proto(loop)
        transport, _ = await loop.connect_write_pipe(lambda: proto, os.fdopen(w, "wb"))
        transport.write(buf)
        assert transport.get_write_buffer_size() > 0
        buf[:] = b"\xff" * size
        transport.close()
        got = await read_pipe(r)
        await proto.lost
        return got

    try:
        assert loop.run_until_complete(main()) == original
    finally:
        os.close(r)


def test_writelines_of_mixed_buffers(loop, loop_kind):
    """The issue's example: bytes, an array and an mmap in one writelines()."""
    m = _mmap()
    a, b = socket.socketpair()
    reported = []
    loop.set_exception_handler(lambda lp, context: reported.append(context))

    async def main():
        proto = Proto(loop)
        transport, _ = await loop.create_connection(lambda: proto, sock=a)
        transport.writelines([b"a", array.array("i", [1, 2]), m])
        transport.close()
        got = await read_stream(loop, b)
        await proto.lost
        return got

    with b:
        got = loop.run_until_complete(main())
    assert got == b"a" + array.array("i", [1, 2]).tobytes() + b"mmap!"
    if loop_kind == "asyncio" and not WRITELINES_JOINS:
        # 3.12+ counts the array in items: its bookkeeping fails after the
        # send (and keeps a view of the mmap, which cannot be closed then).
        assert [type(c["exception"]) for c in reported] == [IndexError]
    else:
        assert reported == []
        m.close()
