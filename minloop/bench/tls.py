"""TLS echo: a TLS server on the loop under test, and its load generator.

    python -m minloop.bench.tls --serve LOOP [--cpu N]
    python -m minloop.bench.tls --load PORT --server-pid PID --size B --conns N
                                --duration S --warmup S [--cpu N --server-cpu N]

The server is ``loop.create_server(EchoProtocol, ssl=context)`` (an
asyncio.Protocol whose data_received writes the data back), in a fresh
process per measurement; it talks to the driver as servers.py does (one
JSON line when ready or {"unsupported": ...}; serve until stdin closes;
then {"errors": [...]}).  asyncio and minloop run asyncio's SSLProtocol
(minloop under its own socket transport), uvloop its Cython copy of it;
rloop has no TLS (its create_server(ssl=) raises NotImplementedError),
which the driver shows as n/a.

The load generator is another process, not an event loop: plain
non-blocking sockets on one select.epoll, each with an ssl.SSLObject over
memory BIOs (one recv() and one send() per round trip, as the servers do;
an SSLSocket would make OpenSSL read each record's header and body with
two recv() calls), and a dozen Python calls per round trip where the
servers make several dozen.  Each of N connections keeps one message of
SIZE bytes in flight: it sends the message, waits until SIZE bytes have
come back (and equal what it sent), then sends the next.  After a warm-up,
round trips are counted for the timed window; then sending stops and every
outstanding echo is awaited.  The handshakes are made before the window
and are not measured.  It prints one JSON line: round trips, seconds, its
own CPU time and the server's (from /proc), and the other processes' share
of the two CPUs.

The certificates are the test suite's (tests/tls_certs) in a checkout;
elsewhere (an installed wheel) the driver makes a throwaway pair with the
openssl command into a temporary directory, and without it the rows are
n/a.  The children are given the directory (--certs).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

from . import loops, procs, servers
from .client import cpus_busy, proc_cpu

CHECKOUT_CERTS = os.path.join(procs._ROOT, "tests", "tls_certs")
CA, SERVER = "ca.pem", "server.pem"  # the CA's certificate; the server's chain and key
HOST = "127.0.0.1"
HOSTNAME = "localhost"


def _pin(cpu: int | None) -> None:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})


def _say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# As tests/tls_certs/README.md makes the test suite's: ECDSA P-256 (fast
# handshakes), with the key identifiers Python 3.13's VERIFY_X509_STRICT wants.
_OPENSSL_CNF = """\
[req]
distinguished_name=dn
[dn]
[v3_ca]
basicConstraints=critical,CA:TRUE
keyUsage=critical,keyCertSign,cRLSign
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid:always
[v3_server]
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=DNS:localhost,IP:127.0.0.1
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid:always
"""
_OPENSSL_STEPS = (
    "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
    "-subj /CN=minloop-bench-CA -config ca.cnf -extensions v3_ca -keyout ca.key -out ca.pem",
    "req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost "
    "-config ca.cnf -keyout server.key -out server.csr",
    "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial 2 -days 2 "
    "-extfile ca.cnf -extensions v3_server -out server.crt",
)
_made: list = []  # [directory] or [None, why], once per driver process


def make_certificates() -> str:
    """A temporary directory (removed at exit) with a throwaway CA and a
    server certificate for localhost made by the openssl command; raises
    OSError (or CalledProcessError) where it cannot."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise FileNotFoundError("no openssl command to make a certificate with")
    where = tempfile.mkdtemp(prefix="minloop-tls-")
    atexit.register(shutil.rmtree, where, True)
    with open(os.path.join(where, "ca.cnf"), "w") as f:
        f.write(_OPENSSL_CNF)
    for step in _OPENSSL_STEPS:
        subprocess.run([openssl, *step.split()], cwd=where, check=True, timeout=60,
                       stdin=subprocess.DEVNULL, capture_output=True)
    with open(os.path.join(where, SERVER), "wb") as out:
        for part in ("server.crt", "server.key"):
            with open(os.path.join(where, part), "rb") as f:
                out.write(f.read())
    return where


def certificates() -> tuple[str | None, str | None]:
    """(directory holding CA and SERVER, None), or (None, why there is none):
    the test suite's in a checkout, else a pair made once for this process."""
    if all(os.path.exists(os.path.join(CHECKOUT_CERTS, f)) for f in (CA, SERVER)):
        return CHECKOUT_CERTS, None
    if not _made:
        try:
            _made.append(make_certificates())
        except (OSError, subprocess.SubprocessError) as exc:
            _made[:] = [None, f"no certificate for the TLS server: {exc}"]
    return (_made[0], None) if _made[0] else (None, _made[1])


def unavailable() -> str | None:
    """Why the TLS rows cannot run here, or None if they can."""
    if not hasattr(select, "epoll"):
        return "the TLS load generator needs select.epoll (Linux)"
    return certificates()[1]


