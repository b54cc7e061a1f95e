"""UDP echo: round trips per second through create_datagram_endpoint.

One server endpoint echoes every datagram to its sender; C client endpoints
(in the same loop) each keep W datagrams in flight and send the next one as
each answer arrives, until N answers have come back in all.  Server and
clients are protocol-level (no tasks or futures per datagram), so the time is
the transport's and the loop's.

    python benchmarks/udp_echo.py [--rounds 5] [--n 200000] [--size 64]
                                  [--clients 1,10] [--window 1]
                                  [--loops asyncio,minloop,uvloop]

Each measurement runs in a fresh interpreter; rounds interleave the loops;
cells are medians of the rounds, of wall time and of the process's CPU time
(user + system: the kernel's loopback work runs in the sending syscall, so
on a busy machine CPU time is the steadier measure).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import loops  # noqa: E402


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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--clients", default="1,10")
    ap.add_argument("--window", type=int, default=1)
    ap.add_argument("--loops", default="asyncio,minloop,uvloop")
    ap.add_argument("--child", nargs=2, metavar=("LOOP", "CLIENTS"))
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.n, int(args.child[1]), args.window, args.size)
        return 0

    names = args.loops.split(",")
    client_counts = [int(c) for c in args.clients.split(",")]
    times = {(name, c): [] for name in names for c in client_counts}
    for _ in range(args.rounds):
        for c in client_counts:
            for name in names:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", name, str(c),
                     "--n", str(args.n), "--size", str(args.size),
                     "--window", str(args.window)],
                    capture_output=True, text=True, check=True)
                times[(name, c)].append(
                    json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"UDP echo: {args.n} round trips, {args.size}-byte datagrams, "
          f"window {args.window}, median of {args.rounds} rounds "
          f"(Python {sys.version.split()[0]})")
    others = [n for n in names if n != "minloop"] if "minloop" in names else []
    for metric in ("seconds", "cpu"):
        print(f"\n{'wall' if metric == 'seconds' else 'CPU'} time:")
        header = "| clients | " + " | ".join(f"{n} ms" for n in names)
        header += "".join(f" | vs {n}" for n in others)
        print(header + " |")
        print("|" + "---|" * header.count("|"))
        for c in client_counts:
            runs = {n: [r[metric] for r in times[(n, c)]] for n in names}
            med = {n: statistics.median(runs[n]) for n in names}
            row = f"| {c} | " + " | ".join(f"{med[n] * 1e3:.1f}" for n in names)
            row += "".join(f" | {med[n] / med['minloop']:.2f}x" for n in others)
            print(row + " |")
            print("    spread ms: " + ", ".join(
                f"{n} {min(runs[n]) * 1e3:.0f}-{max(runs[n]) * 1e3:.0f}"
                for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
