"""The load generator of ``python -m minloop bench``: plain sockets, one thread.

    python minloop/bench/client.py (--port P [--host H] | --path P | --address -)
        [--mode echo|http|udp|idle]
        [--conns N] [--size BYTES] [--depth K] [--duration S] [--warmup S]
        [--cpu N] [--server-pid PID] [--watch-cpus N,M]

--address - reads the server's address (its "ready" JSON line: host and
port, or path for a Unix socket; pid) from stdin, so that the generator can start while the server does.

It is a standalone script (the standard library only, nothing from minloop:
starting it costs a bare interpreter), run in a process of its own, pinned (--cpu) to a CPU other than the
server's, and drives N connections from one epoll set (selectors elsewhere)
with non-blocking sockets -- no event loop, so that no loop under test is also
the one measuring it, and as little Python per byte as the job allows:

* echo: each connection keeps up to K messages of SIZE bytes in flight; with
  K = 1 it sends one message and waits for all of its bytes back, with K > 1
  it tops the window up in one send() once half of it has come back.  A
  stream has no message boundaries: round trips are bytes back / SIZE.
* http: each connection keeps up to K keep-alive GET requests in flight (sent
  in one send() each refill) and counts the fixed-length responses.
* udp: N datagram sockets, one SIZE-byte datagram in flight on each; a
  socket whose answer has not come within LOST_AFTER sends again (loopback
  rarely drops one; the count is reported as "resent").
* idle: open N connections in batches, send nothing, say {"connected": total}
  on stdout after each batch and wait for a line on stdin before the next;
  hold them until stdin closes (the idle-connection memory rows).

The soft limit on open files is raised to the hard one first (the rows with
10,000 connections need it on both sides).

Timeline: connect in batches, each connection making its first round trip
before the next batch connects, WARMUP seconds uncounted, DURATION seconds counted;
then stop sending, wait (up to 5 s) for every outstanding byte and check that
each connection got back exactly what it sent.  Byte o of every echo stream
is PATTERN[o % 251], so a server that drops, repeats or reorders bytes
mismatches; one received chunk in CHECK_EVERY is compared.

Output: one JSON line on stdout: round_trips, seconds, client_cpu (this
process's CPU seconds in the counted window: how close it came to being the
bottleneck), server_cpu (the server's, from /proc, or null) and cpus_busy
(the busy seconds of the --watch-cpus CPUs, everyone's, or null); "error"
instead when a check failed (exit status 1).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import selectors
import socket
import sys
import time

PERIOD = 251  # prime to every power-of-two message size
CHECK_EVERY = 16
RECV_SIZE = 256 * 1024
DRAIN_TIMEOUT = 5.0
LOST_AFTER = 0.2
SETTLE_TIMEOUT = 30.0
CONNECT_BATCH = 1000  # well under the servers' accept backlog (servers.BACKLOG)

HTTP_REQUEST = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n"
# The answer of servers.py's HTTP server to every request, byte for byte.
HTTP_RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                 b"Content-Length: 13\r\n\r\nHello, World!")


def _proc_stat_ticks(pid: int) -> tuple[float, float] | None:
    """(utime, stime) of a live process in seconds, in clock ticks (10 ms)
    from /proc/PID/stat, or None where there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # the name may hold spaces
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def proc_cpu(pid: int) -> float | None:
    """CPU seconds of a live process's threads, to the nanosecond from each
    /proc/PID/task/TID/schedstat (some loops work on threads of their own:
    rsloop runs six), else utime + stime in clock ticks (10 ms) from
    /proc/PID/stat; None where there is no /proc.  A thread that ends
    between two readings takes its time with it."""
    try:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except FileNotFoundError:  # the thread has just ended
                pass
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    ticks = _proc_stat_ticks(pid)
    return None if ticks is None else ticks[0] + ticks[1]


def proc_user_cpu(pid: int) -> float | None:
    """User CPU seconds of a live process (utime), or None where there is no
    /proc.  Beside proc_cpu's total it shows the loop's and the
    interpreter's part, without the kernel's; but the kernel splits a
    process's time between user and system by sampling at its clock tick,
    and /proc counts it in 10 ms units, so over one short window it is
    rough (runner._pool_user_cpu pools the rounds and says how rough)."""
    ticks = _proc_stat_ticks(pid)
    return None if ticks is None else ticks[0]


