"""loop.sendfile(): a file over loopback TCP to a receiver in another process.

    python -m minloop.bench.sendfile --receiver [--cpu N]
    python -m minloop.bench.sendfile --send LOOP PORT FILE WARMUP_FILE [--cpu N]
        -> {"seconds", "cpu", "bytes", "how", "rate" (MB/s)} | {"error": what}

The receiver (not an event loop, so that it is not the bottleneck) prints
its port, then accepts connections one at a time, reads each until EOF with
recv_into() into one buffer and answers with the byte count; an empty
connection stops it.  The sender, the loop under test in a fresh
interpreter, connects with create_connection(), sends the file with
loop.sendfile(transport, file), half-closes, and waits for the count: the
time is from the call to the count's arrival, so it covers every byte.  A
1 MB file goes first, untimed.

A loop without loop.sendfile() (uvloop raises NotImplementedError) sends the
file the way libraries do then (aiohttp's fallback): 256 KiB reads in the
default executor, transport.write(), and a wait while the transport's
buffer is above its high-water mark.  "how" names the path the loop took.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import shutil
import socket
import sys
import tempfile
import time

from . import loops, procs

MB = 1024 * 1024
FALLBACK_CHUNK = 256 * 1024


# --- the receiver (its own process) -------------------------------------------


def receiver() -> None:
    """Say the listening port (as procs.ServerProcess expects it: one JSON
    line), then serve connections one at a time."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        print(json.dumps({"ready": True, "host": "127.0.0.1",
                          "port": server.getsockname()[1], "pid": os.getpid()}), flush=True)
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


def stop_receiver(port: int) -> None:
    socket.create_connection(("127.0.0.1", port)).close()


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
    return {"seconds": seconds, "cpu": cpu, "bytes": size, "how": how,
            "rate": size / MB / seconds}


def send(loop_name: str, port: int, path: str, warmup: str) -> dict:
    factory = loops.factory(loop_name)
    for p in (warmup, path):   # a warm-up run, then the measured one
        lp = factory()
        try:
            result = lp.run_until_complete(send_file(port, p))
        finally:
            lp.close()
    return result


# --- the files -------------------------------------------------------------------


def make_file(path: str, size: int) -> None:
    block = os.urandom(MB)
    with open(path, "wb") as f:
        for i in range(size // MB):
            # Not one block repeated: every MB differs.
            f.write(i.to_bytes(8, "big") + block[8:])
        f.write(block[:size % MB])


_files: dict = {}  # size -> (file, warm-up file), made once per driver process


def files(size: int, where: str | None = None) -> tuple[str, str]:
    """A file of size bytes and a 1 MB warm-up file, removed at exit."""
    if size not in _files:
        tmp = tempfile.mkdtemp(prefix="minloop-sendfile-", dir=where)
        atexit.register(shutil.rmtree, tmp, True)
        path, warmup = os.path.join(tmp, "file.bin"), os.path.join(tmp, "warmup.bin")
        make_file(path, size)
        make_file(warmup, min(size, MB))
        _files[size] = path, warmup
    return _files[size]


# --- the driver's side: one measurement ------------------------------------------


def measure(loop_name: str, size: int, pin: procs.Pinning, where: str | None = None) -> dict:
    """Send a file of size bytes from LOOP in a fresh process to a fresh
    receiver: the sample {"rate" (MB/s), "seconds", "cpu", "how"}, or {"error"}."""
    path, warmup = files(size, where)
    try:
        recv = procs.ServerProcess(procs.module_command(
            "minloop.bench.sendfile", "--receiver", *pin.args(pin.client)))
    except (procs.ServerProcess.Failed, procs.ServerProcess.Unsupported) as exc:
        return {"error": f"receiver: {exc}"}
    try:
        answer = procs.run_json(procs.module_command(
            "minloop.bench.sendfile", "--send", loop_name, str(recv.address["port"]), path,
            warmup, *pin.args(pin.server), root=loops.root_of(loop_name)), 120)
    finally:
        try:
            stop_receiver(recv.address["port"])
        except OSError:
            pass
        recv.stop()
    if "error" not in answer:
        answer["problems"] = recv.problems()
    return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--receiver", action="store_true")
    parser.add_argument("--send", nargs=4, metavar=("LOOP", "PORT", "FILE", "WARMUP"))
    parser.add_argument("--cpu", type=int, help="pin this process to CPU N")
    args = parser.parse_args(argv)
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    if args.receiver:
        receiver()
        return 0
    if not args.send:
        parser.error("one of --receiver and --send is required")
    name, port, path, warmup = args.send
    try:
        result = send(name, int(port), path, warmup)
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
