"""UDP echo: round trips per second through create_datagram_endpoint.

One server endpoint echoes every datagram to its sender; C client endpoints
(in the same loop) each keep W datagrams in flight and send the next one as
each answer arrives, until N answers have come back in all.  Server and
clients are protocol-level (no tasks or futures per datagram), so the time is
the transport's and the loop's.

    python benchmarks/udp_echo.py [--rounds 5] [--n 200000] [--size 64]
                                  [--clients 1,10] [--window 1]
                                  [--loops asyncio,minloop,uvloop] [--json FILE]

A row per client count, udp-inproc-<size>b-s<clients> (-w<window> where
more than one datagram is in flight): what this script measures differently
from the bench's udp-* rows (a server process and a load generator in
another) is the one process holding both ends.  Each measurement runs in a
fresh interpreter; the rounds, medians, ratios and report are the bench's
(minloop/bench/suite.py): round trips per second of wall time in the table
(minloop's over the other loop's: above 1, minloop is faster), the
process's CPU time for the whole run in the details (user + system: the
kernel's loopback work runs in the sending syscall, so on a busy machine
CPU time is the steadier measure).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import loops, procs, suite  # noqa: E402


class Echo(asyncio.DatagramProtocol):
    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        self.transport.sendto(data, addr)


class Client(asyncio.DatagramProtocol):
    def __init__(self, shared, payload):
        self.shared = shared
        self.payload = payload

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        shared = self.shared
        shared[0] -= 1
        if shared[0] > 0:
            self.transport.sendto(self.payload)
        elif shared[0] == 0:
            shared[1].set_result(None)


async def echo(n: int, clients: int, window: int, size: int) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    payload = b'x' * size
    server, _ = await loop.create_datagram_endpoint(
        Echo, local_addr=('127.0.0.1', 0))
    addr = server.get_extra_info('sockname')
    # Answers still expected; the future is set when they have all come.
    shared = [n + clients * window, loop.create_future()]
    transports = []
    for _ in range(clients):
        tr, _ = await loop.create_datagram_endpoint(
            lambda: Client(shared, payload), remote_addr=addr)
        transports.append(tr)
    # Count only n answers: the last window of each client is not waited for.
    shared[0] = n
    t0 = time.perf_counter()
    c0 = time.process_time()
    for tr in transports:
        for _ in range(window):
            tr.sendto(payload)
    await shared[1]
    elapsed = time.perf_counter() - t0, time.process_time() - c0
    for tr in transports + [server]:
        tr.close()
    await asyncio.sleep(0.01)
    return elapsed


def child(loop_name: str, n: int, clients: int, window: int, size: int) -> None:
    factory = loops.factory(loop_name)
    for count in (min(n, 2000), n):   # a warm-up run, then the measured one
        lp = factory()
        try:
            seconds, cpu = lp.run_until_complete(echo(count, clients, window, size))
        finally:
            lp.close()
    print(json.dumps({"seconds": seconds, "cpu": cpu}))


def measure(row: suite.Row, loop_name: str, settings: suite.Settings) -> dict:
    """One run in a fresh interpreter: the bench's sample (rate: round trips/s)."""
    answer = procs.run_json([sys.executable, __file__, "--child", loop_name, str(row.conns),
                             "--n", str(row.n), "--size", str(row.size),
                             "--window", str(row.depth)], settings.timeout)
    if "error" in answer:
        return answer
    return dict(answer, rate=row.n / answer["seconds"], problems=[])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--clients", default="1,10")
    ap.add_argument("--window", type=int, default=1)
    ap.add_argument("--loops", default="asyncio,minloop,uvloop")
    ap.add_argument("--json", metavar="FILE",
                    help="also write every round's figures as JSON (the bench's --json)")
    ap.add_argument("--child", nargs=2, metavar=("LOOP", "CLIENTS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], args.n, int(args.child[1]), args.window, args.size)
        return 0
    try:
        clients = [int(c) for c in args.clients.split(",")]
    except ValueError:
        ap.error("--clients takes comma-separated numbers")
    if min([args.rounds, args.n, args.size, args.window] + clients) < 1:
        ap.error("--rounds, --n, --size, --window and --clients must be at least 1")

    names = suite.parse_loops(ap, args.loops)
    window = f"-w{args.window}" if args.window > 1 else ""
    rows = [suite.Row(f"udp-inproc-{args.size}b-s{c}{window}", "other",
                      f"{args.n} round trips of {args.size}-byte datagrams, {c} client "
                      f"endpoint(s) with {args.window} in flight each, server and clients "
                      f"in one loop", False, kind="udp-inproc", n=args.n, conns=c,
                      size=args.size, depth=args.window, per="round trips")
            for c in clients]
    settings = suite.Settings(False, args.rounds, 0.0, 0.0, procs.Pinning(False, "not pinned"))
    return suite.run_script(rows, names, settings, measure=measure, json_path=args.json)


if __name__ == "__main__":
    sys.exit(main())
