"""Where one network row of ``python -m minloop bench`` spends its server's time, per round trip.

    python benchmarks/row_profile.py --row http-c16 --loop minloop --measure perf
    python benchmarks/row_profile.py --row udp-1k-s10 --loop rloop --measure callgrind --functions 30

The row's own server (minloop/bench/servers.py, pinned to CPU 0) against the
row's own load generator (minloop/bench/client.py, pinned to CPU 1), with the
row's connections, message size and depth.

--measure perf: --rounds runs of --duration seconds (1), no warm-up, with
`perf stat -p` attached to the server (no slowdown) and `perf stat` around
the load generator: syscalls by name (the syscalls:sys_enter_* tracepoints;
needs tracefs mounted), task-clock, context switches and page faults of
both, each run's over its own counted round trips; and, from the
generator's answer, the server's CPU per round trip and the generator's CPU
share (near 100%: the generator, not the server, set the pace).  Timing
figures are only as good as the machine is quiet.

--measure callgrind: two runs of the server under valgrind --tool=callgrind,
--duration seconds timed (3) and three times that; instructions are the
difference of the two over the difference of their counted round trips (so
that start-up and connecting cancel out), by object (the interpreter, the
loop's .so files, libc ...) and, with --functions N, the N functions whose
counts differ most.  Under valgrind the server is some 50x slower, so the
generator is never the bottleneck there: more events per poll than in the
row.

benchmarks/server_instructions.py measures the same with a fixed-count
client of its own; this script runs the bench's client, and so also the
rows that script has no client for (unix, udp, 64 KiB messages).
"""

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import client as client_module  # noqa: E402
from minloop.bench import rows as rows_module  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# callgrind_annotate's output read as that script reads it.
from server_instructions import _callgrind_by_object  # noqa: E402

SERVER_CPU, CLIENT_CPU = 0, 1
PERF_EVENTS = "task-clock,context-switches,page-faults,syscalls:sys_enter_*"


def _start_server(row, loop, tool, path):
    argv = [*tool, sys.executable, "-m", "minloop.bench.servers", "--loop", loop,
            "--kind", row.kind, "--size", str(row.size), "--cpu", str(SERVER_CPU)]
    if path:
        argv += ["--path", path]
    server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, cwd=os.path.dirname(os.path.dirname(
                                  os.path.abspath(__file__))))
    line = server.stdout.readline()
    ready = json.loads(line)
    if not ready.get("ready"):
        sys.exit(f"server: {line}")
    return server, ready


def _drive(row, ready, duration, warmup, wrap=()):
    argv = [*wrap, sys.executable, client_module.__file__, "--address", "-", "--mode", row.mode,
            "--conns", str(row.conns), "--size", str(row.size), "--depth", str(row.depth),
            "--duration", f"{duration:g}", "--warmup", f"{warmup:g}",
            "--cpu", str(CLIENT_CPU)]
    proc = subprocess.run(argv, input=json.dumps(ready) + "\n", capture_output=True,
                          text=True)
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    if "error" in answer:
        sys.exit(f"load generator: {answer['error']}")
    return answer


def _stop_server(server):
    server.stdin.close()   # servers.py stops its loop at stdin's EOF
    end = server.stdout.read()
    server.wait(timeout=600)
    return end


def _perf_counts(path):
    counts = collections.Counter()
    with open(path) as f:
        for line in f:
            fields = line.strip().split(",")
            if len(fields) < 3 or not fields[0] or fields[0].startswith("#"):
                continue
            try:
                value = float(fields[0])
            except ValueError:
                continue   # "<not counted>"
            name = fields[2].removeprefix("syscalls:sys_enter_")
            if value:
                counts[name] += value
    return counts


