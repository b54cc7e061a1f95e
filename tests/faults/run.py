"""The fault harness: real workloads on a loop whose libc calls fail at
random (libfiu), with the clients in this process, free of faults.

    python tests/faults/run.py                      # every scenario, minloop
    python tests/faults/run.py --loops minloop,asyncio,uvloop --seeds 1,2 \
        --probability 0.05 --rounds 5 --scale 4     # side by side

Exits 1 when minloop breaks an invariant: a crash, a hang, a silent loss
(a corrupt byte, or a stream cut short with no error reported on that
connection), a leaked fd or watched fd.  docs/faults.md says what each
scenario runs and which errnos each loop retries.
"""
import argparse
import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import clients  # noqa: E402
import injector  # noqa: E402
from streams import sizes, stream  # noqa: E402

# Per scenario: connections (or datagrams, or children) per round, their
# sizes, and how many at once.
PROFILES = {
    "tcp-protocol": dict(count=40, low=1, high=262144, concurrency=16),
    "tcp-buffered": dict(count=40, low=1, high=262144, concurrency=16),
    "tcp-streams": dict(count=40, low=1, high=262144, concurrency=16),
    "unix-protocol": dict(count=40, low=1, high=262144, concurrency=16),
    "unix-buffered": dict(count=40, low=1, high=262144, concurrency=16),
    "unix-streams": dict(count=40, low=1, high=262144, concurrency=16),
    "sock": dict(count=40, low=1, high=262144, concurrency=16),
    "udp": dict(count=400, low=1, high=4000, concurrency=1),
    "tls": dict(count=24, low=1, high=131072, concurrency=8),
    "subprocess": dict(count=6, low=1, high=262144, concurrency=3),
    "short-conns": dict(count=400, low=0, high=300, concurrency=40),
}
VIOLATIONS = ("crashes", "hangs", "silent", "leaked_fds", "leaked_watched", "leaked_rss")


class Server:
    """The process under test and its one-line-per-message pipe."""

    def __init__(self, cfg, python, logpath):
        self.log = open(logpath, "wb")
        self.proc = subprocess.Popen(
            [python, os.path.join(HERE, "server.py"), json.dumps(cfg)], cwd=HERE,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            env=injector.preload_env())
        self.lines = queue.Queue()
        self.printed = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def receive(self, timeout):
        """A message; "crash" if the process ended, "hang" after timeout.
        Other lines (uvloop prints some errors to stdout) are kept apart."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0, deadline - time.monotonic()))
            except queue.Empty:
                return "hang"
            if line is None:
                return "crash"
            try:
                return json.loads(line)
            except ValueError:
                self.printed.append(line[:200].decode(errors="replace").strip())

    def dump_stacks(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR2)
            time.sleep(1)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


def classify_round(cfg, results, out, tally, transient):
    """Adds one round's outcome to `tally`."""
    if cfg["scenario"] == "udp":
        reported = len(out["errors"]) + len(out["reports"])
        lost = sum(r["state"] == "lost" for r in results)
        corrupt = sum(r["state"] == "corrupt" for r in results)
        tally["ops"] += len(results)
        tally["whole"] += len(results) - lost - corrupt
        tally["reported"] += min(lost, reported)
        tally["silent"] += corrupt + (lost if transient else max(0, lost - reported))
        return
    records = {r["cid"]: r for r in out["records"] if r["cid"] is not None}
    if cfg["scenario"] == "subprocess":
        for r in out["records"]:
            data = stream(cfg["seed"], r["cid"], cfg["sizes"][r["cid"] % len(cfg["sizes"])]) \
                if r["cid"] is not None else b""
            whole = r["cid"] is not None and r["rx"] == len(data) and r["crc"] == zlib.crc32(data)
            tally["ops"] += 1
            if whole:
                tally["whole"] += 1
            elif r["end"] is not None and not transient:
                tally["reported"] += 1
            else:
                tally["silent"] += 1
                tally["notes"].append(f"child {r['cid']}: {r['rx']} of {len(data)} bytes, end {r['end']}")
        return
    spare = sum(1 for r in out["records"] if r["cid"] is None and (r["end"] or r["reports"]))
    spare += sum(1 for rep in out["reports"] if not rep["attributed"]) + len(out["errors"])
    unmatched, unmatched_errors = 0, []
    for c in results:
        tally["ops"] += 1
        state, rec = c["state"], records.get(c["cid"])
        if state == "whole":
            tally["whole"] += 1
        elif state == "hang":
            tally["hangs"] += 1
            tally["notes"].append(f"conn {c['cid']}: no progress at {c['echoed']} of {c['length']}")
        elif state == "corrupt" or transient:
            tally["silent"] += 1
            tally["notes"].append(f"conn {c['cid']}: {state} at {c['echoed']} of {c['length']} "
                                  f"({c['error']}; server: {rec})")
        elif rec is None and c["echoed"] == 0 and c["error"]:
            # Never handed to the server's code (a TLS handshake that
            # failed: asyncio logs it in debug mode only); the client saw it.
            tally["reported"] += 1
        elif rec is None:
            unmatched += 1
            unmatched_errors.append(c["error"])
        elif rec["end"] is not None or rec["reports"]:
            tally["reported"] += 1
        else:
            tally["silent"] += 1
            tally["notes"].append(f"conn {c['cid']}: {c['echoed']} of {c['length']} bytes echoed, "
                                  f"server ended cleanly (rx {rec['rx']}, tx {rec['tx']}); client {c['error']}")
    tally["reported"] += min(unmatched, spare)
    if unmatched > spare:
        tally["silent"] += unmatched - spare
        tally["notes"].append(f"{unmatched - spare} connections cut short that the server never reported "
                              f"(clients saw {unmatched_errors[:3]})")


