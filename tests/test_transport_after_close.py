"""Every public transport method after close(), abort() and connection_lost().

The tables below say, for each transport and each of its public methods,
what a call does once the transport was closed (connection_lost() is
scheduled, not yet run), aborted, or once connection_lost() has run: it
returns a value, it is dropped and counted (asyncio warns once the count
reaches LOG_THRESHOLD_FOR_CONNLOST_WRITES), or it raises.  They are
asyncio's behaviour on the running Python, and every row is checked on
asyncio's loop and on minloop (the ``loop`` fixture): a row that fails on
asyncio is a wrong row.

Where asyncio fails by accident (a call on its cleared loop or socket),
the row is an ``Accident``: the running asyncio's outcome for asyncio's
loop, and the repaired outcome -- the one later asyncio versions have where
they repaired it -- for minloop (README, "Where minloop differs").
"""

import asyncio
import inspect
import logging
import os
import signal
import socket
import ssl
import sys
from asyncio import constants, selector_events
from dataclasses import dataclass

import pytest

CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tls_certs")
THRESHOLD = constants.LOG_THRESHOLD_FOR_CONNLOST_WRITES
PY = sys.version_info[:2]

# Until gh-136234 (3.14, backported to 3.13), asyncio 3.12+'s socket
# writelines() skipped write()'s check for a lost connection: after close()
# it calls the _write_ready that close() cleared, and after an abort() whose
# connection_lost() has run it calls the cleared loop.
WRITELINES_CHECKS_CONN_LOST = "_conn_lost" in inspect.getsource(
    selector_events._SelectorSocketTransport.writelines)
# asyncio 3.12+'s socket close() clears _write_ready, which writelines()
# calls: between close() and the end of the flush, writelines() fails.
CLOSE_CLEARS_WRITE_READY = "_write_ready = None" in inspect.getsource(
    selector_events._SelectorSocketTransport.close)


# --- outcomes ------------------------------------------------------------------

@dataclass(frozen=True)
class Returns:
    """Every call returns `value` (SAME: what it returned before the close)."""
    value: object


@dataclass(frozen=True)
class Raises:
    """Every call raises `type` with exactly `message`."""
    type: type
    message: str = ""


@dataclass(frozen=True)
class Counted:
    """Dropped: returns None; the `first`th call and each after it log
    `warning` (asyncio's count of writes after the connection was lost)."""
    warning: str
    first: int


@dataclass(frozen=True)
class Reported:
    """Returns None; running the loop on then sends `exc_type` to the
    exception handler (asyncio's accident: a second connection_lost())."""
    exc_type: type


@dataclass(frozen=True)
class Accident:
    """asyncio fails by accident where `happens`; minloop (and asyncio
    where it does not happen) does `repaired`."""
    asyncio: object
    repaired: object
    happens: bool = True


SAME = object()          # the value the method returned while open
PROTOCOL = object()      # the transport's protocol
NONE = Returns(None)
TRUE = Returns(True)
FALSE = Returns(False)
NOT_IMPLEMENTED = Raises(NotImplementedError)


def none_loop(attribute):
    return Raises(AttributeError, f"'NoneType' object has no attribute '{attribute}'")


def same3(outcome):
    return (outcome, outcome, outcome)


def no_abort(outcome):
    """For a transport without abort() (asyncio's read pipe and subprocess
    transports have none)."""
    return (outcome, None, outcome)


SEND_WARNING = "socket.send() raised exception."
PIPE_WARNING = "pipe closed by peer or os.write(pipe, data) raised exception."
SSL_WARNING = "SSL connection is closed"

