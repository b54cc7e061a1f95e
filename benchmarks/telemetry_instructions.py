"""What the loop's telemetry costs, in instructions per operation (callgrind).

    python benchmarks/telemetry_instructions.py OFF_BUILD ON_BUILD \
        [--rows call_soon_chain,call_later_cancel,timers_fire_due,tasks_sleep_twice]

OFF_BUILD and ON_BUILD are source trees built in place (`setup.py build_ext
--inplace`), the first with MINLOOP_NO_TELEMETRY=1.  Each row is a bench
workload (minloop/bench/workloads.py) run under `valgrind --tool=callgrind`
at two sizes in each build; an operation's cost is the difference between
the two runs divided by the difference in size (so start-up and imports
cancel out), counted over the whole process and over minloop's own .so
files alone (the telemetry lives there; the interpreter's share moves by a
few tens of instructions from run to run).  Wall-clock time on a shared
machine says little about a change of a few instructions; these counts do.

With --arm-stall, both sides run ON_BUILD's tree (pass the same tree
twice, or two trees) and the second arms loop.set_stall_handler() with a
1 s threshold: what the armed stall detector costs per callback.  The
watchdog thread's own wake-ups (every 20 ms, whatever the work) are in
the totals too; they scale with run time, not with the row's size.

`run WORKLOAD N` (used by the above) runs one workload once on minloop.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

# row: (small n, large n)
SIZES = {
    "call_soon_chain": (20_000, 60_000),
    "call_later_cancel": (10_000, 30_000),
    "timers_fire_due": (20_000, 60_000),
    "tasks_sleep_twice": (10_000, 30_000),
}


def run_one(workload, n):
    from minloop.bench import workloads
    import minloop
    print(f"minloop from {os.path.dirname(minloop.__file__)}", file=sys.stderr)
    factory = minloop.new_event_loop
    if os.environ.get("MINLOOP_BENCH_ARM_STALL"):
        def factory():
            loop = minloop.new_event_loop()
            loop.set_stall_handler(print, 1.0)
            return loop
    workloads.measure(workloads.WORKLOADS[workload], factory, n)


def callgrind(build, workload, n, outdir, arm_stall=False):
    out = os.path.join(outdir, f"cg.{os.path.basename(build)}.{workload}.{n}.{int(arm_stall)}")
    env = dict(os.environ, PYTHONPATH=build, PYTHONHASHSEED="0")
    if arm_stall:
        env["MINLOOP_BENCH_ARM_STALL"] = "1"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    sys.executable, os.path.abspath(__file__), "run", workload, str(n)],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    text = subprocess.run(["callgrind_annotate", "--auto=no", "--inclusive=no",
                           "--threshold=100", out],
                          capture_output=True, text=True, check=True).stdout
    total = ours = 0
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(.*)$", line)
        if not m:
            continue
        count, where = int(m.group(1).replace(",", "")), m.group(2)
        if "PROGRAM TOTALS" in where:
            total = count
        elif build + "/" in where:
            # minloop's own: its .so files, or code inlined into them from
            # its headers (named by file, with no object after them).
            ours += count
    return total, ours


def compare(off, on, rows, arm_stall=False):
    with tempfile.TemporaryDirectory() as outdir:
        print(f"{'row':20} {'build':5} {'all/op':>9} {'minloop/op':>11}")
        for row in rows:
            small, large = SIZES[row]
            per = {}
            for name, build in (("off", off), ("on", on)):
                arm = arm_stall and name == "on"
                a = callgrind(build, row, small, outdir, arm)
                b = callgrind(build, row, large, outdir, arm)
                per[name] = [(y - x) / (large - small) for x, y in zip(a, b)]
                print(f"{row:20} {name:5} {per[name][0]:9.1f} {per[name][1]:11.1f}", flush=True)
            d_all = per["on"][0] - per["off"][0]
            d_ours = per["on"][1] - per["off"][1]
            print(f"{row:20} {'diff':5} {d_all:+9.1f} {d_ours:+11.1f}"
                  f"   ({100 * d_all / per['off'][0]:+.2f}% of all)", flush=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        run_one(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("off", help="a tree built with MINLOOP_NO_TELEMETRY=1")
    parser.add_argument("on", help="a tree built with telemetry")
    parser.add_argument("--rows", default=",".join(SIZES))
    parser.add_argument("--arm-stall", action="store_true",
                        help="arm the stall detector on the second side")
    args = parser.parse_args()
    compare(os.path.abspath(args.off), os.path.abspath(args.on), args.rows.split(","),
            args.arm_stall)


if __name__ == "__main__":
    main()
