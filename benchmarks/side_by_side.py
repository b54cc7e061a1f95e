"""Two loops serving the same app at the same time on the same CPU: CPU per request.

    python benchmarks/side_by_side.py [--only APP_OR_ROW,...] [--rounds N] [--duration S]
                                      [--peer zuvloop] [--json FILE] [--perf PREFIX]

Why: on a shared machine the throughput of one run of an app differs from the
next by 20-40% (benchmarks/RESULTS.md), more than what separates minloop from
the closest peer, even with the loops taking turns within each round.  Here
the two servers run at once, both pinned to one CPU, each with its own load
generator on the other CPU, started together.  --only takes
benchmarks/apps.py's apps and the bench's network rows (`python -m minloop
bench --list`: unix-protocol-1k-c16, http-pipe8-c16 ...), whose servers
and load generator are the bench's.  Whatever else slows the
machine during the window slows both alike; the scheduler gives the two busy
servers equal shares of their CPU, so each one's requests served over its own
CPU time (its CPU per request) says how much work a request costs it.

Each round starts both servers afresh (the order of start alternates), warms
both, then runs both load generators for --duration seconds.  It reports per
round each server's requests, CPU seconds (/proc schedstat, all threads),
share of the window, voluntary context switches per request (its sleeps in
the poller) and the user part of its CPU (sampled by the kernel's tick:
rough); per app or row, minloop's CPU per request over the peer's, median
(min-max) over rounds, and the throughput ratio beside it (meaningful only
when both shares are near 0.5: a server that idles for want of load gives
its CPU to the other).  A peer's own threads (rsloop runs several) are
pinned with it and counted in its CPU, as in apps.py.  On a row whose load
generator is its bottleneck (the bench's Python one, at 99% on http-pipe8
and unix rows) the throughput ratio is the generators'; the CPU per request
is still each server's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.append(os.path.dirname(HERE))

import apps  # noqa: E402
from minloop.bench import loops, measure, procs, rows  # noqa: E402
from minloop.bench.client import proc_cpu, proc_user_cpu  # noqa: E402


class _Settings:
    def __init__(self, duration: float, warmup: float):
        self.duration, self.warmup = duration, warmup


class _App:
    """One of apps.py's apps: its server, and wrk or its own client."""

    def __init__(self, name: str):
        self.row = apps.ROWS[name]

    def start(self, loop_name: str, pin: procs.Pinning) -> procs.ServerProcess:
        return procs.ServerProcess([sys.executable, apps.__file__, "--serve", self.row.id,
                                    "--loop", loop_name, "--cpu", str(pin.server)])

    def drive(self, server, pin: procs.Pinning, settings) -> dict:
        run = apps._wrk if self.row.mode == "http" else apps._own_client
        return run(self.row, server, pin, settings)


class _BenchRow:
    """One of the bench's network rows: servers.py's server, client.py."""

    def __init__(self, name: str):
        self.row = rows.ROWS[name]

    def start(self, loop_name: str, pin: procs.Pinning) -> procs.ServerProcess:
        # A tag per loop: a Unix row's two servers need two socket paths.
        return measure.start_net_server(self.row, loop_name, pin,
                                        tag="-" + "".join(c for c in loop_name if c.isalnum()))

    def drive(self, server, pin: procs.Pinning, settings) -> dict:
        client = measure.start_net_client(self.row, pin, settings.duration, settings.warmup)
        answer = procs.communicate_json(client, json.dumps(server.address) + "\n",
                                        settings.duration + settings.warmup + 60)
        if "error" in answer:
            raise RuntimeError(f"load generator: {answer['error']}")
        return answer


def _workload(name: str):
    if name in apps.ROWS:
        return _App(name)
    row = rows.ROWS.get(name)
    if row is None or row.group != "net" or row.mode not in ("echo", "http"):
        raise SystemExit(f"side_by_side: {name!r} is neither an app of apps.py nor a TCP/Unix "
                         f"network row of the bench")
    return _BenchRow(name)


