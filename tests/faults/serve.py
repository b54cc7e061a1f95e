"""The server side of each scenario, run on the loop under test in the
process with faults.  Every connection keeps a record: what it received
(count, checksum, the stream's id), what it handed to write, and how it
ended (None: cleanly; else the error the loop reported).  The exception
handler's reports are kept too, tied to a connection where the context
names its protocol.
"""
import asyncio
import os
import socket
import ssl
import sys

from streams import HEADER, Received, stream

CERTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tls_certs")


def describe(exc):
    return None if exc is None else f"{type(exc).__name__}: {exc}"


class Record:
    __slots__ = ("rx", "tx", "end", "ended", "reports", "book")

    def __init__(self, book):
        self.rx, self.tx, self.end, self.ended, self.reports = Received(), 0, None, False, 0
        self.book = book
        book.open += 1

    def finish(self, exc=None):
        if not self.ended:
            self.ended, self.end = True, describe(exc)
            self.book.open -= 1

    def as_dict(self):
        return {"cid": self.rx.cid, "rx": self.rx.count, "crc": self.rx.crc, "tx": self.tx,
                "end": self.end, "ended": self.ended, "reports": self.reports}


class Book:
    def __init__(self):
        self.records, self.reports, self.open = [], [], 0
        self.errors = []          # errors a self-driven workload or a UDP protocol saw

    def new(self):
        r = Record(self)
        self.records.append(r)
        return r

    def exception_handler(self, loop, context):
        proto = context.get("protocol")
        rec = getattr(proto, "rec", None)
        if rec is not None:
            rec.reports += 1
        exc = context.get("exception")
        self.reports.append({"message": str(context.get("message")), "exception": describe(exc),
                             "attributed": rec is not None})

    def take(self):
        out = {"records": [r.as_dict() for r in self.records], "reports": self.reports,
               "errors": self.errors}
        self.records, self.reports, self.errors = [r for r in self.records if not r.ended], [], []
        return out


# -- echo with Protocol and BufferedProtocol ---------------------------------

class EchoProtocol(asyncio.Protocol):
    """Echoes every byte; on EOF returns None, so the transport closes once
    its buffer is flushed (asyncio's rule)."""

    def __init__(self, book):
        self.rec = book.new()
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.rec.rx.feed(data)
        self.transport.write(data)
        self.rec.tx += len(data)

    def eof_received(self):
        return None

    def pause_writing(self):
        self.transport.pause_reading()

    def resume_writing(self):
        self.transport.resume_reading()

    def connection_lost(self, exc):
        self.rec.finish(exc)


class EchoBuffered(asyncio.BufferedProtocol):
    def __init__(self, book):
        self.rec = book.new()
        self.buf = bytearray(32768)
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def get_buffer(self, sizehint):
        return self.buf

    def buffer_updated(self, nbytes):
        data = bytes(self.buf[:nbytes])
        self.rec.rx.feed(data)
        self.transport.write(data)
        self.rec.tx += nbytes

    eof_received = EchoProtocol.eof_received
    pause_writing = EchoProtocol.pause_writing
    resume_writing = EchoProtocol.resume_writing
    connection_lost = EchoProtocol.connection_lost


async def echo_streams(book, reader, writer, length_driven=False):
    """The streams echo: to EOF, or (TLS, which has no half-close) to the
    length its header gives; then close."""
    rec = book.new()
    exc = None
    try:
        while not (length_driven and rec.rx.complete()):
            want = 65536
            if length_driven and rec.rx.length is not None:
                want = min(want, HEADER.size + rec.rx.length - rec.rx.count)
            elif length_driven:
                want = HEADER.size - rec.rx.count
            data = await reader.read(want)
            if not data:
                break
            rec.rx.feed(data)
            writer.write(data)
            rec.tx += len(data)
            await writer.drain()
        writer.close()
        await writer.wait_closed()
    except Exception as e:       # the error the loop reported to the caller
        exc = e
        writer.transport.abort()
    rec.finish(exc)


# -- the scenarios ------------------------------------------------------------

class Scenario:
    """A server: `start` returns the address the clients need."""
    self_driven = False

    def __init__(self, loop, book, tmpdir):
        self.loop, self.book, self.tmpdir = loop, book, tmpdir
        self.server = None

    async def stop(self):
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


class TcpEcho(Scenario):
    family = "tcp"
    kind = "protocol"

    async def start(self):
        book = self.book
        if self.kind == "protocol":
            factory = lambda: EchoProtocol(book)  # noqa: E731
        elif self.kind == "buffered":
            factory = lambda: EchoBuffered(book)  # noqa: E731
        if self.family == "unix":
            path = os.path.join(self.tmpdir, "echo.sock")
            if self.kind == "streams":
                self.server = await asyncio.start_unix_server(
                    lambda r, w: echo_streams(book, r, w), path, backlog=512)
            else:
                self.server = await self.loop.create_unix_server(factory, path, backlog=512)
            return {"unix": path}
        if self.kind == "streams":
            self.server = await asyncio.start_server(
                lambda r, w: echo_streams(book, r, w), "127.0.0.1", 0, backlog=512)
        else:
            self.server = await self.loop.create_server(factory, "127.0.0.1", 0, backlog=512)
        return {"tcp": self.server.sockets[0].getsockname()[:2]}