# ---------------------------------------------------------------------------
# The server under test (one per measurement)
# ---------------------------------------------------------------------------


def serve(loop_name: str, cpu: int | None, certs: str) -> int:
    """Serve TLS echo on LOOP until stdin closes; JSON lines as servers.py."""
    import asyncio

    _pin(cpu)

    class EchoProtocol(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport

        def data_received(self, data):
            self.transport.write(data)

    try:
        loop = loops.factory(loop_name)()
    except loops.Unavailable as exc:
        _say({"unsupported": f"loop unavailable: {exc}"})
        return 3
    errors = servers.collect_errors(loop)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(certs, SERVER))
    try:
        server = loop.run_until_complete(
            loop.create_server(EchoProtocol, HOST, 0, ssl=ctx, backlog=128))
    except Exception as exc:
        # rloop raises a bare NotImplementedError(): say which call it was.
        detail = str(exc) or "from loop.create_server(ssl=)"
        _say({"unsupported": f"{type(exc).__name__}: {detail}"[:300]})
        return 3

    def finish(*_):
        _say({"errors": errors})
        os._exit(0)   # no orderly teardown: it is not what is measured

    signal.signal(signal.SIGTERM, finish)

    def watch_stdin():
        try:
            while sys.stdin.buffer.read1(4096):
                pass
        finally:
            loop.call_soon_threadsafe(loop.stop)

    threading.Thread(target=watch_stdin, daemon=True).start()
    _say({"ready": True, "host": HOST, "port": server.sockets[0].getsockname()[1],
          "pid": os.getpid()})
    try:
        loop.run_forever()
    finally:
        finish()
    return 0


# ---------------------------------------------------------------------------
# The load generator
# ---------------------------------------------------------------------------