def _one_run(row, args, duration, tmp):
    path = os.path.join(tmp, "row.sock") if row.kind == "unix" else None
    out = os.path.join(tmp, f"{args.measure}.{duration:g}")
    tool = []
    if args.measure == "callgrind":
        tool = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    server, ready = _start_server(row, args.loop, tool, path)
    perf = None
    wrap = ()
    try:
        if args.measure == "perf":
            perf = subprocess.Popen(["perf", "stat", "-x", ",", "-o", out, "-e", PERF_EVENTS,
                                     "-p", str(ready["pid"])], stderr=subprocess.DEVNULL)
            # The load generator counted whole, its start-up too (a bare
            # interpreter: some hundreds of syscalls, against tens of
            # thousands of round trips).
            wrap = ("perf", "stat", "-x", ",", "-o", out + ".client", "-e", PERF_EVENTS, "--")
            time.sleep(1.0)   # attached before the first connection
        answer = _drive(row, ready, duration, args.warmup, wrap)
    finally:
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait()
        _stop_server(server)
    if args.measure == "perf":
        counts, functions = _perf_counts(out), _perf_counts(out + ".client")
    else:
        counts, functions = _callgrind_by_object(out)
    return answer, counts, functions


def _print_perf(row, args, runs):
    """Each run's own figures over its counted round trips: with no warm-up,
    what the server does outside the counted window is its connections'
    set-up and last round trips, a few dozen syscalls."""
    per = "request" if row.mode == "http" else "round trip"
    print(f"{row.id} on {args.loop} (Python {sys.version.split()[0]}): perf stat, per {per}, "
          f"{len(runs)} runs of {runs[0][0]['seconds']:.0f} s")
    names = ["rate /s", "server CPU us (client's /proc reading)", "load generator CPU share",
             "server task-clock us", "server context switches", "server page faults"]
    rows = {n: [] for n in names}
    server_calls, client_calls = collections.Counter(), collections.Counter()
    for answer, server, client in runs:
        rts = answer["round_trips"]
        rows["rate /s"].append(f"{rts / answer['seconds']:,.0f}")
        rows["server CPU us (client's /proc reading)"].append(
            f"{answer['server_cpu'] / rts * 1e6:.2f}" if answer.get("server_cpu") else "-")
        rows["load generator CPU share"].append(f"{answer['client_cpu'] / answer['seconds']:.0%}")
        rows["server task-clock us"].append(f"{server['task-clock'] * 1e3 / rts:.2f}")
        rows["server context switches"].append(f"{server['context-switches'] / rts:.4f}")
        rows["server page faults"].append(f"{server['page-faults'] / rts:.4f}")
        for k, v in server.items():
            if k not in ("task-clock", "context-switches", "page-faults"):
                server_calls[k] += 0
        for k in client:
            if k not in ("task-clock", "context-switches", "page-faults"):
                client_calls[k] += 0
    for k in server_calls:
        rows[f"server {k}"] = [f"{s[k] / a['round_trips']:.4f}" for a, s, _ in runs]
    rows["server syscalls"] = [
        f"{sum(v for k, v in s.items() if k in server_calls) / a['round_trips']:.4f}"
        for a, s, _ in runs]
    rows["client task-clock us"] = [f"{c['task-clock'] * 1e3 / a['round_trips']:.2f}"
                                    for a, _, c in runs]
    rows["client context switches"] = [f"{c['context-switches'] / a['round_trips']:.4f}"
                                       for a, _, c in runs]
    # The generator's start-up (imports, ...) shows as a few syscalls per
    # thousand round trips: lumped together.
    big = [k for k in client_calls
           if max(c[k] / a["round_trips"] for a, _, c in runs) >= 0.005]
    for k in big:
        rows[f"client {k}"] = [f"{c[k] / a['round_trips']:.4f}" for a, _, c in runs]
    rows["client other syscalls"] = [
        f"{sum(v for k, v in c.items() if k in client_calls and k not in big) / a['round_trips']:.4f}"
        for a, _, c in runs]
    for name, values in rows.items():
        if any(v not in ("0.0000", "-") for v in values):
            print(f"  {name:42s} " + "  ".join(f"{v:>8s}" for v in values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row", required=True, help="a net row of python -m minloop bench")
    parser.add_argument("--loop", default="minloop")
    parser.add_argument("--measure", choices=("perf", "callgrind"), required=True)
    parser.add_argument("--duration", type=float, default=None,
                        help="timed seconds of the shorter run (default: 1, callgrind 3)")
    parser.add_argument("--warmup", type=float, default=0.0,
                        help="uncounted seconds first (default 0: counts need no warm-up)")
    parser.add_argument("--functions", type=int, default=0, metavar="N")
    parser.add_argument("--rounds", type=int, default=3, help="perf: runs (default: %(default)s)")
    parser.add_argument("--save", metavar="FILE",
                        help="also write every per-round-trip figure (callgrind: by function too) "
                             "as JSON, for comparing two loops")
    args = parser.parse_args()
    row = rows_module.ROWS.get(args.row)
    if row is None or row.group != "net":
        parser.error(f"--row: not a net row: {args.row}")
    short = args.duration or (3.0 if args.measure == "callgrind" else 1.0)
    if args.measure == "perf":
        with tempfile.TemporaryDirectory(prefix="row-profile-") as tmp:
            runs = [_one_run(row, args, short, tmp) for _ in range(args.rounds)]
        _print_perf(row, args, runs)
        if args.save:
            with open(args.save, "w") as f:
                json.dump({"row": row.id, "loop": args.loop, "measure": args.measure,
                           "python": sys.version.split()[0], "runs": runs}, f, indent=0)
        return
    with tempfile.TemporaryDirectory(prefix="row-profile-") as tmp:
        runs = [_one_run(row, args, d, tmp) for d in (short, 3 * short)]
    (a1, c1, f1), (a2, c2, f2) = runs
    rts = a2["round_trips"] - a1["round_trips"]
    per = "request" if row.mode == "http" else "round trip"
    print(f"{row.id} on {args.loop} (Python {sys.version.split()[0]}): {args.measure}, "
          f"per {per} ({a2['round_trips']} - {a1['round_trips']} counted)")
    for a in (a1, a2):
        rate = a["round_trips"] / a["seconds"]
        server_us = (a["server_cpu"] / a["round_trips"] * 1e6
                     if a.get("server_cpu") is not None else float("nan"))
        print(f"  run of {a['seconds']:.2f} s: {rate:,.0f}/s, server CPU {server_us:.2f} us "
              f"per {per}, load generator {a['client_cpu'] / a['seconds']:.0%} of its core")
    diff = {k: (c2[k] - c1[k]) / rts for k in set(c1) | set(c2)}
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"row": row.id, "loop": args.loop, "measure": args.measure,
                       "python": sys.version.split()[0], "runs": [a1, a2], "per_op": diff,
                       "functions": {k: (f2[k] - f1[k]) / rts for k in set(f1) | set(f2)}},
                      f, indent=0)
    if args.measure == "perf":
        print(f"  {diff.pop('task-clock', 0) * 1e3:10.3f}  task-clock (us)")
        for name in ("context-switches", "page-faults"):
            print(f"  {diff.pop(name, 0):10.4f}  {name}")
        syscalls = {k: v for k, v in diff.items() if abs(v) >= 0.0005}
        for name, v in sorted(syscalls.items(), key=lambda kv: -abs(kv[1])):
            print(f"  {v:10.4f}  {name}")
        print(f"  {sum(syscalls.values()):10.4f}  syscalls")
    else:
        for name, v in sorted(diff.items(), key=lambda kv: -abs(kv[1])):
            if abs(v) >= 0.5:
                print(f"  {v:10.1f}  {name}")
        print(f"  {sum(diff.values()):10.1f}  instructions")
        if args.functions:
            fdiff = {k: (f2[k] - f1[k]) / rts for k in set(f1) | set(f2)}
            print(f"functions ({args.functions} largest):")
            for name, v in sorted(fdiff.items(), key=lambda kv: -abs(kv[1]))[:args.functions]:
                print(f"  {v:10.1f}  {name}")


if __name__ == "__main__":
    main()