def echo_scenario(family, kind):
    return type(f"{family}_{kind}", (TcpEcho,), {"family": family, "kind": kind})


class TlsEcho(Scenario):
    async def start(self):
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(os.path.join(CERTS, "server.pem"))
        book = self.book
        self.server = await asyncio.start_server(
            lambda r, w: echo_streams(book, r, w, length_driven=True),
            "127.0.0.1", 0, ssl=ctx, backlog=512)
        return {"tcp": self.server.sockets[0].getsockname()[:2], "tls": True}


class SockEcho(Scenario):
    """The sock_* methods: accept, recv, sendall on plain sockets."""

    async def start(self):
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(512)
        lsock.setblocking(False)
        self.lsock = lsock
        self.tasks = set()
        self.acceptor = self.loop.create_task(self.accept_loop())
        return {"tcp": lsock.getsockname()[:2]}

    async def accept_loop(self):
        while True:
            try:
                conn, _ = await self.loop.sock_accept(self.lsock)
            except (OSError, MemoryError) as e:
                self.book.errors.append(describe(e))   # reported to the caller; accept again
                await asyncio.sleep(0.01)
                continue
            conn.setblocking(False)
            t = self.loop.create_task(self.serve(conn))
            self.tasks.add(t)
            t.add_done_callback(self.tasks.discard)

    async def serve(self, conn):
        rec = self.book.new()
        exc = None
        try:
            while data := await self.loop.sock_recv(conn, 65536):
                rec.rx.feed(data)
                await self.loop.sock_sendall(conn, data)
                rec.tx += len(data)
        except Exception as e:
            exc = e
        conn.close()
        rec.finish(exc)

    async def stop(self):
        self.acceptor.cancel()
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(self.acceptor, *self.tasks, return_exceptions=True)
        self.lsock.close()


class UdpEcho(Scenario):
    """Echoes each datagram; `error_received` is how the loop reports."""

    async def start(self):
        book = self.book

        class Proto(asyncio.DatagramProtocol):
            def connection_made(self, transport):
                self.transport = transport

            def datagram_received(self, data, addr):
                self.transport.sendto(data, addr)

            def error_received(self, exc):
                book.errors.append(describe(exc))

            def connection_lost(self, exc):
                if exc is not None:
                    book.errors.append(describe(exc))

        self.transport, _ = await self.loop.create_datagram_endpoint(Proto, local_addr=("127.0.0.1", 0))
        return {"udp": self.transport.get_extra_info("sockname")[:2]}

    async def stop(self):
        self.transport.close()
        await asyncio.sleep(0)


CAT = ("import os\n"
       "while b := os.read(0, 65536):\n"
       "    v = memoryview(b)\n"
       "    while v:\n"
       "        v = v[os.write(1, v):]\n")


class SubprocessEcho(Scenario):
    """A child (with no faults) copies its stdin to its stdout: the loop's
    pipe transports carry a known stream both ways."""
    self_driven = True

    async def start(self):
        return {}

    async def drive(self, cfg, round_no, env):
        sem = asyncio.Semaphore(cfg["concurrency"])
        ids = range(round_no * cfg["count"], (round_no + 1) * cfg["count"])
        await asyncio.gather(*(self.one(cfg, cid, sem, env) for cid in ids))

    async def one(self, cfg, cid, sem, env):
        async with sem:
            rec = self.book.new()
            data = stream(cfg["seed"], cid, cfg["sizes"][cid % len(cfg["sizes"])])
            exc = None
            proc = None
            try:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", CAT, stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE, env=env)

                async def feed():
                    for i in range(0, len(data), 65536):
                        proc.stdin.write(data[i:i + 65536])
                        await proc.stdin.drain()
                    proc.stdin.close()
                    await proc.stdin.wait_closed()

                async def drain():
                    while chunk := await proc.stdout.read(65536):
                        rec.rx.feed(chunk)

                await asyncio.gather(feed(), drain())
                code = await proc.wait()
                if code != 0:
                    exc = ChildProcessError(f"exit status {code}")
            except Exception as e:
                exc = e
                if proc is not None and proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            rec.tx = len(data)
            rec.finish(exc)


SCENARIOS = {
    "tcp-protocol": echo_scenario("tcp", "protocol"),
    "tcp-buffered": echo_scenario("tcp", "buffered"),
    "tcp-streams": echo_scenario("tcp", "streams"),
    "unix-protocol": echo_scenario("unix", "protocol"),
    "unix-buffered": echo_scenario("unix", "buffered"),
    "unix-streams": echo_scenario("unix", "streams"),
    "sock": SockEcho,
    "udp": UdpEcho,
    "tls": TlsEcho,
    "subprocess": SubprocessEcho,
    "short-conns": echo_scenario("tcp", "protocol"),
}