def cpus_busy(cpus: list[int]) -> float | None:
    """Seconds the given CPUs spent not idle since boot (from /proc/stat), or
    None where there is no /proc."""
    names = {f"cpu{c}" for c in cpus}
    busy = 0
    try:
        with open("/proc/stat") as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] in names:
                    # user, nice and system only: the kernel may account the
                    # benchmark's own loopback traffic to softirq rather than
                    # to the processes.
                    busy += sum(int(x) for x in fields[1:4])
    except OSError:
        return None
    return busy / os.sysconf("SC_CLK_TCK")


class Failed(Exception):
    pass


class Poller:
    """epoll where there is one (no per-event objects), selectors elsewhere."""

    def __init__(self):
        if hasattr(select, "epoll"):
            self._epoll = select.epoll()
            self.poll = self._epoll.poll
        else:
            self._sel = selectors.DefaultSelector()
            self.poll = self._selector_poll

    def add(self, fd: int) -> None:
        if hasattr(self, "_epoll"):
            self._epoll.register(fd, select.EPOLLIN)
        else:
            self._sel.register(fd, selectors.EVENT_READ)

    def _selector_poll(self, timeout):
        return [(key.fd, mask) for key, mask in self._sel.select(timeout)]


def run(host: str, port: int, mode: str, conns: int, size: int, depth: int,
        duration: float, warmup: float, server_pid: int | None = None,
        watch_cpus: list[int] | None = None) -> dict:
    if mode == "http":
        unit = len(HTTP_RESPONSE)  # bytes back per round trip
        expected = HTTP_RESPONSE * (RECV_SIZE // unit + 2)
        period = unit
        blocks = [HTTP_REQUEST * k for k in range(depth + 1)]
    else:
        unit = size
        pattern = bytes(i % PERIOD for i in range(PERIOD))
        expected = pattern * ((RECV_SIZE + size * depth) // PERIOD + 2)
        period = PERIOD
    outgoing = memoryview(expected)
    expected_view = memoryview(expected)
    window = depth * unit  # bytes of answers in flight, at most
    # Refill once half the window is back (all of it when depth is 1):
    # fewer, larger sends keep the generator's cost per round trip down.
    low_water = window - max(unit, (depth // 2) * unit)

    socks = []
    poller = Poller()
    by_fd = {}  # per connection: [sock, requested (bytes of answers asked for), received]

    buf = bytearray(RECV_SIZE)
    view = memoryview(buf)
    chunks = 0
    sending = True

    def top_up(state):
        sock, requested, received = state
        if mode == "http":
            want = (window - (requested - received)) // unit
            data = blocks[want]
            n = sock.send(data)
            if n != len(data):  # a few dozen bytes into an empty socket buffer
                raise Failed("short send of HTTP requests")
            state[1] = requested + want * unit
        else:
            start = requested % period
            n = sock.send(outgoing[start:start + window - (requested - received)])
            state[1] = requested + n

    outstanding = 0  # connections still owed bytes, counted while draining
    answered = 0  # connections that got their first round trip back
    refill = False  # set-up: each connection makes one round trip, no more
    everyone = False  # pump() returns early once every connection answered

    def pump(until: float) -> None:
        nonlocal chunks, outstanding, answered
        poll = poller.poll
        monotonic = time.monotonic
        while monotonic() < until:
            if not sending and not outstanding:
                return
            if everyone and answered == len(socks):
                return
            for fd, _ in poll(0.05):
                state = by_fd[fd]
                sock = state[0]
                try:
                    n = sock.recv_into(buf)
                except BlockingIOError:
                    continue
                if n == 0:
                    raise Failed("server closed a connection")
                chunks += 1
                if chunks % CHECK_EVERY == 0:
                    start = state[2] % period
                    if view[:n] != expected_view[start:start + n]:
                        raise Failed(f"wrong bytes echoed at offset {state[2]}")
                if state[2] < unit <= state[2] + n:
                    answered += 1
                state[2] += n
                if sending:
                    if refill and state[1] - state[2] <= low_water:
                        top_up(state)
                elif state[1] == state[2]:
                    outstanding -= 1

    # Connect in batches, each connection sending at once, and wait for every
    # answer before the next batch: the server has then accepted them all, so
    # its accept queue (BACKLOG) never overflows -- a connection the kernel
    # dropped from a full queue looks connected here and would stall.
    everyone = True
    for first in range(0, conns, CONNECT_BATCH):
        batch = connect_all(host, port, min(CONNECT_BATCH, conns - first))
        for sock in batch:
            sock.setblocking(False)
            state = [sock, 0, 0]
            by_fd[sock.fileno()] = state
            poller.add(sock.fileno())
            socks.append(sock)
            top_up(state)
        pump(time.monotonic() + SETTLE_TIMEOUT)
        if answered < len(socks):
            raise Failed(f"{len(socks) - answered} of {len(socks)} connections got no "
                         f"answer in {SETTLE_TIMEOUT:g} s")
    # Every connection is up and answered once (none sent more meanwhile, so
    # the set-up is the same for every server): now the traffic starts.
    everyone = False
    refill = True
    for state in by_fd.values():
        if state[1] - state[2] <= low_water:
            top_up(state)
    pump(time.monotonic() + warmup)
    received_before = sum(s[2] for s in by_fd.values())
    server_before = proc_cpu(server_pid) if server_pid else None
    user_before = proc_user_cpu(server_pid) if server_pid else None
    busy_before = cpus_busy(watch_cpus) if watch_cpus else None
    cpu_before = time.process_time()
    start = time.perf_counter()
    pump(time.monotonic() + duration)
    seconds = time.perf_counter() - start
    cpu_after = time.process_time()
    server_after = proc_cpu(server_pid) if server_pid else None
    user_after = proc_user_cpu(server_pid) if server_pid else None
    busy_after = cpus_busy(watch_cpus) if watch_cpus else None
    received = sum(s[2] for s in by_fd.values()) - received_before

    sending = False
    outstanding = sum(1 for s in by_fd.values() if s[1] != s[2])
    pump(time.monotonic() + DRAIN_TIMEOUT)
    short = [i for i, s in enumerate(by_fd.values()) if s[1] != s[2]]
    for sock in socks:
        sock.close()
    if short:
        raise Failed(f"{len(short)} connection(s) did not get back all they sent")
    return {
        "round_trips": received / unit,
        "seconds": seconds,
        "client_cpu": cpu_after - cpu_before,
        "server_cpu": (server_after - server_before)
        if None not in (server_before, server_after) else None,
        "server_user_cpu": (user_after - user_before)
        if None not in (user_before, user_after) else None,
        "cpus_busy": (busy_after - busy_before)
        if None not in (busy_before, busy_after) else None,
    }


def run_udp(host: str, port: int, count: int, size: int, duration: float, warmup: float,
            server_pid: int | None = None, watch_cpus: list[int] | None = None) -> dict:
    """Datagram echo: count sockets, one datagram of size bytes in flight on each."""
    message = bytes(i % PERIOD for i in range(size))
    socks = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.connect((host, port))
        sock.setblocking(False)
        socks.append(sock)
    poller = Poller()
    by_fd = {}
    for sock in socks:
        by_fd[sock.fileno()] = [sock, time.monotonic()]  # [sock, when last sent]
        poller.add(sock.fileno())
    buf = bytearray(max(size, 1) * 2)
    answers = resent = 0

    def pump(until: float) -> None:
        nonlocal answers, resent
        poll = poller.poll
        monotonic = time.monotonic
        next_check = monotonic() + LOST_AFTER
        while (now := monotonic()) < until:
            for fd, _ in poll(0.05):
                state = by_fd[fd]
                try:
                    n = state[0].recv_into(buf)
                except BlockingIOError:
                    continue
                answers += 1
                if n != size or (answers % CHECK_EVERY == 0 and buf[:n] != message):
                    raise Failed(f"wrong datagram echoed ({n} bytes)")
                state[0].send(message)
                state[1] = now
            if now >= next_check:
                for state in by_fd.values():
                    if now - state[1] > LOST_AFTER:
                        state[0].send(message)
                        state[1] = now
                        resent += 1
                next_check = now + LOST_AFTER

    for state in by_fd.values():
        state[0].send(message)
    pump(time.monotonic() + warmup)
    before = answers
    server_before = proc_cpu(server_pid) if server_pid else None
    user_before = proc_user_cpu(server_pid) if server_pid else None
    busy_before = cpus_busy(watch_cpus) if watch_cpus else None
    cpu_before = time.process_time()
    start = time.perf_counter()
    pump(time.monotonic() + duration)
    seconds = time.perf_counter() - start
    cpu_after = time.process_time()
    server_after = proc_cpu(server_pid) if server_pid else None
    user_after = proc_user_cpu(server_pid) if server_pid else None
    busy_after = cpus_busy(watch_cpus) if watch_cpus else None
    for sock in socks:
        sock.close()
    return {
        "round_trips": answers - before,
        "seconds": seconds,
        "client_cpu": cpu_after - cpu_before,
        "server_cpu": (server_after - server_before)
        if None not in (server_before, server_after) else None,
        "server_user_cpu": (user_after - user_before)
        if None not in (user_before, user_after) else None,
        "cpus_busy": (busy_after - busy_before)
        if None not in (busy_before, busy_after) else None,
        "resent": resent,
    }


def connect_all(host: str, port, conns: int) -> list:
    """conns connected stream sockets: TCP to (host, port), or Unix to the
    path given as port (host None)."""
    socks = []
    try:
        for _ in range(conns):
            if host is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                socks.append(sock)
                sock.connect(port)
                continue
            sock = socket.create_connection((host, port), timeout=10.0)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            socks.append(sock)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


def hold_idle(host: str, port: int, conns: int) -> dict:
    """Open conns connections in batches of CONNECT_BATCH, saying
    {"connected": total} after each and waiting for a line on stdin (the
    driver saw the server accept them) before the next; then keep them until
    stdin closes."""
    socks = []
    while len(socks) < conns:
        socks += connect_all(host, port, min(CONNECT_BATCH, conns - len(socks)))
        print(json.dumps({"connected": len(socks)}), flush=True)
        if len(socks) < conns and not sys.stdin.readline():
            break
    sys.stdin.read()
    for sock in socks:
        sock.close()
    return {"connected": len(socks)}


def raise_nofile_limit() -> None:
    try:
        import resource
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int)
    parser.add_argument("--address", choices=("-",),
                        help="read the server's ready line (host, port, pid) from stdin")
    parser.add_argument("--path", help="a Unix socket to connect to instead of TCP")
    parser.add_argument("--mode", choices=("echo", "http", "udp", "idle"), default="echo")
    parser.add_argument("--conns", type=int, default=1)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--duration", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=0.2)
    parser.add_argument("--cpu", type=int, help="pin this process to CPU N")
    parser.add_argument("--server-pid", type=int)
    parser.add_argument("--watch-cpus", help="comma-separated CPUs whose busy time to report")
    args = parser.parse_args(argv)
    if sum(x is not None for x in (args.port, args.path, args.address)) != 1:
        parser.error("one of --port, --path and --address is required")
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    raise_nofile_limit()
    try:
        if args.address:
            hello = json.loads(sys.stdin.readline() or "{}")
            if "port" not in hello and "path" not in hello:
                print(json.dumps({"error": "no server address on stdin"}), flush=True)
                return 1
            if "path" in hello:
                args.path = hello["path"]
            else:
                args.host, args.port = hello["host"], hello["port"]
            args.server_pid = args.server_pid or hello.get("pid")
        # A Unix socket: host None, the path in place of the port.
        host, port = (None, args.path) if args.path else (args.host, args.port)
        watch = [int(c) for c in args.watch_cpus.split(",")] if args.watch_cpus else None
        if args.mode == "idle":
            hold_idle(host, port, args.conns)
            return 0
        if args.mode == "udp":
            if args.path:
                parser.error("--mode udp needs --port")
            result = run_udp(host, port, args.conns, args.size, args.duration, args.warmup,
                             args.server_pid, watch)
            print(json.dumps(result), flush=True)
            return 0
        result = run(host, port, args.mode, args.conns, args.size, args.depth,
                     args.duration, args.warmup, args.server_pid,
                     [int(c) for c in args.watch_cpus.split(",")] if args.watch_cpus else None)
    except (Failed, OSError) as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