# The calls, with their arguments.
CALLS = {
    "write": lambda t, p: t.write(b"x"),
    "writelines": lambda t, p: t.writelines([b"x", b"y"]),
    "write_eof": lambda t, p: t.write_eof(),
    "can_write_eof": lambda t, p: t.can_write_eof(),
    "sendto": lambda t, p: t.sendto(b"x", p.peer_address),
    "pause_reading": lambda t, p: t.pause_reading(),
    "resume_reading": lambda t, p: t.resume_reading(),
    "is_reading": lambda t, p: t.is_reading(),
    "set_write_buffer_limits": lambda t, p: t.set_write_buffer_limits(100, 10),
    "get_write_buffer_size": lambda t, p: t.get_write_buffer_size(),
    "get_write_buffer_limits": lambda t, p: t.get_write_buffer_limits(),
    "get_protocol": lambda t, p: t.get_protocol(),
    "set_protocol": lambda t, p: t.set_protocol(p),
    "get_extra_info": lambda t, p: t.get_extra_info("peername", "default"),
    "is_closing": lambda t, p: t.is_closing(),
    "close": lambda t, p: t.close(),
    "abort": lambda t, p: t.abort(),
    "get_pid": lambda t, p: t.get_pid(),
    "get_returncode": lambda t, p: t.get_returncode(),
    "get_pipe_transport": lambda t, p: t.get_pipe_transport(0) is p.stdin,
    "send_signal": lambda t, p: t.send_signal(signal.SIGTERM),
    "terminate": lambda t, p: t.terminate(),
    "kill": lambda t, p: t.kill(),
}

STATES = ("closed", "aborted", "lost")


# --- the tables: (after close(), after abort(), after connection_lost()) ------

STREAM = {
    "write":                   same3(Counted(SEND_WARNING, THRESHOLD)),
    "writelines": (
        Accident(Raises(TypeError, "'NoneType' object is not callable"),
                 Counted(SEND_WARNING, THRESHOLD),
                 happens=not WRITELINES_CHECKS_CONN_LOST and PY >= (3, 12)),
        # The data is queued for a connection that is gone (asyncio 3.12+).
        Accident(NONE, Counted(SEND_WARNING, THRESHOLD),
                 happens=not WRITELINES_CHECKS_CONN_LOST and PY >= (3, 12)),
        Accident(Raises(TypeError, "'NoneType' object is not callable"),
                 Counted(SEND_WARNING, THRESHOLD),
                 happens=not WRITELINES_CHECKS_CONN_LOST and PY >= (3, 12)),
    ),
    "write_eof":               same3(NONE),
    "can_write_eof":           same3(TRUE),
    "pause_reading":           same3(NONE),
    "resume_reading":          same3(NONE),
    "is_reading":              same3(FALSE),
    "set_write_buffer_limits": same3(NONE),
    "get_write_buffer_size":   same3(Returns(0)),
    "get_write_buffer_limits": same3(Returns(SAME)),
    "get_protocol":            (Returns(PROTOCOL), Returns(PROTOCOL), NONE),
    "set_protocol":            same3(NONE),
    "get_extra_info":          same3(Returns(SAME)),
    "is_closing":              same3(TRUE),
    "close":                   same3(NONE),
    "abort":                   same3(NONE),
}

# 3.11 gave selector transports pause_reading()/resume_reading()/is_reading();
# before, a datagram transport had ReadTransport's, which raise.
_DATAGRAM_READING = {
    "pause_reading":           same3(NONE if PY >= (3, 11) else NOT_IMPLEMENTED),
    "resume_reading":          same3(NONE if PY >= (3, 11) else NOT_IMPLEMENTED),
    "is_reading":              same3(FALSE if PY >= (3, 11) else NOT_IMPLEMENTED),
}

_DATAGRAM_COMMON = {
    # DatagramTransport has no stream methods: Transport's raise.
    **_DATAGRAM_READING,
    "set_write_buffer_limits": same3(NONE),
    "get_write_buffer_size":   same3(Returns(0)),
    "get_write_buffer_limits": same3(Returns(SAME)),
    "get_protocol":            (Returns(PROTOCOL), Returns(PROTOCOL), NONE),
    "set_protocol":            same3(NONE),
    "get_extra_info":          same3(Returns(SAME)),
    "is_closing":              same3(TRUE),
    "close":                   same3(NONE),
    "abort":                   same3(NONE),
}

CONNECTED_DATAGRAM = {
    "sendto":                  same3(Counted(SEND_WARNING, THRESHOLD)),
    **_DATAGRAM_COMMON,
}

UNCONNECTED_DATAGRAM = {
    # asyncio counts only on a connected socket: an unconnected one sends
    # while its socket is open, then fails on the None socket, and its
    # report of that on the None loop.  No asyncio version repairs this, so
    # minloop fails the same way.
    "sendto":                  (NONE, NONE, none_loop("call_exception_handler")),
    **_DATAGRAM_COMMON,
}

