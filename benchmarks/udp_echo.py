"""UDP echo: round trips per second through create_datagram_endpoint.

One server endpoint echoes every datagram to its sender; C client endpoints
(in the same loop) each keep W datagrams in flight and send the next one as
each answer arrives, until N answers have come back in all.  Server and
clients are protocol-level (no tasks or futures per datagram), so the time is
the transport's and the loop's.

    python benchmarks/udp_echo.py [--n 200000] [--size 64] [--clients 1,10]
                                  [--window 1] [--only ROWS] [--quick] [--rounds 5]
                                  [--loops asyncio,minloop,...] [--json FILE]

A row per client count, udp-inproc-<size>b-s<clients> (-w<window> where
more than one datagram is in flight): what this script measures differently
from the bench's udp-* rows (a server process and a load generator in
another) is the one process holding both ends.  Each measurement runs in a
fresh interpreter; the rounds, medians, ratios, report and options are the
bench's (minloop/bench/runner.py, options.py; --quick: a fifth of --n): round trips per second of wall time in the table
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

from minloop.bench import loops, options, procs, rows as rows_module  # noqa: E402
from minloop.bench.options import Settings  # noqa: E402


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


def measure(row: rows_module.Row, loop_name: str, settings: Settings) -> dict:
    """One run in a fresh interpreter: the bench's sample (rate: round trips/s)."""
    n = rows_module.other_size(row, settings.quick)
    answer = procs.run_json([sys.executable, __file__, "--child", loop_name, str(row.conns),
                             "--n", str(n), "--size", str(row.size),
                             "--window", str(row.depth)], settings.timeout)
    if "error" in answer:
        return answer
    return dict(answer, rate=n / answer["seconds"], problems=[])


# Without --quick: 5 rounds.
FULL = options.Profile(rounds=5)


def main(argv: list[str] | None = None) -> int:
    ap = options.Parser(description=__doc__.split("\n\n")[0])
    command = options.Command(ap, FULL, timed=False, pinned=False,
                              only_help="of the rows --clients makes")
    ap.add_argument("--n", type=int, default=200_000, help="round trips per run")
    ap.add_argument("--size", type=int, default=64, help="datagram size in bytes")
    ap.add_argument("--clients", default="1,10", help="client endpoint counts, a row each")
    ap.add_argument("--window", type=int, default=1, help="datagrams in flight per client")
    ap.add_argument("--child", nargs=2, metavar=("LOOP", "CLIENTS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], args.n, int(args.child[1]), args.window, args.size)
        return 0
    try:
        clients = [int(c) for c in args.clients.split(",")]
    except ValueError:
        ap.error("--clients takes comma-separated numbers")
    if min([args.n, args.size, args.window] + clients) < 1:
        ap.error("--n, --size, --window and --clients must be at least 1")

    n = args.n  # --quick: a fifth of it (measure())
    window = f"-w{args.window}" if args.window > 1 else ""
    table = [rows_module.Row(f"udp-inproc-{args.size}b-s{c}{window}", "other",
                             f"{n} round trips of {args.size}-byte datagrams, {c} client "
                             f"endpoint(s) with {args.window} in flight each, server and "
                             f"clients in one loop", True, kind="udp-inproc", n=n, conns=c,
                             size=args.size, depth=args.window, per="round trips")
             for c in clients]
    return command.run(args, command.select(args, table), measure=measure,
                       pin=procs.Pinning(False, "not pinned"))


if __name__ == "__main__":
    sys.exit(options.quiet_on_broken_pipe(main))