def run_one(cfg, python, outdir):
    """One scenario on one loop with one seed: its tally."""
    name = f"{cfg['scenario']}-{cfg['loop']}-{cfg['seed']}"
    tally = dict(ops=0, whole=0, reported=0, crashes=0, hangs=0, silent=0, leaked_fds=0,
                 leaked_watched=0, rss_growth=0, leaked_rss=0, calls=0, injected=0, notes=[], log=None)
    logpath = os.path.join(outdir, name + ".log")
    server = Server(cfg, python, logpath)
    transient = cfg["transient"]
    try:
        hello = server.receive(60)
        if not isinstance(hello, dict):
            tally["crashes" if hello == "crash" else "hangs"] += 1
            return tally
        address = hello["address"]
        usage = []
        for rnd in range(cfg["rounds"]):
            server.send({"round": rnd})
            results = []
            if cfg["scenario"] == "udp":
                results = asyncio.run(clients.udp_clients(address, cfg, rnd))
            elif cfg["scenario"] != "subprocess":
                results = asyncio.run(clients.echo_clients(address, cfg, rnd))
            if any(r["state"] == "hang" for r in results):
                server.dump_stacks()
            if server.proc.poll() is None:
                server.proc.send_signal(signal.SIGUSR1)
            out = server.receive(cfg["timeout"] * 4 + 60)
            if not isinstance(out, dict):
                tally["hangs" if out == "hang" else "crashes"] += 1
                if out == "hang":
                    server.dump_stacks()
                tally["notes"].append(f"round {rnd}: server {out}")
                return tally
            classify_round(cfg, results, out, tally, transient)
            tally["calls"], tally["injected"] = out["calls"], out["injected"]
            if out["still_open"]:
                tally["hangs"] += 1
                tally["notes"].append(f"round {rnd}: {out['still_open']} server connections never ended")
            usage.append(out)
        base, last = usage[0], usage[-1]
        tally["leaked_fds"] = max(0, last["fds"] - base["fds"])
        if base["watched"] is not None:
            tally["leaked_watched"] = max(0, last["watched"] - base["watched"])
        tally["rss_growth"] = last["rss"] - usage[min(4, len(usage) - 1)]["rss"]
        if len(usage) >= 10 and tally["rss_growth"] > cfg["rss_limit"]:
            tally["leaked_rss"] = 1
            tally["notes"].append(f"RSS grew {tally['rss_growth'] / 2**20:.1f} MiB from round 5 to {len(usage)}")
        server.send({"quit": True})
        if not isinstance(server.receive(60), dict):
            tally["crashes"] += 1
        try:
            server.proc.wait(60)
        except subprocess.TimeoutExpired:
            tally["hangs"] += 1
            tally["notes"].append("server did not exit")
    finally:
        server.kill()
        if server.proc.returncode not in (0, None):
            tally["crashes"] += 1
            tally["notes"].append(f"server exit status {server.proc.returncode}")
        if server.printed:
            tally["notes"].append(f"the server printed {len(server.printed)} lines: {server.printed[:2]}")
        if any(tally[v] for v in VIOLATIONS):
            tally["log"] = logpath
    return tally


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default=",".join(PROFILES))
    ap.add_argument("--loops", default="minloop")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--probability", type=float, default=0.01)
    ap.add_argument("--transient", action="store_true",
                    help="inject only EINTR/EAGAIN and short reads/writes: every stream must arrive whole")
    ap.add_argument("--epoll-ctl", action="store_true", help="fail epoll_ctl(EPOLL_CTL_ADD) too (ENOMEM, ENOSPC): the only op that allocates")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply each round's connections")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds without progress that make a hang")
    ap.add_argument("--python", default=sys.executable, help="the interpreter the server runs on")
    ap.add_argument("--out", default=None, help="directory for the servers' logs and results.json")
    ap.add_argument("--strict", default="minloop", help="loops whose violations fail the run")
    ap.add_argument("--rss-limit-mb", type=float, default=8.0,
                    help="with 10 rounds or more: RSS growth from round 5 to the last that is a leak")
    args = ap.parse_args(argv)
    missing = injector.check_installed()
    if missing:
        sys.exit(f"libfiu missing: {missing}")
    outdir = args.out or tempfile.mkdtemp(prefix="minloop-faults-")
    os.makedirs(outdir, exist_ok=True)
    rows = []
    for scenario in args.scenarios.split(","):
        prof = PROFILES[scenario]
        for loop in args.loops.split(","):
            total = None
            for seed in (int(s) for s in args.seeds.split(",")):
                count = max(1, int(prof["count"] * args.scale))
                cfg = dict(scenario=scenario, loop=loop, seed=seed, probability=args.probability,
                           transient=args.transient, epoll_ctl=args.epoll_ctl, rounds=args.rounds,
                           timeout=args.timeout, rss_limit=args.rss_limit_mb * 2**20,
                           count=count, concurrency=prof["concurrency"],
                           sizes=sizes(seed, 64, prof["low"], prof["high"]), udp_wait=2.0)
                t = run_one(cfg, args.python, outdir)
                if total is None:
                    total = t
                else:
                    for k, v in t.items():
                        if isinstance(v, int):
                            total[k] += v
                        elif k == "notes":
                            total[k] += v
                        elif v:
                            total[k] = v
            rows.append(dict(scenario=scenario, loop=loop, **total))
            print_row(rows[-1])
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(dict(args=vars(args), rows=rows), f, indent=1)
    print_table(rows, args)
    strict = args.strict.split(",")
    bad = [r for r in rows if r["loop"] in strict and any(r[v] for v in VIOLATIONS)]
    for r in rows:
        for n in r["notes"][:5]:
            print(f"  {r['scenario']} on {r['loop']}: {n}")
        if r["log"]:
            print(f"  {r['scenario']} on {r['loop']}: server log {r['log']}")
    print(f"results: {outdir}/results.json")
    return 1 if bad else 0