class _Conn:
    """One connection of the generator: a socket and OpenSSL over memory BIOs."""

    __slots__ = ("sock", "fd", "tls", "incoming", "outgoing", "payload", "got",
                 "unsent", "in_flight")

    def __init__(self, ctx, port, payload):
        self.sock = socket.create_connection((HOST, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.fd = self.sock.fileno()
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=HOSTNAME)
        self.payload = payload
        self.got = 0              # bytes of the current echo received
        self.unsent = b""         # ciphertext the socket did not take yet
        self.in_flight = False
        while True:               # the handshake, blocking
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                data = self.sock.recv(65536)
                if not data:
                    raise SystemExit("the server closed a connection in the handshake")
                self.incoming.write(data)
        self.sock.sendall(self.outgoing.read())
        self.sock.setblocking(False)


def load(port: int, conns: int, size: int, duration: float, warmup: float,
         server_pid: int, cpu: int | None, server_cpu: int | None, certs: str) -> dict:
    """Drive the server; one recv() and one send() per round trip per
    connection where the kernel allows, as the servers themselves do."""
    _pin(cpu)
    # The CPUs whose other users are counted as "other load".
    watched = [c for c in (server_cpu, cpu) if c is not None] or \
        sorted(os.sched_getaffinity(0))
    ctx = ssl.create_default_context(cafile=os.path.join(certs, CA))
    rng = random.Random(size * 1000 + conns)
    by_fd: dict[int, _Conn] = {}
    ep = select.epoll()
    for _ in range(conns):
        # Each its own bytes: crossed streams mismatch.
        c = _Conn(ctx, port, rng.randbytes(size))
        by_fd[c.fd] = c
        ep.register(c.fd, select.EPOLLIN)

    def flush(c: _Conn, data: bytes) -> None:
        if c.unsent:
            data = c.unsent + data
        try:
            sent = c.sock.send(data)
        except BlockingIOError:
            sent = 0
        was_waiting = bool(c.unsent)
        c.unsent = data[sent:]
        if bool(c.unsent) != was_waiting:
            ep.modify(c.fd, select.EPOLLIN | (select.EPOLLOUT if c.unsent else 0))

    def send(c: _Conn) -> None:
        c.tls.write(c.payload)
        flush(c, c.outgoing.read())

    recv_buffer = bytearray(262144)
    recv_view = memoryview(recv_buffer)
    stopping = counting = False
    counted = 0
    outstanding = conns
    for c in by_fd.values():
        c.in_flight = True
        send(c)
    window_start = time.monotonic() + warmup
    window_end = window_start + duration
    marks = None
    while outstanding:
        now = time.monotonic()
        if not counting and not stopping and now >= window_start:
            counting = True
            marks = (now, time.process_time(), proc_cpu(server_pid), counted,
                     cpus_busy(watched))
        elif counting and now >= window_end:
            counting = False
            stopping = True
            marks = marks + (now, time.process_time(), proc_cpu(server_pid), counted,
                             cpus_busy(watched))
        for fd, events in ep.poll(0.05):
            c = by_fd[fd]
            if events & select.EPOLLOUT and c.unsent:
                flush(c, b"")
            if not events & (select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP):
                continue
            try:
                n = c.sock.recv_into(recv_buffer)
            except BlockingIOError:
                continue
            if not n:
                raise SystemExit("the server closed a connection")
            c.incoming.write(recv_view[:n])
            while True:
                try:
                    # A record holds at most 16 KiB: no larger bytes object
                    # to allocate and shrink on every read.
                    data = c.tls.read(16384)
                except ssl.SSLWantReadError:
                    break
                end = c.got + len(data)
                if end > size or c.payload[c.got:end] != data:
                    raise SystemExit("the echo differs from what was sent")
                c.got = end
                if end == size:
                    c.got = 0
                    counted += 1
                    if stopping:
                        c.in_flight = False
                        outstanding -= 1
                        break
                    send(c)
                if not c.incoming.pending and not c.tls.pending():
                    break   # all read: no need for the SSLWantReadError
            if c.outgoing.pending:   # TLS 1.3 post-handshake messages, alerts
                flush(c, c.outgoing.read())
    for c in by_fd.values():
        c.sock.close()
    t0, cpu0, srv0, n0, busy0, t1, cpu1, srv1, n1, busy1 = marks
    sample = {"round_trips": n1 - n0, "seconds": t1 - t0, "client_cpu": cpu1 - cpu0,
              "server_cpu": None, "bytes": (n1 - n0) * size, "other_load": None}
    if None not in (srv0, srv1):
        sample["server_cpu"] = srv1 - srv0
        if None not in (busy0, busy1):
            other = (busy1 - busy0) - (cpu1 - cpu0) - (srv1 - srv0)
            sample["other_load"] = max(0.0, other / ((t1 - t0) * len(watched)))
    return sample


# ---------------------------------------------------------------------------
# The driver's side: one measurement
# ---------------------------------------------------------------------------


def measure(loop_name: str, size: int, conns: int, duration: float, warmup: float,
            pin: procs.Pinning) -> dict:
    """One TLS echo measurement of LOOP in fresh processes: the sample
    {"rate", "round_trips", "seconds", "client_cpu", "server_cpu",
    "client_util", "server_util", "server_us", "client_us", "other_load",
    "problems"}, or {"na": why} / {"error": what}."""
    why = unavailable()
    if why:
        return {"na": why}
    certs = certificates()[0]
    try:
        server = procs.ServerProcess(procs.module_command(
            "minloop.bench.tls", "--serve", loop_name, "--certs", certs,
            *pin.args(pin.server), root=loops.root_of(loop_name)))
    except procs.ServerProcess.Unsupported as exc:
        return {"na": str(exc)}
    except procs.ServerProcess.Failed as exc:
        return {"error": str(exc)}
    try:
        argv = procs.module_command(
            "minloop.bench.tls", "--load", str(server.address["port"]),
            "--server-pid", str(server.pid), "--size", str(size), "--conns", str(conns),
            "--duration", f"{duration:g}", "--warmup", f"{warmup:g}", "--certs", certs)
        if pin.client is not None:
            argv += ["--cpu", str(pin.client), "--server-cpu", str(pin.server)]
        answer = procs.run_json(argv, duration + warmup + 60)
    finally:
        server.stop()
    problems = server.problems()
    if "error" in answer:
        return {"error": f"load generator: {answer['error']}"
                + (f" ({problems[0]})" if problems else "")}
    seconds, trips = answer["seconds"], answer["round_trips"]
    if trips <= 0 or seconds <= 0:
        return {"error": "no round trips in the timed window"}
    sample = dict(answer, rate=trips / seconds, client_util=answer["client_cpu"] / seconds,
                  client_us=answer["client_cpu"] / trips * 1e6, problems=problems)
    if answer["server_cpu"] is not None:
        sample["server_util"] = answer["server_cpu"] / seconds
        # CPU microseconds per round trip: what one costs the server, with
        # the waiting taken out (the steadier figure on a busy machine).
        sample["server_us"] = answer["server_cpu"] / trips * 1e6
    return sample


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", metavar="LOOP")
    parser.add_argument("--load", type=int, metavar="PORT")
    parser.add_argument("--server-pid", type=int)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--conns", type=int, default=1)
    parser.add_argument("--duration", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=0.2)
    parser.add_argument("--cpu", type=int, help="pin this process to CPU N")
    parser.add_argument("--server-cpu", type=int)
    parser.add_argument("--certs", default=CHECKOUT_CERTS,
                        help=f"the directory holding {CA} and {SERVER} (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.serve, args.cpu, args.certs)
    if args.load is None:
        parser.error("one of --serve and --load is required")
    try:
        _say(load(args.load, args.conns, args.size, args.duration, args.warmup,
                  args.server_pid, args.cpu, args.server_cpu, args.certs))
    except (OSError, ssl.SSLError) as exc:
        _say({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    except SystemExit as exc:  # the checks of the echo
        _say({"error": str(exc)})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