READ_PIPE = {
    "pause_reading":           no_abort(NONE),
    "resume_reading":          no_abort(NONE),
    "is_reading":              no_abort(FALSE if PY >= (3, 11) else NOT_IMPLEMENTED),
    "get_protocol":            (Returns(PROTOCOL), None, NONE),
    "set_protocol":            no_abort(NONE),
    "get_extra_info":          no_abort(Returns(SAME)),
    "is_closing":              no_abort(TRUE),
    "close":                   no_abort(NONE),
}

WRITE_PIPE = {
    "write":                   same3(Counted(PIPE_WARNING, THRESHOLD + 1)),
    "writelines":              same3(Counted(PIPE_WARNING, THRESHOLD + 1)),
    "write_eof":               same3(NONE),
    "can_write_eof":           same3(TRUE),
    # An asyncio.Transport whose read methods are ReadTransport's.
    "pause_reading":           same3(NOT_IMPLEMENTED),
    "resume_reading":          same3(NOT_IMPLEMENTED),
    "is_reading":              same3(NOT_IMPLEMENTED),
    "set_write_buffer_limits": same3(NONE),
    "get_write_buffer_size":   same3(Returns(0)),
    "get_write_buffer_limits": same3(Returns(SAME)),
    "get_protocol":            (Returns(PROTOCOL), Returns(PROTOCOL), NONE),
    "set_protocol":            same3(NONE),
    "get_extra_info":          same3(Returns(SAME)),
    "is_closing":              same3(TRUE),
    "close":                   same3(NONE),
    # asyncio schedules connection_lost() again (which fails), or calls its
    # cleared loop; minloop does nothing more.
    "abort": (
        Accident(Reported(AttributeError), NONE),
        Accident(Reported(AttributeError), NONE),
        Accident(none_loop("_remove_reader"), NONE),
    ),
}

# The SSL protocol counts from 0 (its connection_lost() adds one).
_SSL_COUNTED = (Counted(SSL_WARNING, THRESHOLD + 1),
                Counted(SSL_WARNING, THRESHOLD + 1),
                Counted(SSL_WARNING, THRESHOLD))

TLS = {
    "write":                   _SSL_COUNTED,
    "writelines":              _SSL_COUNTED,
    "write_eof":               same3(NOT_IMPLEMENTED),
    "can_write_eof":           same3(FALSE),
    "pause_reading":           same3(NONE),
    "resume_reading":          same3(NONE),
    "is_reading":              same3(TRUE),
    "set_write_buffer_limits": same3(NONE),
    "get_write_buffer_size":   same3(Returns(0)),
    "get_write_buffer_limits": same3(Returns(SAME)),
    "get_protocol":            (Returns(PROTOCOL), Returns(PROTOCOL), NONE),
    "set_protocol":            same3(NONE),
    # Once the socket transport is gone, extra info is the default.
    "get_extra_info":          (Returns(SAME), Returns(SAME), Returns("default")),
    "is_closing":              same3(TRUE),
    "close":                   same3(NONE),
    "abort":                   same3(NONE),
}

SUBPROCESS = {
    # close() kills the child; it is reaped by the time connection_lost() runs.
    "get_pid":                 no_abort(Returns(SAME)),
    "get_returncode":          (NONE, None, Returns(-signal.SIGKILL)),
    "get_pipe_transport":      no_abort(TRUE),
    "send_signal":             (NONE, None, Raises(ProcessLookupError)),
    "terminate":               (NONE, None, Raises(ProcessLookupError)),
    "kill":                    (NONE, None, Raises(ProcessLookupError)),
    "get_protocol":            (Returns(PROTOCOL), None, NONE),
    "set_protocol":            no_abort(NONE),
    "get_extra_info":          no_abort(Returns("default")),
    "is_closing":              no_abort(TRUE),
    "close":                   no_abort(NONE),
}

TABLES = {
    "tcp": STREAM,
    "unix": STREAM,
    "udp-connected": CONNECTED_DATAGRAM,
    "udp": UNCONNECTED_DATAGRAM,
    "read-pipe": READ_PIPE,
    "write-pipe": WRITE_PIPE,
    "tls": TLS,
    "subprocess": SUBPROCESS,
}


