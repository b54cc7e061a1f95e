"""Subprocess spawn + wait: processes per second through create_subprocess_exec.

    python -m minloop.bench.spawn LOOP N [--concurrency C] [--pipes] [--cpu N]
        -> {"seconds", "cpu", "rate", "cpu_us"} | {"unsupported": why} | {"error": what}

Starts `true` N times (stdio to /dev/null unless --pipes), in one of two ways:
  sequential  (no --concurrency): spawn, wait, next -- the latency of the
              whole path: fork/exec, exit notification, pipe set-up;
  concurrent  (--concurrency C): C at once, asyncio.gather over batches of C.

One fresh interpreter per measurement; a warm-up of 20 processes first.
The figures are processes per second (wall clock) and the parent's CPU
time per process (user + system, all its threads: the steadier figure on a
busy machine).  Most of the time is the kernel's fork/exec and the child's
own run, the same for every loop: the differences are the loops' exit
notification (asyncio's child watcher thread, uvloop's SIGCHLD, minloop's
pidfd) and pipe set-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time

from . import loops

PROGRAM = shutil.which("true") or "/bin/true"
WARMUP = 20


async def spawn_one(pipes: bool) -> int:
    if pipes:
        proc = await asyncio.create_subprocess_exec(
            PROGRAM, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        await proc.communicate()
        return proc.returncode
    proc = await asyncio.create_subprocess_exec(
        PROGRAM, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    return await proc.wait()


async def sequential(n: int, pipes: bool) -> None:
    for _ in range(n):
        code = await spawn_one(pipes)
        if code != 0:
            raise RuntimeError(f"{PROGRAM} exited with {code}")


async def concurrent(n: int, concurrency: int, pipes: bool) -> None:
    left = n
    while left:
        batch = min(concurrency, left)
        codes = await asyncio.gather(*(spawn_one(pipes) for _ in range(batch)))
        if codes != [0] * batch:
            raise RuntimeError(f"{PROGRAM} exited with {sorted(set(codes))}")
        left -= batch


def run(loop_factory, n: int, concurrency: int = 0, pipes: bool = False) -> dict:
    """Warm up, then time n spawns on a new loop from loop_factory."""
    for count in (min(n, WARMUP), n):
        loop = loop_factory()
        try:
            work = (concurrent(count, concurrency, pipes) if concurrency
                    else sequential(count, pipes))
            t0, c0 = time.perf_counter(), time.process_time()
            loop.run_until_complete(work)
            seconds = time.perf_counter() - t0
            cpu = time.process_time() - c0
        finally:
            loop.close()
    return {"seconds": seconds, "cpu": cpu, "rate": n / seconds, "cpu_us": cpu / n * 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("loop")
    parser.add_argument("n", type=int)
    parser.add_argument("--concurrency", type=int, default=0,
                        help="processes at once (default: one after the other)")
    parser.add_argument("--pipes", action="store_true",
                        help="stdin/stdout/stderr as pipes (communicate())")
    parser.add_argument("--cpu", type=int, help="pin this process to CPU N")
    args = parser.parse_args(argv)
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    result = loops.answer_of(
        lambda: run(loops.factory(args.loop), args.n, args.concurrency, args.pipes),
        "from subprocess_exec")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
