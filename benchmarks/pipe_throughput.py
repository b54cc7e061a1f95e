"""Bytes per second through an os.pipe(), pipe transport to pipe transport.

    python benchmarks/pipe_throughput.py [--mb 100] [--chunk-kb 64]
                                         [--rounds 5] [--loops asyncio,minloop,uvloop]

One loop holds both ends: a write pipe transport (connect_write_pipe) sends
--mb megabytes in --chunk-kb writes, honouring pause_writing/resume_writing;
a read pipe transport (connect_read_pipe) counts them until EOF.  Each round
runs every loop once, in turn, so drift of the machine falls on all of them;
the table shows the median of the rounds, and ratios are minloop's speed over
each other loop's (above 1: minloop is faster).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from minloop.bench import loops  # noqa: E402


class Sink(asyncio.Protocol):
    def __init__(self, done: asyncio.Future) -> None:
        self.received = 0
        self.done = done

    def data_received(self, data: bytes) -> None:
        self.received += len(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.done.set_result(self.received)


class Source(asyncio.BaseProtocol):
    """Writes `total` bytes in `chunk`-sized writes while not paused."""

    def __init__(self, total: int, chunk: bytes) -> None:
        self.left = total
        self.chunk = chunk
        self.transport: asyncio.WriteTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def pump(self) -> None:
        # Until the transport pauses us (its buffer passed the high mark).
        self.paused = False
        while self.left > 0 and not self.paused:
            self.transport.write(self.chunk)
            self.left -= len(self.chunk)
        if self.left <= 0:
            # Not close() from inside resume_writing(): asyncio's write pipe
            # transport would then drop what this call queued.
            asyncio.get_running_loop().call_soon(self.transport.close)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.pump()


async def transfer(total: int, chunk_size: int) -> float:
    loop = asyncio.get_running_loop()
    r, w = os.pipe()
    done = loop.create_future()
    await loop.connect_read_pipe(lambda: Sink(done), open(r, "rb", 0))
    source = Source(total, b"x" * chunk_size)
    await loop.connect_write_pipe(lambda: source, open(w, "wb", 0))
    start = time.perf_counter()
    source.pump()
    received = await done
    elapsed = time.perf_counter() - start
    assert received == total, (received, total)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--chunk-kb", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loops", default="asyncio,minloop,uvloop")
    args = parser.parse_args()

    total = args.mb * 1024 * 1024
    total -= total % (args.chunk_kb * 1024)
    factories = {}
    for name in args.loops.split(","):
        try:
            factories[name] = loops.factory(name)
        except loops.Unavailable as exc:
            print(f"{name}: unavailable ({exc})")
    times: dict[str, list[float]] = {name: [] for name in factories}
    for _ in range(args.rounds):
        for name, factory in factories.items():
            loop = factory()
            try:
                times[name].append(loop.run_until_complete(
                    transfer(total, args.chunk_kb * 1024)))
            finally:
                loop.close()

    print(f"{total / 2**20:.0f} MiB through a pipe in {args.chunk_kb} KiB writes, "
          f"median of {args.rounds} rounds (Python {sys.version.split()[0]})")
    speeds = {name: total / statistics.median(t) / 2**20 for name, t in times.items()}
    reference = speeds.get("minloop")
    for name, speed in speeds.items():
        spread = (max(times[name]) - min(times[name])) / statistics.median(times[name])
        line = f"  {name:8} {speed:9.0f} MiB/s  (spread {spread:.0%})"
        if reference is not None and name != "minloop":
            line += f"   minloop/{name} = {reference / speed:.2f}"
        print(line)


if __name__ == "__main__":
    main()