def _cases():
    return list(_each_case())


def _each_case():
    for kind, table in TABLES.items():
        for method, outcomes in table.items():
            for state, outcome in zip(STATES, outcomes):
                if outcome is not None:   # None: the transport has no abort()
                    yield pytest.param(kind, method, state, outcome,
                                       id=f"{kind}-{method}-{state}")


# --- the transports ------------------------------------------------------------

class Proto(asyncio.Protocol):
    def __init__(self, loop):
        self.lost = loop.create_future()
        self.lost_calls = 0
        self.peer_address = None
        self.stdin = None

    def connection_lost(self, exc):
        self.lost_calls += 1
        if not self.lost.done():
            self.lost.set_result(exc)

    def datagram_received(self, data, addr):
        pass

    def error_received(self, exc):
        pass


class SubprocessProto(asyncio.SubprocessProtocol, Proto):
    pass


async def open_transport(loop, kind, keep):
    """(transport, protocol) of `kind`, connected; what must stay open for
    it (the peer's end) is appended to `keep`."""
    proto = SubprocessProto(loop) if kind == "subprocess" else Proto(loop)
    if kind == "tcp":
        with socket.create_server(("127.0.0.1", 0)) as listener:
            client = socket.create_connection(listener.getsockname())
            keep.append(listener.accept()[0])
        transport, _ = await loop.create_connection(lambda: proto, sock=client)
    elif kind == "unix":
        a, b = socket.socketpair()
        keep.append(b)
        transport, _ = await loop.create_connection(lambda: proto, sock=a)
    elif kind in ("udp", "udp-connected"):
        peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        peer.bind(("127.0.0.1", 0))
        keep.append(peer)
        if kind == "udp":
            transport, _ = await loop.create_datagram_endpoint(
                lambda: proto, local_addr=("127.0.0.1", 0))
            proto.peer_address = peer.getsockname()
        else:
            transport, _ = await loop.create_datagram_endpoint(
                lambda: proto, remote_addr=peer.getsockname())
    elif kind == "read-pipe":
        r, w = os.pipe()
        keep.append(os.fdopen(w, "wb"))
        transport, _ = await loop.connect_read_pipe(lambda: proto, os.fdopen(r, "rb"))
    elif kind == "write-pipe":
        r, w = os.pipe()
        keep.append(os.fdopen(r, "rb"))
        transport, _ = await loop.connect_write_pipe(lambda: proto, os.fdopen(w, "wb"))
    elif kind == "tls":
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(os.path.join(CERTS, "server.pem"))
        client_ctx = ssl.create_default_context(cafile=os.path.join(CERTS, "ca.pem"))
        server = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0,
                                          ssl=server_ctx)
        keep.append(server)
        host, port = server.sockets[0].getsockname()[:2]
        transport, _ = await loop.create_connection(
            lambda: proto, host, port, ssl=client_ctx, server_hostname="localhost")
    elif kind == "subprocess":
        transport, _ = await loop.subprocess_exec(
            lambda: proto, sys.executable, "-c", "import sys; sys.stdin.read()",
            stdin=-1, stdout=-1, stderr=None)
        proto.stdin = transport.get_pipe_transport(0)
    else:  # pragma: no cover - a table bug
        raise AssertionError(kind)
    await asyncio.sleep(0)
    return transport, proto


