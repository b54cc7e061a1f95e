"""TLS echo: round trips per second through each loop's TLS server.

    python benchmarks/tls_echo.py [--quick] [--rounds N] [--duration S]
                                  [--warmup S] [--sizes 1024,65536]
                                  [--conns 1,16] [--loops asyncio,minloop,uvloop,rloop]
                                  [--no-pin] [--json FILE]

The server is ``loop.create_server(EchoProtocol, ssl=context)`` (an
asyncio.Protocol whose data_received writes the data back) on the loop
under test, in a fresh process per measurement.  asyncio and minloop run
asyncio's SSLProtocol (minloop under its own socket transport), uvloop its
Cython copy of it; rloop has no TLS (its create_server(ssl=) raises
NotImplementedError), which shows as n/a.

The load generator is another process, not an event loop: plain
non-blocking sockets on one select.epoll, each with an ssl.SSLObject over
memory BIOs (one recv() and one send() per round trip, as the servers do;
an SSLSocket would make OpenSSL read each record's header and body with
two recv() calls), and a dozen Python calls per round trip where the
servers make several dozen.  Each of N
connections keeps one message of SIZE bytes in flight: it sends the
message, waits until SIZE bytes have come back (and equal what it sent),
then sends the next.  After a warm-up, round trips are counted for the
timed window; then sending stops and every outstanding echo is awaited.

The server is pinned to the first usable CPU and the generator to the
second (os.sched_setaffinity in each process); the generator reads the
server's CPU time from /proc at the edges of the window.  "gen CPU%" is the
generator's CPU over the window as a share of one core: well under 100
while the server's is near 100 means the server set the pace, which is
what makes a cell a measurement of the server.  At 1 connection neither is
saturated: the row measures the round-trip latency through both.  "us/rt"
gives each side's CPU per round trip: at 1 KiB the generator's is about
half the server's (the same syscalls and AES-GCM, a fraction of the
Python); at 64 KiB both are dominated by the cipher and the kernel's
copies, the same work on both ends, so there the generator's cost comes
close to the server's and only the gen CPU% column can say which one
set the pace.

Within a round the loops take turns on a row, so slow drift of the machine
falls on all of them; cells are medians over rounds.  Ratios are minloop's
rate over the other loop's: above 1, minloop is faster.  The handshakes are
made before the window and are not measured.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compare  # noqa: E402  (machine_info, Progress, _si, _names)
from minloop.bench import loops, procs  # noqa: E402
from minloop.bench.client import cpus_busy, proc_cpu  # noqa: E402

CERTS = os.path.join(os.path.dirname(HERE), "tests", "tls_certs")
CA_PEM = os.path.join(CERTS, "ca.pem")
SERVER_PEM = os.path.join(CERTS, "server.pem")
HOST = "127.0.0.1"
HOSTNAME = "localhost"
REF = "minloop"
NOISY = 0.20
KiB = 1024


def _pin(cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def _say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# The server under test (one per measurement)
# ---------------------------------------------------------------------------


def serve(loop_name: str, cpu: int | None) -> int:
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
    errors: list[str] = []

    def on_error(loop, context):
        if len(errors) < 5:
            exc = context.get("exception")
            errors.append(context.get("message", "") + (f": {exc!r}" if exc else ""))

    loop.set_exception_handler(on_error)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(SERVER_PEM)
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
    _say({"ready": True, "port": server.sockets[0].getsockname()[1], "pid": os.getpid()})
    try:
        loop.run_forever()
    finally:
        finish()
    return 0


# ---------------------------------------------------------------------------
# The load generator
# ---------------------------------------------------------------------------


# The CPU accounting of the package's load generator: the server's CPU time
# (from /proc/PID/schedstat, to the nanosecond) and the busy time of CPUs.
_cpus_busy = cpus_busy
_proc_cpu = proc_cpu


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
         server_pid: int, cpu: int | None, server_cpu: int | None) -> dict:
    """Drive the server; one recv() and one send() per round trip per
    connection where the kernel allows, as the servers themselves do."""
    _pin(cpu)
    # The CPUs whose other users are counted as "other load".
    watched = [c for c in (server_cpu, cpu) if c is not None] or \
        sorted(os.sched_getaffinity(0))
    ctx = ssl.create_default_context(cafile=CA_PEM)
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
            marks = (now, time.process_time(), _proc_cpu(server_pid), counted,
                     _cpus_busy(watched))
        elif counting and now >= window_end:
            counting = False
            stopping = True
            marks = marks + (now, time.process_time(), _proc_cpu(server_pid), counted,
                             _cpus_busy(watched))
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
    other = (busy1 - busy0) - (cpu1 - cpu0) - (srv1 - srv0)
    return {"round_trips": n1 - n0, "seconds": t1 - t0, "client_cpu": cpu1 - cpu0,
            "server_cpu": srv1 - srv0, "bytes": (n1 - n0) * size,
            "other_load": max(0.0, other / ((t1 - t0) * len(watched)))}


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------


def _cpus(pin: bool) -> tuple[int | None, int | None, str]:
    """The server's CPU, the load generator's and a description (procs.Pinning)."""
    pinning = procs.Pinning(pin)
    return pinning.server, pinning.client, pinning.describe


def measure(loop_name: str, size: int, conns: int, duration: float, warmup: float,
            server_cpu: int | None, client_cpu: int | None) -> dict:
    cmd = [sys.executable, __file__, "--serve", loop_name]
    if server_cpu is not None:
        cmd += ["--cpu", str(server_cpu)]
    server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([server.stdout], [], [], 30)
        line = server.stdout.readline() if ready else ""
        try:
            hello = json.loads(line)
        except ValueError:
            return {"error": f"server did not start: {line.strip() or server.stderr.read()[-300:]}"}
        if "unsupported" in hello:
            return {"na": hello["unsupported"]}
        cmd = [sys.executable, __file__, "--load", str(hello["port"]),
               "--server-pid", str(hello["pid"]), "--size", str(size), "--conns", str(conns),
               "--duration", f"{duration:g}", "--warmup", f"{warmup:g}"]
        if client_cpu is not None:
            cmd += ["--cpu", str(client_cpu), "--server-cpu", str(server_cpu)]
        try:
            client = subprocess.run(cmd, capture_output=True, text=True,
                                    timeout=duration + warmup + 60)
        except subprocess.TimeoutExpired:
            return {"error": "load generator timed out"}
        try:
            sample = json.loads(client.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return {"error": f"load generator: exit status {client.returncode}: "
                             f"{(client.stderr.strip() or client.stdout.strip())[-300:]}"}
    finally:
        try:
            server.stdin.close()
        except OSError:
            pass
        try:
            server.wait(5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        rest = server.stdout.read()
        server.stdout.close()
        server.stderr.close()
    sample["problems"] = []
    for line in rest.splitlines():
        try:
            sample["problems"] += [f"server reported: {e}" for e in json.loads(line)["errors"]]
        except (ValueError, KeyError):
            pass
    sample["rt_s"] = sample["round_trips"] / sample["seconds"]
    sample["gen_util"] = sample["client_cpu"] / sample["seconds"]
    sample["server_util"] = sample["server_cpu"] / sample["seconds"]
    # CPU microseconds per round trip: what one costs each side, with the
    # waiting taken out (the steadier figure on a busy machine).
    sample["server_us"] = sample["server_cpu"] / sample["round_trips"] * 1e6
    sample["gen_us"] = sample["client_cpu"] / sample["round_trips"] * 1e6
    return sample


def _fmt_cell(cell: dict) -> str:
    if cell["na"]:
        return f"n/a ({cell['na'].split(':')[0]})"
    if not cell["samples"]:
        return "FAILED" if cell["errors"] else "-"
    text = compare._si(cell["median"]["rt_s"])
    if cell["errors"] or cell["problems"]:
        text += "!"
    elif cell["spread"] > NOISY:
        text += "~"
    return text


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ("-" if i == 0 else ":")
                          for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule] + [line(r) for r in rows])


def render(results: dict, names: list[str]) -> str:
    others = [n for n in ("asyncio", "uvloop", "rloop") if n in names] if REF in names else []
    header = ["row"] + names + [f"{REF}/{n}" for n in others]
    header += ["server CPU% " + "/".join(names), "gen CPU% " + "/".join(names),
               "server us/rt " + "/".join(names), "gen us/rt " + "/".join(names),
               "other load%"]
    rows = []
    for row_id, cells in results.items():
        line = [row_id] + [_fmt_cell(cells[n]) for n in names]
        for n in others:
            a, b = (cells[x]["median"]["rt_s"] if cells[x]["samples"] else None
                    for x in (REF, n))
            line.append(f"{a / b:.2f}x" if a and b else "-")
        for metric, scale in (("server_util", 100), ("gen_util", 100),
                              ("server_us", 1), ("gen_us", 1)):
            line.append("/".join(f"{cells[n]['median'][metric] * scale:.0f}"
                                 if cells[n]["samples"] else "-" for n in names))
        loads = [s["other_load"] for n in names for s in cells[n]["samples"]]
        line.append(f"{statistics.median(loads) * 100:.0f}" if loads else "-")
        rows.append(line)
    return _table(header, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 rounds of 0.3 s (a smoke run)")
    parser.add_argument("--rounds", type=int, help="rounds (default 4, or 2 with --quick)")
    parser.add_argument("--duration", type=float,
                        help="timed seconds per run (default 1.0, or 0.3 with --quick)")
    parser.add_argument("--warmup", type=float,
                        help="untimed seconds first (default 0.2, or 0.1 with --quick)")
    parser.add_argument("--sizes", default="1024,65536", help="message sizes in bytes")
    parser.add_argument("--conns", default="1,16", help="connection counts")
    parser.add_argument("--loops", default=",".join(loops.NAMES),
                        help="comma-separated loops, in run order (default: %(default)s)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin to CPUs")
    parser.add_argument("--json", metavar="FILE", help="also write every sample as JSON")
    # The two roles of the child processes.
    parser.add_argument("--serve", metavar="LOOP", help=argparse.SUPPRESS)
    parser.add_argument("--load", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--server-cpu", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.serve:
        return serve(args.serve, args.cpu)
    if args.load:
        _say(load(args.load, int(args.conns), args.size, args.duration, args.warmup,
                  args.server_pid, args.cpu, args.server_cpu))
        return 0

    names = compare._names(parser, args.loops, loops.NAMES, "loop")
    rounds = args.rounds or (2 if args.quick else 4)
    duration = args.duration or (0.3 if args.quick else 1.0)
    warmup = args.warmup if args.warmup is not None else (0.1 if args.quick else 0.2)
    sizes = [int(s) for s in args.sizes.split(",")]
    conn_counts = [int(c) for c in args.conns.split(",")]
    server_cpu, client_cpu, pinning = _cpus(not args.no_pin)
    machine = compare.machine_info()

    available, skipped = [], {}
    for n in names:
        try:
            loops.factory(n)
            available.append(n)
        except loops.Unavailable as exc:
            skipped[n] = str(exc)
    print(f"TLS echo (create_server(ssl=) + Protocol echo): median of {rounds} rounds of "
          f"{duration:g} s after {warmup:g} s warm-up, a fresh server process per run")
    print(f"python: {machine['python']} on {machine['platform']}; {ssl.OPENSSL_VERSION}")
    print(f"cpu: {machine['cpu']}, {machine['cpu_count']} CPUs; {pinning}")
    print("loops: " + ", ".join(f"{n} {loops.version(n)}" for n in available))
    for n, why in skipped.items():
        print(f"skipped: {n} ({why})")
    print(flush=True)

    row_specs = [(size, conns) for size in sizes for conns in conn_counts]
    results: dict = {}
    progress = compare.Progress(len(row_specs) * rounds * len(available))
    for size, conns in row_specs:
        row_id = f"tls-{size // KiB}k-c{conns}" if size % KiB == 0 else f"tls-{size}b-c{conns}"
        cells = {n: {"samples": [], "errors": [], "problems": [], "na": None} for n in available}
        for round_ in range(1, rounds + 1):
            for n in available:
                progress.show(row_id, round_, rounds, n)
                progress.step()
                cell = cells[n]
                if cell["na"]:
                    continue
                answer = measure(n, size, conns, duration, warmup, server_cpu, client_cpu)
                if "na" in answer:
                    cell["na"] = answer["na"]
                elif "error" in answer:
                    cell["errors"].append(f"round {round_}: {answer['error']}")
                else:
                    cell["samples"].append(answer)
                    cell["problems"] += [f"round {round_}: {p}" for p in answer["problems"]]
        for cell in cells.values():
            if cell["samples"]:
                cell["median"] = {m: statistics.median(s[m] for s in cell["samples"])
                                  for m in ("rt_s", "server_util", "gen_util",
                                            "server_us", "gen_us")}
                rates = [s["rt_s"] for s in cell["samples"]]
                cell["spread"] = (max(rates) - min(rates)) / statistics.median(rates)
        results[row_id] = cells
    progress.finish()

    print(render(results, available))
    print()
    print("Round trips per second, median over rounds ('~': rounds spread by more than "
          f"{NOISY:.0%}; '!': some round failed or misbehaved).")
    if REF in available:
        print(f"{REF}/X: {REF}'s rate over X's; above 1, {REF} is faster.")
    print("server CPU% / gen CPU%: the server's and the load generator's CPU over the "
          "timed window, as a share of one core.  The generator near 100 would mean it, "
          "not the server, set the pace.")
    print("server us/rt / gen us/rt: CPU microseconds per round trip in the server and in "
          "the generator (each on its own CPU: the generator holds the pace back only "
          "when its gen CPU% nears 100).")
    print("other load%: CPU time other processes took on the two CPUs in the window "
          "(median over the row's runs); above 10% the servers waited for a CPU and the "
          "rates carry that noise.")
    loads = sorted(smp["other_load"] for cells in results.values()
                   for cell in cells.values() for smp in cell["samples"])
    if loads and statistics.median(loads) > 0.10:
        print(f"WARNING: the machine was busy: other processes took a median "
              f"{statistics.median(loads):.0%} of the two CPUs; the servers waited for "
              f"a CPU and these numbers are mostly that noise.")
    status = 0
    said_na: set[str] = set()
    for row_id, cells in results.items():
        for n, cell in cells.items():
            for what in cell["errors"] + cell["problems"]:
                print(f"  {row_id} / {n}: {what}")
                if n == REF:
                    status = 1
            if cell["na"] and n not in said_na:
                said_na.add(n)
                print(f"  {n}: n/a on every row: {cell['na']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "pinning": pinning, "rounds": rounds,
                       "duration": duration, "warmup": warmup, "results": results}, f, indent=2)
    return status


if __name__ == "__main__":
    sys.exit(main())
