"""loop.sendfile(): a 100 MB file over loopback TCP, MB/s.

A receiver in another process (so that it is not the bottleneck) accepts
connections, reads each until EOF with recv_into() into one buffer, and
answers with the byte count.  The sender, the loop under test in a fresh
interpreter, connects with create_connection(), sends the file with
loop.sendfile(transport, file), half-closes, and waits for the count: the
time is from the call to the count's arrival, so it covers every byte.

A loop without loop.sendfile() (uvloop raises NotImplementedError) sends the
file the way libraries do then (aiohttp's fallback): 256 KiB reads in the
default executor, transport.write(), and a wait while the transport's
buffer is above its high-water mark.  The report names the path each loop
took.

    python benchmarks/sendfile_bench.py [--rounds 5] [--size-mb 100]
                                        [--loops asyncio,minloop,uvloop]
                                        [--dir DIR]

Rounds interleave the loops; cells are medians over the rounds of wall time
(as MB/s) and of the sender process's CPU time (user + system).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import loops  # noqa: E402

MB = 1024 * 1024
FALLBACK_CHUNK = 256 * 1024


# --- the receiver (its own process) ------------------------------------------

def receiver() -> None:
    """Print the listening port, then serve connections one at a time."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        print(server.getsockname()[1], flush=True)
        buf = bytearray(4 * MB)
        while True:
            conn, _ = server.accept()
            with conn:
                total = 0
                while True:
                    n = conn.recv_into(buf)
                    if not n:
                        break
                    total += n
                if total == 0:
                    return   # an empty connection: the run is over
                conn.sendall(total.to_bytes(8, "big"))


# --- the sender (the loop under test, its own process) -------------------------

class Sender(asyncio.Protocol):
    def __init__(self, loop):
        self.reply = bytearray()
        self.done = loop.create_future()
        self.can_write = None
        self.loop = loop

    def data_received(self, data):
        self.reply += data

    def eof_received(self):
        if not self.done.done():
            self.done.set_result(int.from_bytes(self.reply, "big"))

    def connection_lost(self, exc):
        if not self.done.done():
            self.done.set_exception(exc or ConnectionError("closed early"))

    def pause_writing(self):
        self.can_write = self.loop.create_future()

    def resume_writing(self):
        self.can_write.set_result(None)
        self.can_write = None


async def read_and_write(loop, tr, proto, f) -> int:
    """What libraries do without loop.sendfile(): read, write, wait."""
    total = 0
    while True:
        chunk = await loop.run_in_executor(None, f.read, FALLBACK_CHUNK)
        if not chunk:
            return total
        tr.write(chunk)
        total += len(chunk)
        if proto.can_write is not None:
            await proto.can_write


async def send_file(port: int, path: str) -> dict:
    loop = asyncio.get_running_loop()
    tr, proto = await loop.create_connection(lambda: Sender(loop), "127.0.0.1", port)
    with open(path, "rb") as f:
        t0 = time.perf_counter()
        c0 = time.process_time()
        try:
            sent = await loop.sendfile(tr, f)
            how = "sendfile"
        except NotImplementedError:
            sent = await read_and_write(loop, tr, proto, f)
            how = "read+write"
        tr.write_eof()
        received = await proto.done
        seconds = time.perf_counter() - t0
        cpu = time.process_time() - c0
    tr.close()
    size = os.path.getsize(path)
    if not sent == received == size:
        raise RuntimeError(f"sent {sent}, received {received}, file {size}")
    return {"seconds": seconds, "cpu": cpu, "how": how}


def child(loop_name: str, port: int, path: str, warmup: str) -> None:
    factory = loops.factory(loop_name)
    for p in (warmup, path):   # a warm-up run, then the measured one
        lp = factory()
        try:
            result = lp.run_until_complete(send_file(port, p))
        finally:
            lp.close()
    print(json.dumps(result))


# --- the driver ---------------------------------------------------------------------

def make_file(path: str, size: int) -> None:
    block = os.urandom(MB)
    with open(path, "wb") as f:
        for i in range(size // MB):
            # Not one block repeated: every MB differs.
            f.write(i.to_bytes(8, "big") + block[8:])
        f.write(block[:size % MB])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--loops", default="asyncio,minloop,uvloop")
    ap.add_argument("--dir", default=None, help="where to write the file")
    ap.add_argument("--receiver", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=4, metavar=("LOOP", "PORT", "FILE", "WARMUP"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.receiver:
        receiver()
        return 0
    if args.child:
        name, port, path, warmup = args.child
        child(name, int(port), path, warmup)
        return 0

    names = []
    for name in args.loops.split(","):
        try:
            loops.factory(name)
            names.append(name)
        except loops.Unavailable as exc:
            print(f"skipping {name}: {exc}")
    size = args.size_mb * MB
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = os.path.join(tmp, "file.bin")
        warmup = os.path.join(tmp, "warmup.bin")
        make_file(path, size)
        make_file(warmup, MB)
        recv = subprocess.Popen([sys.executable, __file__, "--receiver"],
                                stdout=subprocess.PIPE, text=True)
        try:
            port = recv.stdout.readline().strip()
            runs = {name: [] for name in names}
            for _ in range(args.rounds):
                for name in names:
                    out = subprocess.run(
                        [sys.executable, __file__, "--child", name, port, path, warmup],
                        capture_output=True, text=True, check=True)
                    runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
        finally:
            # An empty connection tells the receiver to stop.
            socket.create_connection(("127.0.0.1", int(port))).close()
            recv.wait(timeout=10)

    print(f"loop.sendfile, {args.size_mb} MB file over loopback TCP, median of "
          f"{args.rounds} rounds (Python {sys.version.split()[0]})")
    header = "| loop | path | MB/s | wall ms | sender CPU ms |"
    if "minloop" in names:
        header += " minloop faster by |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    med = {n: statistics.median(r["seconds"] for r in runs[n]) for n in names}
    for name in names:
        wall = med[name]
        cpu = statistics.median(r["cpu"] for r in runs[name])
        how = "/".join(sorted({r["how"] for r in runs[name]}))
        row = (f"| {name} {loops.version(name)} | {how} | {args.size_mb / wall:.0f} | "
               f"{wall * 1e3:.0f} | {cpu * 1e3:.0f} |")
        if "minloop" in names:
            # This loop's time over minloop's: > 1 means minloop is faster.
            row += f" {wall / med['minloop']:.2f}x |"
        print(row)
    for name in names:
        secs = [r["seconds"] for r in runs[name]]
        print(f"    {name} spread: {args.size_mb / max(secs):.0f}-{args.size_mb / min(secs):.0f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