def print_row(r):
    print(f"{r['scenario']:14} {r['loop']:8} ops {r['ops']:5} whole {r['whole']:5} reported {r['reported']:4} "
          f"faults {r['injected']:6}/{r['calls']:<8} crash {r['crashes']} hang {r['hangs']} "
          f"silent {r['silent']} leaked fds {r['leaked_fds']}/{r['leaked_watched']} "
          f"RSS {r['rss_growth'] / 2**20:+.1f} MiB", flush=True)


def print_table(rows, args):
    print(f"\nPython {sys.version.split()[0]}, seeds {args.seeds}, p={args.probability}"
          f"{' (transient errnos only)' if args.transient else ''}, {args.rounds} rounds, scale {args.scale}\n")
    print("| scenario | loop | ops | whole | reported | faults / calls | crashes | hangs | silent losses | leaked fds |"
          " RSS growth |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['scenario']} | {r['loop']} | {r['ops']} | {r['whole']} | {r['reported']} | "
              f"{r['injected']} / {r['calls']} | {r['crashes']} | {r['hangs']} | {r['silent']} | "
              f"{r['leaked_fds']}{' (+%d watched)' % r['leaked_watched'] if r['leaked_watched'] else ''} | "
              f"{r['rss_growth'] / 2**20:+.1f} MiB{' (leak)' if r['leaked_rss'] else ''} |")


if __name__ == "__main__":
    sys.exit(main())
