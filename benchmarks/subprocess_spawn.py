"""Subprocess spawn + wait: processes per second through create_subprocess_exec.

Two workloads, both starting `true` (stdio to /dev/null unless --pipes):
  sequential  -- one at a time: spawn, wait, next (latency of the whole
                 path: fork/exec, exit notification, pipe set-up);
  concurrent  -- C at once, N in all: asyncio.gather over batches of C.

    python benchmarks/subprocess_spawn.py [--rounds 5] [--n 300]
                                          [--concurrency 50] [--pipes]
                                          [--loops asyncio,minloop,uvloop]

Each measurement runs in a fresh interpreter; rounds interleave the loops;
cells are medians of the rounds: processes per second (wall clock; higher is
better) and the parent's CPU time per process (user + system, all its
threads; lower is better -- the steadier measure on a busy machine).
Most of the time is the kernel's fork/exec and the child's own run, the same
for every loop: the differences are the loops' exit notification (asyncio's
child watcher thread, uvloop's SIGCHLD, minloop's pidfd) and pipe set-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from minloop.bench import loops  # noqa: E402

PROGRAM = shutil.which('true') or '/bin/true'


async def spawn_one(pipes: bool) -> int:
    if pipes:
        proc = await asyncio.create_subprocess_exec(
            PROGRAM, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        await proc.communicate()
        return proc.returncode
    proc = await asyncio.create_subprocess_exec(
        PROGRAM, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    return await proc.wait()


async def sequential(n: int, pipes: bool) -> None:
    for _ in range(n):
        assert await spawn_one(pipes) == 0


async def concurrent(n: int, concurrency: int, pipes: bool) -> None:
    left = n
    while left:
        batch = min(concurrency, left)
        codes = await asyncio.gather(*(spawn_one(pipes) for _ in range(batch)))
        assert codes == [0] * batch
        left -= batch


def child(loop_name: str, workload: str, n: int, concurrency: int,
          pipes: bool) -> None:
    factory = loops.factory(loop_name)
    for count in (min(n, 20), n):   # a warm-up run, then the measured one
        lp = factory()
        try:
            if workload == 'sequential':
                work = sequential(count, pipes)
            else:
                work = concurrent(count, concurrency, pipes)
            t0, c0 = time.perf_counter(), time.process_time()
            lp.run_until_complete(work)
            seconds = time.perf_counter() - t0
            cpu = time.process_time() - c0
        finally:
            lp.close()
    print(json.dumps({"rate": n / seconds, "cpu_us": cpu / n * 1e6}))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--pipes", action="store_true",
                    help="stdin/stdout/stderr as pipes (communicate())")
    ap.add_argument("--loops", default="asyncio,minloop,uvloop")
    ap.add_argument("--child", nargs=2, metavar=("LOOP", "WORKLOAD"))
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.n, args.concurrency,
              args.pipes)
        return 0

    names = []
    for name in args.loops.split(","):
        try:
            loops.factory(name)
        except loops.Unavailable as exc:
            print(f"skipping {name}: {exc}")
        else:
            names.append(name)
    workloads = ("sequential", "concurrent")
    results = {(name, w): [] for name in names for w in workloads}
    for _ in range(args.rounds):
        for w in workloads:
            for name in names:
                cmd = [sys.executable, __file__, "--child", name, w,
                       "--n", str(args.n),
                       "--concurrency", str(args.concurrency)]
                if args.pipes:
                    cmd.append("--pipes")
                out = subprocess.run(cmd, capture_output=True, text=True,
                                     check=True)
                results[(name, w)].append(
                    json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"subprocess spawn+wait of {PROGRAM}: {args.n} processes, "
          f"{'pipes' if args.pipes else '/dev/null stdio'}, concurrent = "
          f"{args.concurrency} at once; median of {args.rounds} rounds; "
          f"'minloop vs X' > 1 means minloop is better"
          f" (Python {sys.version.split()[0]})")
    others = [n for n in names if n != "minloop"] if "minloop" in names else []
    for metric, title, fmt in (("rate", "processes/s (higher is better)", "{:.0f}"),
                               ("cpu_us", "parent CPU us per process (lower is better)",
                                "{:.0f}")):
        print(f"\n{title}:")
        header = "| workload | " + " | ".join(names)
        header += "".join(f" | minloop vs {n}" for n in others)
        print(header + " |")
        print("|" + "---|" * header.count("|"))
        for w in workloads:
            runs = {n: [r[metric] for r in results[(n, w)]] for n in names}
            med = {n: statistics.median(runs[n]) for n in names}
            row = f"| {w} | " + " | ".join(fmt.format(med[n]) for n in names)
            if metric == "rate":
                row += "".join(f" | {med['minloop'] / med[n]:.2f}x" for n in others)
            else:
                row += "".join(f" | {med[n] / med['minloop']:.2f}x" for n in others)
            print(row + " |")
            print("    spread: " + ", ".join(
                f"{n} {fmt.format(min(runs[n]))}-{fmt.format(max(runs[n]))}"
                for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
