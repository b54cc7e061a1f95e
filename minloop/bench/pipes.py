"""Bytes per second through an os.pipe(), pipe transport to pipe transport.

    python -m minloop.bench.pipes LOOP MIB [--chunk-kb K] [--cpu N]
        -> {"seconds", "bytes", "rate" (MiB/s)} | {"unsupported": why} | {"error": what}

One loop holds both ends: a write pipe transport (connect_write_pipe) sends
MIB mebibytes in K KiB writes, honouring pause_writing/resume_writing; a
read pipe transport (connect_read_pipe) counts them until EOF.  One fresh
interpreter per measurement; a 1 MiB transfer first, untimed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

from . import loops

MiB = 1024 * 1024


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
        self.paused = False

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
    """Seconds to move total bytes (a multiple of chunk_size) through a pipe."""
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
    if received != total:
        raise RuntimeError(f"received {received} of {total} bytes")
    return elapsed


def total_bytes(mib: float, chunk_kb: int) -> int:
    """mib MiB rounded down to whole chunks (at least one)."""
    chunk = chunk_kb * 1024
    return max(chunk, int(mib * MiB) // chunk * chunk)


def run(loop_factory, total: int, chunk_size: int) -> dict:
    for size in (min(total, MiB // chunk_size * chunk_size or chunk_size), total):
        loop = loop_factory()
        try:
            seconds = loop.run_until_complete(transfer(size, chunk_size))
        finally:
            loop.close()
    return {"seconds": seconds, "bytes": total, "rate": total / seconds / MiB}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("loop")
    parser.add_argument("mib", type=float)
    parser.add_argument("--chunk-kb", type=int, default=64)
    parser.add_argument("--cpu", type=int, help="pin this process to CPU N")
    args = parser.parse_args(argv)
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    result = loops.answer_of(
        lambda: run(loops.factory(args.loop), total_bytes(args.mib, args.chunk_kb),
                    args.chunk_kb * 1024),
        "from connect_*_pipe")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
