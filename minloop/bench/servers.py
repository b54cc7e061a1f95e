"""The servers the network benchmarks measure, one kind per process, on any loop.

    python -m minloop.bench.servers --loop NAME --kind KIND [--port P] [--path PATH]
                                    [--cpu N] [--count]

Used by ``python -m minloop bench`` (against the Python load generator in
client.py) and by benchmarks/net_compare.py (against its C one).

KIND is one of:
  protocol  asyncio.Protocol: data_received -> transport.write
  buffered  asyncio.BufferedProtocol: get_buffer/buffer_updated -> write
  streams   asyncio.start_server: reader.read -> writer.write + drain
  sock      loop.sock_accept, then a task per connection: sock_recv -> sock_sendall
  unix      asyncio.Protocol echo over a Unix socket (create_unix_server)
  udp       create_datagram_endpoint: datagram_received -> sendto
  http      HTTP/1.1 keep-alive "Hello, World!" server on httptools
  protocol-msg  asyncio.Protocol answering each whole --size message with its
                own write (a request/response server under pipelined requests)
  streams-msg   start_server: readexactly(--size) -> write + drain per message

--cpu N pins the process to CPU N (where the OS allows it).  The soft limit
on open files is raised to the hard one, for the rows with 10,000 connections.
--count makes the protocol server count its open connections, and answer
each line "gc" on stdin (once stdin is no longer just watched for EOF) with
{"conns": open connections, "rss": resident bytes} after a full collection:
the idle-connection memory rows.

Talking to the driver (c_echo_server.c does the same):
  * once listening, one JSON line on stdout: {"ready": true, "host", "port"
    (or "path"), "pid"};
  * if the loop cannot do KIND (NotImplementedError, a missing method, ...),
    instead {"unsupported": "<Type>: <message>"} and exit status 3;
  * serve until stdin reaches EOF or SIGTERM arrives, then one JSON line:
    {"cpu": {"user", "system"}, "errors": [...]}, where errors are what the
    loop's exception handler saw (a correct run has none).

The servers are as plain as their kind allows: what is timed is the loop's
path from the socket to the callback and back, not the server's own work.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import signal
import socket
import sys
import threading

from . import loops
from .client import HTTP_RESPONSE  # what the load generator expects

HOST = "127.0.0.1"
BACKLOG = 4096  # the rows with thousands of connections connect them back to back
READ_SIZE = 256 * 1024  # as large as the biggest message, as asyncio's own read size

HTTP_BAD_REQUEST = (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                    b"Connection: close\r\n\r\n")

# The loop method each kind stands on, for reports.
CALLS = {"protocol": "loop.create_server", "buffered": "loop.create_server",
         "streams": "asyncio.start_server", "sock": "loop.sock_accept",
         "unix": "loop.create_unix_server", "udp": "loop.create_datagram_endpoint",
         "http": "loop.create_server", "protocol-msg": "loop.create_server",
         "streams-msg": "asyncio.start_server"}
KINDS = tuple(CALLS)


# ---------------------------------------------------------------------------
# Protocols
# ---------------------------------------------------------------------------


class EchoProtocol(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.transport.write(data)


class CountingEchoProtocol(EchoProtocol):
    """EchoProtocol that keeps the number of its open connections."""

    open = 0

    def connection_made(self, transport):
        self.transport = transport
        CountingEchoProtocol.open += 1

    def connection_lost(self, exc):
        CountingEchoProtocol.open -= 1


def resident_bytes() -> int | None:
    """This process's resident set (VmRSS of /proc/self/status), or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def raise_nofile_limit() -> tuple[int, int]:
    """Raise the soft limit on open files to the hard one; return both after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)


class EchoBufferedProtocol(asyncio.BufferedProtocol):
    """As uvloop's own echo benchmark does it: one buffer per connection, and
    a copy of the filled part handed to write() -- the transport may keep
    what it cannot send at once, and the buffer is refilled by the next read."""

    def connection_made(self, transport):
        self.transport = transport
        self.buffer = bytearray(READ_SIZE)
        self.view = memoryview(self.buffer)

    def get_buffer(self, sizehint):
        return self.view

    def buffer_updated(self, nbytes):
        self.transport.write(self.buffer[:nbytes])


class MessageEchoProtocol(asyncio.Protocol):
    """Answers each whole message of `size` bytes with a write of its own, as
    a request/response server does: with requests pipelined, the server pays
    a write per message where the client pays one send per batch."""

    def __init__(self, size):
        self.size = size
        self.pending = b""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        if self.pending:
            data = self.pending + data
        size = self.size
        end = len(data) - len(data) % size
        write = self.transport.write
        for i in range(0, end, size):
            write(data[i:i + size])
        self.pending = data[end:]


class EchoDatagramProtocol(asyncio.DatagramProtocol):
    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        self.transport.sendto(data, addr)


class HttpProtocol(asyncio.Protocol):
    """A keep-alive HTTP/1.1 server that answers every request alike."""

    def __init__(self):
        import httptools

        self._errors = (httptools.HttpParserError, httptools.HttpParserUpgrade)
        self.parser = httptools.HttpRequestParser(self)
        self.url = None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        try:
            self.parser.feed_data(data)
        except self._errors:
            self.transport.write(HTTP_BAD_REQUEST)
            self.transport.close()

    # httptools callbacks
    def on_url(self, url):
        self.url = url

    def on_message_complete(self):
        self.transport.write(HTTP_RESPONSE)
        if not self.parser.should_keep_alive():
            self.transport.close()


# ---------------------------------------------------------------------------
# Servers: each returns the address to announce
# ---------------------------------------------------------------------------


async def _streams_handler(reader, writer):
    try:
        while True:
            data = await reader.read(READ_SIZE)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def _streams_messages_handler(reader, writer, size):
    try:
        while True:
            data = await reader.readexactly(size)
            writer.write(data)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _sock_serve(loop, conn):
    try:
        while True:
            data = await loop.sock_recv(conn, READ_SIZE)
            if not data:
                break
            await loop.sock_sendall(conn, data)
    except ConnectionError:
        pass
    finally:
        conn.close()


async def _sock_accept_forever(loop, listener, tasks):
    while True:
        conn, _ = await loop.sock_accept(listener)
        conn.setblocking(False)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        task = loop.create_task(_sock_serve(loop, conn))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


def _tcp_address(server) -> dict:
    host, port = server.sockets[0].getsockname()[:2]
    return {"host": host, "port": port}


async def start(kind: str, port: int, path: str | None, keep: list,
                size: int = 1024, count: bool = False) -> dict:
    """Start a KIND server; keep what must stay alive in keep."""
    loop = asyncio.get_running_loop()
    if count and kind != "protocol":
        raise SystemExit("--count is for --kind protocol")
    if count:
        server = await loop.create_server(CountingEchoProtocol, HOST, port, backlog=BACKLOG)
        keep.append(server)
        return _tcp_address(server)
    if kind == "protocol-msg":
        server = await loop.create_server(lambda: MessageEchoProtocol(size), HOST, port,
                                          backlog=BACKLOG)
        keep.append(server)
        return _tcp_address(server)
    if kind == "streams-msg":
        async def handler(reader, writer):
            await _streams_messages_handler(reader, writer, size)

        server = await asyncio.start_server(handler, HOST, port, backlog=BACKLOG,
                                            limit=READ_SIZE)
        keep.append(server)
        return _tcp_address(server)
    if kind == "http":
        import httptools  # noqa: F401  (missing: this server is n/a, not a failure)
    if kind in ("protocol", "buffered", "http"):
        factory = {"protocol": EchoProtocol, "buffered": EchoBufferedProtocol,
                   "http": HttpProtocol}[kind]
        server = await loop.create_server(factory, HOST, port, backlog=BACKLOG)
        keep.append(server)
        return _tcp_address(server)
    if kind == "streams":
        server = await asyncio.start_server(_streams_handler, HOST, port, backlog=BACKLOG,
                                            limit=READ_SIZE)
        keep.append(server)
        return _tcp_address(server)
    if kind == "sock":
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, port))
        listener.listen(1024)
        listener.setblocking(False)
        tasks: set = set()
        keep += [listener, tasks, loop.create_task(_sock_accept_forever(loop, listener, tasks))]
        # A loop without sock_accept fails in the task, after "ready": ask
        # now, so that it is reported as unsupported instead.
        if not hasattr(loop, "sock_accept"):
            raise NotImplementedError("loop has no sock_accept")
        await asyncio.sleep(0)
        if keep[-1].done():
            keep[-1].result()  # raises what the accept loop raised
        host, port = listener.getsockname()[:2]
        return {"host": host, "port": port}
    if kind == "unix":
        if path is None:
            raise SystemExit("--path is required for --kind unix")
        server = await loop.create_unix_server(EchoProtocol, path, backlog=BACKLOG)
        keep.append(server)
        return {"path": path}
    if kind == "udp":
        transport, _ = await loop.create_datagram_endpoint(
            EchoDatagramProtocol, local_addr=(HOST, port))
        keep.append(transport)
        host, port = transport.get_extra_info("sockname")[:2]
        return {"host": host, "port": port}
    raise SystemExit(f"unknown kind {kind!r}")


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def _say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _cpu() -> dict:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"user": usage.ru_utime, "system": usage.ru_stime}


def collect_errors(loop) -> list[str]:
    """The list the loop's exception handler now appends to: the first few
    reports (a broken server repeats itself), each as one line."""
    errors: list[str] = []

    def on_error(loop, context):
        if len(errors) < 5:
            exc = context.get("exception")
            errors.append(context.get("message", "") + (f": {exc!r}" if exc else ""))

    loop.set_exception_handler(on_error)
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loop", required=True)
    parser.add_argument("--kind", required=True, choices=KINDS)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--path")
    parser.add_argument("--size", type=int, default=1024,
                        help="message size of the *-msg kinds (default: %(default)s)")
    parser.add_argument("--cpu", type=int, help="pin this process to CPU N")
    parser.add_argument("--count", action="store_true",
                        help="count connections, answer 'gc' lines on stdin (protocol only)")
    args = parser.parse_args(argv)
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    raise_nofile_limit()

    try:
        factory = loops.factory(args.loop)
    except loops.Unavailable as exc:
        _say({"unsupported": f"loop unavailable: {exc}"})
        return 3
    loop = factory()
    asyncio.set_event_loop(loop)
    errors = collect_errors(loop)
    keep: list = []
    try:
        address = loop.run_until_complete(start(args.kind, args.port, args.path, keep, args.size,
                                                args.count))
    except Exception as exc:  # any failure to start is "this loop cannot"
        # Some loops raise a bare NotImplementedError(): say which call it was.
        detail = str(exc) or f"from {CALLS[args.kind]}"
        _say({"unsupported": f"{type(exc).__name__}: {detail}"[:300]})
        return 3

    def finish(*_):
        _say({"cpu": _cpu(), "errors": errors})
        if args.path and args.kind == "unix":
            try:
                os.unlink(args.path)
            except OSError:
                pass
        # No orderly teardown: closing every transport is not what is being
        # measured, and a loop that hangs there must not hang the driver.
        os._exit(0)

    # SIGTERM: the Python-level handler runs between bytecodes whatever the
    # loop is doing.  Stdin EOF: a thread blocked in read() (holding no GIL)
    # stops the loop the ordinary way.
    signal.signal(signal.SIGTERM, finish)

    def collect_and_report():
        gc.collect()
        _say({"conns": CountingEchoProtocol.open, "rss": resident_bytes()})

    def watch_stdin():
        try:
            if args.count:
                for line in sys.stdin:
                    if line.strip() == "gc":
                        loop.call_soon_threadsafe(collect_and_report)
            else:
                while sys.stdin.buffer.read1(4096):
                    pass
        finally:
            loop.call_soon_threadsafe(loop.stop)

    threading.Thread(target=watch_stdin, daemon=True).start()
    _say({"ready": True, **address, "pid": os.getpid()})
    try:
        loop.run_forever()
    finally:
        finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