class Caught(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def call(transport, proto, method):
    """('returned', value) or ('raised', exception) of one call."""
    try:
        return "returned", CALLS[method](transport, proto)
    except Exception as exc:
        return "raised", exc


def check(outcome, results, warnings, reported, before, proto):
    """Assert that `results` (one per call) and what was logged and
    reported show `outcome`."""
    if isinstance(outcome, Returns):
        expected = outcome.value
        if expected is SAME:
            expected = before
        elif expected is PROTOCOL:
            expected = proto
        assert results == [("returned", expected)] * len(results)
        assert warnings == [] and reported == []
    elif isinstance(outcome, Raises):
        for kind, exc in results:
            assert kind == "raised", exc
            assert type(exc) is outcome.type
            if outcome.message:
                assert str(exc) == outcome.message
        assert warnings == [] and reported == []
    elif isinstance(outcome, Counted):
        assert results == [("returned", None)] * len(results)
        # The first `first - 1` calls are silent, each later one warns.
        assert warnings == [outcome.warning] * (len(results) - outcome.first + 1)
        assert reported == []
    elif isinstance(outcome, Reported):
        assert results == [("returned", None)] * len(results)
        assert reported and all(r is outcome.exc_type for r in reported)
    else:  # pragma: no cover - a table bug
        raise AssertionError(outcome)


@pytest.mark.parametrize("kind, method, state, outcome", _cases())
def test_method_after_close(loop, loop_kind, kind, method, state, outcome):
    if isinstance(outcome, Accident):
        outcome = (outcome.asyncio if loop_kind == "asyncio" and outcome.happens
                   else outcome.repaired)
    if kind == "tls" and loop_kind == "asyncio" and PY < (3, 11):
        pytest.skip("3.10's asyncio has the older TLS layer; minloop runs "
                    "3.11's there (README)")
    reported = []
    loop.set_exception_handler(
        lambda lp, context: reported.append(type(context.get("exception"))))
    caught = Caught()
    logger = logging.getLogger("asyncio")
    keep = []

    async def main():
        transport, proto = await open_transport(loop, kind, keep)
        before = (CALLS[method](transport, proto)
                  if outcome == Returns(SAME) else None)
        if state == "aborted":
            transport.abort()
        else:
            transport.close()
        if state == "lost":
            await asyncio.wait_for(proto.lost, 5)
        logger.addHandler(caught)
        try:
            results = [call(transport, proto, method)
                       for _ in range(THRESHOLD + 2)]
        finally:
            logger.removeHandler(caught)
        # connection_lost() comes once, whatever the calls did.
        await asyncio.wait_for(asyncio.shield(proto.lost), 5)
        for _ in range(3):
            await asyncio.sleep(0)
        assert proto.lost_calls == 1
        messages = caught.messages
        if kind == "subprocess" and loop_kind == "asyncio":
            # asyncio's child watcher races Popen.send_signal()'s own poll():
            # when poll() reaps the exited child first, the watcher logs this
            # (seen on 3.10's ThreadedChildWatcher in CI).  Not about the
            # transport after close; minloop reaps the child itself.
            messages = [m for m in messages
                        if not m.startswith("Unknown child process pid")]
        check(outcome, results, messages, reported, before, proto)
        if kind == "subprocess":
            await transport._wait()

    try:
        loop.run_until_complete(asyncio.wait_for(main(), 10))
    finally:
        loop.run_until_complete(close_all(keep))


async def close_all(keep):
    for obj in keep:
        obj.close()
        if isinstance(obj, asyncio.AbstractServer):
            await asyncio.wait_for(obj.wait_closed(), 5)


# --- the shape: asyncio's classes and methods -----------------------------------

TRANSPORT_CLASSES = ("BaseTransport", "ReadTransport", "WriteTransport",
                     "Transport", "DatagramTransport", "SubprocessTransport")

# A transport of each kind, and its asyncio counterpart's public methods.
SHAPES = ("tcp", "udp", "read-pipe", "write-pipe", "tls", "subprocess")


def public_methods(cls):
    return {name for name in dir(cls)
            if not name.startswith("_") and callable(getattr(cls, name))}


@pytest.mark.parametrize("kind", SHAPES)
def test_transport_classes_and_methods_are_asyncios(loop, loop_kind, kind):
    """isinstance() against every class of asyncio.transports answers as for
    asyncio's transport of the same kind, and the public methods are the same."""
    keep = []

    async def main():
        transport, proto = await open_transport(loop, kind, keep)
        try:
            return ({name: isinstance(transport, getattr(asyncio, name))
                     for name in TRANSPORT_CLASSES},
                    public_methods(type(transport)))
        finally:
            transport.close()
            await asyncio.wait_for(proto.lost, 5)
            if kind == "subprocess":
                await transport._wait()

    try:
        classes, methods = loop.run_until_complete(main())
    finally:
        loop.run_until_complete(close_all(keep))

    from asyncio import base_subprocess, sslproto, unix_events
    counterpart = {
        "tcp": selector_events._SelectorSocketTransport,
        "udp": selector_events._SelectorDatagramTransport,
        "read-pipe": unix_events._UnixReadPipeTransport,
        "write-pipe": unix_events._UnixWritePipeTransport,
        "tls": sslproto._SSLProtocolTransport,
        "subprocess": base_subprocess.BaseSubprocessTransport,
    }[kind]
    assert classes == {name: issubclass(counterpart, getattr(asyncio, name))
                       for name in TRANSPORT_CLASSES}
    if not (kind == "tls" and PY < (3, 11)):   # 3.10: another TLS layer
        assert methods == public_methods(counterpart)


def test_write_pipe_read_methods_raise_not_implemented(loop):
    """The write pipe transport is an asyncio.Transport: its read methods are
    ReadTransport's, which raise NotImplementedError (not AttributeError)."""
    r, w = os.pipe()

    async def main():
        transport, proto = await loop.connect_write_pipe(
            lambda: Proto(loop), os.fdopen(w, "wb"))
        try:
            assert isinstance(transport, asyncio.Transport)
            for name in ("pause_reading", "resume_reading", "is_reading"):
                with pytest.raises(NotImplementedError):
                    getattr(transport, name)()
        finally:
            transport.close()
            await proto.lost

    try:
        loop.run_until_complete(main())
    finally:
        os.close(r)


# --- close() while data is queued ------------------------------------------------

# kind -> method -> what a write does between close() and the end of the
# flush: "queued" (sent after what was queued before), or Counted (dropped).
CLOSING_WITH_DATA_QUEUED = {
    "unix": {
        "write": "queued",
        # asyncio 3.12+ queues the data, then calls the _write_ready that
        # close() cleared.
        "writelines": Accident(Raises(TypeError, "'NoneType' object is not callable"),
                               "queued", happens=CLOSE_CLEARS_WRITE_READY),
    },
    "write-pipe": {
        "write": Counted(PIPE_WARNING, THRESHOLD + 1),
        "writelines": Counted(PIPE_WARNING, THRESHOLD + 1),
    },
}


@pytest.mark.parametrize("kind, method", [
    (kind, method) for kind, methods in CLOSING_WITH_DATA_QUEUED.items()
    for method in methods])
def test_write_after_close_with_data_queued(loop, loop_kind, kind, method):
    outcome = CLOSING_WITH_DATA_QUEUED[kind][method]
    if isinstance(outcome, Accident):
        outcome = (outcome.asyncio if loop_kind == "asyncio" and outcome.happens
                   else outcome.repaired)
    big = bytes(range(256)) * 16384          # 4 MiB: more than the peer holds
    keep = []
    caught = Caught()
    logger = logging.getLogger("asyncio")

    async def read_all(peer):
        out = bytearray()
        if isinstance(peer, socket.socket):
            peer.setblocking(False)
            while data := await loop.sock_recv(peer, 1 << 20):
                out += data
        else:
            fd = peer.fileno()
            os.set_blocking(fd, False)
            while True:
                try:
                    data = os.read(fd, 1 << 20)
                except BlockingIOError:
                    await asyncio.sleep(0.005)
                    continue
                if not data:
                    break
                out += data
        return bytes(out)

    async def main():
        transport, proto = await open_transport(loop, kind, keep)
        transport.write(big)
        queued = transport.get_write_buffer_size()
        assert queued > 0
        transport.close()
        logger.addHandler(caught)
        try:
            results = [call(transport, proto, method) for _ in range(THRESHOLD + 2)]
        finally:
            logger.removeHandler(caught)
        one = b"x" if method == "write" else b"xy"
        if outcome == "queued":
            assert results == [("returned", None)] * len(results)
            assert caught.messages == []
            assert transport.get_write_buffer_size() == queued + len(one) * len(results)
            expected = big + one * len(results)
        elif isinstance(outcome, Raises):
            for kind_, exc in results:
                assert kind_ == "raised" and type(exc) is outcome.type
                assert str(exc) == outcome.message
            expected = big + one * len(results)   # queued all the same
        else:
            check(outcome, results, caught.messages, [], None, proto)
            assert transport.get_write_buffer_size() == queued
            expected = big
        got = await read_all(keep[0])
        await asyncio.wait_for(proto.lost, 5)
        assert got == expected

    try:
        loop.run_until_complete(asyncio.wait_for(main(), 10))
    finally:
        loop.run_until_complete(close_all(keep))