def one_round(app: str, names: list[str], settings: _Settings, pin: procs.Pinning,
              perf_out: str | None = None) -> dict:
    """Both servers at once; {loop: {requests, seconds, cpu, share, us, ...}}."""
    work = _workload(app)
    servers = {}
    try:
        for name in names:
            servers[name] = work.start(name, pin)
        results: dict = {}

        def drive(name):
            try:
                results[name] = work.drive(servers[name], pin, settings)
            except Exception as exc:  # reported per loop, the other still counts
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}

        threads = [threading.Thread(target=drive, args=(n,)) for n in names]
        cpu0 = {n: proc_cpu(s.pid) for n, s in servers.items()}
        sw0 = {n: _switches(s.pid) for n, s in servers.items()}
        user0 = {n: proc_user_cpu(s.pid) for n, s in servers.items()}
        t0 = time.monotonic()
        for t in threads:
            t.start()
        recorder = None
        if perf_out:
            # Samples of the servers' CPU over the load generators' window,
            # after their warm-up: both servers in one file, by pid.
            time.sleep(settings.warmup + 0.3)
            recorder = subprocess.Popen(
                ["perf", "record", "-q", "-g", "-F", "3999", "-e", "cpu-clock",
                 "-e", "sched:sched_waking", "-C", str(pin.server), "-o", perf_out,
                 "--", "sleep", str(max(1.0, settings.duration - 0.6))],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for t in threads:
            t.join()
        if recorder is not None:
            recorder.wait()
        wall = time.monotonic() - t0
        cpu1 = {n: proc_cpu(s.pid) for n, s in servers.items()}
        sw1 = {n: _switches(s.pid) for n, s in servers.items()}
        user1 = {n: proc_user_cpu(s.pid) for n, s in servers.items()}
    finally:
        for s in servers.values():
            if s.proc.poll() is None:
                s.stop()
    out = {}
    for n in names:
        r = results.get(n, {"error": "no result"})
        if "error" in r:
            out[n] = {"error": r["error"]}
            continue
        # The load generator's own window (wrk's or the client's), whose
        # server CPU it measured; the share is over the whole joint window.
        count, seconds, cpu = r["round_trips"], r["seconds"], r["server_cpu"]
        out[n] = {"requests": count, "seconds": seconds, "rate": count / seconds,
                  "cpu": cpu, "us": cpu / count * 1e6,
                  "share": (cpu1[n] - cpu0[n]) / wall,
                  # Per request, over the joint window (warm-up included).
                  "sleeps": (sw1[n] - sw0[n]) / count,
                  # The user part of all CPU over the joint window (the
                  # kernel samples the split at its tick: rough per round).
                  "user_share": (user1[n] - user0[n]) / (cpu1[n] - cpu0[n]),
                  "pid": servers[n].pid}
    return out


def _switches(pid: int) -> int:
    """The process's voluntary context switches so far (its sleeps in poll)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def _line(server: dict) -> str:
    return (f"{server['rate']:8.0f}/s {server['us']:6.2f} us share {server['share']:.2f} "
            f"sleeps {server['sleeps']:.3f} user {server['user_share']:.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="uvicorn-text,uvicorn-json,aiohttp-text")
    parser.add_argument("--peer", default="zuvloop",
                        help="the other loop: a name the bench knows, module:factory, or "
                             "label=module:factory@DIR (bench rows only)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--perf", metavar="PREFIX",
                        help="perf record the servers' CPU in each round, to PREFIX-APP-ROUND.data "
                             "(then: perf report -i FILE --sort pid,dso)")
    args = parser.parse_args(argv)
    for name in args.only.split(","):
        _workload(name)   # an unknown name stops the run before it starts
    try:
        # A known name, module:factory, or label=module:factory@DIR (a built
        # source tree: the bench's rows only, whose servers import from it).
        args.peer = loops.parse(args.peer)
    except ValueError as exc:
        parser.error(str(exc))
    settings = _Settings(args.duration, args.warmup)
    pin = procs.Pinning(True)
    if pin.server is None:
        # Without pinning the two servers would not share one CPU, and the
        # comparison would be of whatever else ran beside each.
        print(f"side_by_side: needs two CPUs to pin to: {pin.describe}", file=sys.stderr)
        return 2
    report = {}
    for app in args.only.split(","):
        rounds = []
        for r in range(args.rounds):
            names = ["minloop", args.peer] if r % 2 == 0 else [args.peer, "minloop"]
            res = one_round(app, names, settings, pin,
                            args.perf and f"{args.perf}-{app}-{r + 1}.data")
            rounds.append(res)
            m, p = res.get("minloop", {}), res.get(args.peer, {})
            if "us" in m and "us" in p:
                print(f"{app:16} round {r + 1:2}: minloop {_line(m)} | {args.peer} {_line(p)} "
                      f"| cpu/req ratio {m['us'] / p['us']:.3f}", flush=True)
            else:
                print(f"{app:16} round {r + 1:2}: {res}", flush=True)
        ok = [x for x in rounds if "us" in x.get("minloop", {}) and "us" in x.get(args.peer, {})]
        cpu_ratio = apps._spread([x["minloop"]["us"] / x[args.peer]["us"] for x in ok])
        rate_ratio = apps._spread([x["minloop"]["rate"] / x[args.peer]["rate"] for x in ok])
        report[app] = {"rounds": rounds, "cpu_per_request": cpu_ratio, "throughput": rate_ratio}
        print(f"{app:16} minloop/{args.peer}: CPU per request {apps._fmt(cpu_ratio, 3)}, "
              f"throughput {apps._fmt(rate_ratio, 3)}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": sys.version, "peer": args.peer, "apps": report}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
