"""Side-by-side comparison of event loops as network servers, against a C client.

    python benchmarks/net_compare.py [--only ROW|GROUP|PATTERN,...] [--quick]
                                     [--rounds N] [--duration S] [--warmup S]
                                     [--loops asyncio,minloop,...] [--json FILE]
                                     [--no-baseline] [--baseline-rounds N] [--list]

The network rows of ``python -m minloop bench`` (minloop/bench/rows.py: the
rows, their names and their servers, minloop/bench/servers.py), measured
with what this script adds: a load generator written in C (net/echo_client.c;
wrk for the HTTP rows) in place of the bench's Python one, and a plain C
epoll server (net/c_echo_server.c) as an extra column, "c-server", in some
of the rounds: what the load generator reaches when the server costs next to
nothing.  The server is pinned to one CPU, the load generator to the other.
The rounds, medians, ratios and report are the bench's, and so are the
options (minloop/bench/options.py); see benchmarks/net/README.md.

Exit status: 0 on success; 1 if minloop failed or misbehaved on any row (a
feature it does not have yet is "n/a", not a failure); 2 if a loop named in
--require is unavailable or a tool this needs (gcc) is missing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NET = os.path.join(HERE, "net")
# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(HERE))

from minloop.bench import options, procs, rows  # noqa: E402
from minloop.bench.options import Settings  # noqa: E402
from minloop.bench.client import cpus_busy, proc_cpu, proc_user_cpu  # noqa: E402

C_SOURCES = {"client": "echo_client.c", "server": "c_echo_server.c"}
BASELINE = "c-server"  # the C server's column
HTTP_RESPONSE_LEN = 78  # len(servers.HTTP_RESPONSE), also c_echo_server.c's

KiB = 1024


# ---------------------------------------------------------------------------
# Rows: the bench's, those the C programs can drive
# ---------------------------------------------------------------------------


C_MAX_CONNS = 1024  # net/echo_client.c's MAX_CONNS
# The C programs' --kind (server) and --mode (client) by the row's transport,
# the first word of its name.
C_KINDS = {"tcp": "tcp", "pipe": "tcp", "unix": "unix", "udp": "udp", "http": "http"}


def transport(row: rows.Row) -> str:
    return row.id.split("-", 1)[0]


def _rows() -> dict[str, rows.Row]:
    """The network rows of minloop/bench/rows.py that this script's load
    generators can drive: not the msgs-* rows (per-message servers, measured
    against the Python load generator only), not pipelined HTTP (wrk does not
    pipeline), at most C_MAX_CONNS connections."""
    return {rid: dataclasses.replace(r, quick=rid in QUICK_ROWS)
            for rid, r in rows.ROWS.items()
            if r.group == "net" and transport(r) in C_KINDS and r.conns <= C_MAX_CONNS
            and not (transport(r) == "http" and r.depth > 1)}


# --quick: rows of README.md's networking table (the bench's quick network
# rows are per-message servers this script's load generators do not drive).
QUICK_ROWS = ("tcp-protocol-1k-c16", "tcp-streams-1k-c16", "http-c16")


ROWS = _rows()
# Groups for --only: by transport; rows of 1,000 connections and more form
# the group "many", outside the default set.
GROUPS = {g: [rid for rid, r in ROWS.items()
              if (r.conns >= 1000 if g == "many" else r.conns < 1000 and transport(r) == g)]
          for g in ("tcp", "pipe", "unix", "udp", "http", "many")}
DEFAULT_GROUPS = ("tcp", "pipe", "unix", "udp", "http")  # README.md's networking table


# ---------------------------------------------------------------------------
# Tools: the C programs (built once per source version) and pinning
# ---------------------------------------------------------------------------


def build(name: str) -> str:
    """Compile net/<source> with gcc -O2 into a per-user cache directory
    (keyed by the source's hash, so an edit rebuilds); return the binary."""
    source = os.path.join(NET, C_SOURCES[name])
    with open(source, "rb") as f:
        digest = hashlib.sha1(f.read()).hexdigest()[:12]
    cache = os.path.join(tempfile.gettempdir(), f"minloop-net-bench-{os.getuid()}")
    os.makedirs(cache, exist_ok=True)
    binary = os.path.join(cache, f"{name}-{digest}")
    if not os.path.exists(binary):
        partial = f"{binary}.{os.getpid()}"
        subprocess.run(["gcc", "-O2", "-Wall", "-o", partial, source], check=True,
                       capture_output=True, text=True)
        os.replace(partial, binary)  # atomic: a concurrent run sees all or nothing
    return binary


def taskset(cpu: int | None) -> list[str]:
    """The prefix pinning a C program (or wrk) to cpu, as procs.Pinning's
    --cpu pins the Python servers."""
    return [] if cpu is None else ["taskset", "-c", str(cpu)]


def _own_cpu() -> float:
    """This process's CPU plus its reaped children's (the load generators)."""
    import resource

    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


# ---------------------------------------------------------------------------
# One measurement
# ---------------------------------------------------------------------------


NotAvailable = procs.ServerProcess.Unsupported  # n/a, not a failure
Failed = procs.ServerProcess.Failed  # a crash, a wrong echo, a timeout


class Tools:
    """What the measurements share: the C programs, wrk, a directory for
    Unix sockets, and the CPUs (procs.Pinning's: server, load generator)."""

    def __init__(self, bins: dict, workdir: str, pin: procs.Pinning):
        self.bins = bins
        self.workdir = workdir
        self.have_wrk = shutil.which("wrk") is not None
        self.server = taskset(pin.server)
        self.client = taskset(pin.client)
        self.server_args = pin.args(pin.server)
        pinned = [c for c in (pin.server, pin.client) if c is not None]
        usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.cpus = pinned or usable  # the CPUs whose other load is reported


class Server(procs.ServerProcess):
    """A server process for one measurement: a loop's, or the C baseline."""

    def __init__(self, loop_name: str, row: rows.Row, tools: Tools):
        kind = C_KINDS[transport(row)]
        if loop_name == BASELINE:
            cmd = tools.server + [tools.bins["server"], "--kind", kind]
        else:
            cmd = procs.module_command("minloop.bench.servers", "--loop", loop_name,
                                       "--kind", row.kind, *tools.server_args)
        if kind == "unix":
            cmd += ["--path", os.path.join(tools.workdir, f"echo-{os.getpid()}.sock")]
        super().__init__(cmd)


def _run_client(cmd: list[str], timeout: float) -> dict:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failed(f"load generator timed out after {timeout:g} s") from None
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise Failed(f"load generator: exit status {proc.returncode}: "
                     f"{(proc.stderr.strip() or proc.stdout.strip())[-200:]}") from None
    if "error" in answer:
        raise Failed(f"load generator: {answer['error']}")
    return answer


def _echo(row: rows.Row, server: Server, tools: Tools, duration: float,
          warmup: float) -> dict:
    mode = C_KINDS[transport(row)]
    cmd = tools.client + [tools.bins["client"], "--mode", mode, "--conns", str(row.conns),
                          "--size", str(row.size), "--depth", str(row.depth),
                          "--duration", f"{duration:g}", "--warmup", f"{warmup:g}",
                          "--server-pid", str(server.pid)]
    if mode == "unix":
        cmd += ["--path", server.address["path"]]
    else:
        cmd += ["--host", server.address["host"], "--port", str(server.address["port"])]
    answer = _run_client(cmd, duration + warmup + 30)
    problems = []
    if answer["udp_lost"]:
        problems.append(f"{answer['udp_lost']} datagrams lost")
    return {"seconds": answer["seconds"], "round_trips": answer["round_trips"],
            "bytes": answer["bytes"], "server_cpu": answer["server_cpu"],
            "server_user_cpu": answer["server_user_cpu"],
            "client_cpu": answer["client_cpu"], "problems": problems}


_WRK_TIME = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_wrk(text: str) -> dict:
    """Requests, seconds, p50/p99 latency (s) and error counts from wrk --latency."""
    out: dict = {"problems": []}
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m|h)", text)
    if not m:
        raise Failed(f"could not read wrk's output: {text.strip()[-200:]}")
    out["requests"] = int(m.group(1))
    out["seconds"] = float(m.group(2)) * _WRK_TIME[m.group(3)]
    for pct in ("50", "99"):
        m = re.search(rf"^\s*{pct}(?:\.0+)?%\s+([\d.]+)(us|ms|s|m|h)\s*$", text, re.M)
        out[f"p{pct}"] = float(m.group(1)) * _WRK_TIME[m.group(2)] if m else None
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m and any(int(x) for x in m.groups()):
        out["problems"].append("wrk socket errors: " + m.group(0).split(": ", 1)[1])
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        out["problems"].append(f"{m.group(1)} non-2xx responses")
    return out


def _http(row: rows.Row, server: Server, tools: Tools, duration: float,
          warmup: float) -> dict:
    host, port = server.address["host"], server.address["port"]
    # wrk has no warm-up and takes whole seconds: warm the server with the C
    # client speaking HTTP first.
    _run_client(tools.client + [tools.bins["client"], "--mode", "http", "--host", host,
                                "--port", str(port), "--conns", str(row.conns),
                                "--reply-len", str(HTTP_RESPONSE_LEN),
                                "--duration", "0.05", "--warmup", f"{warmup:g}"],
                warmup + 30)
    return run_wrk(tools.client, host, port, row.conns, duration, server.pid)


def run_wrk(prefix: list[str], host: str, port: int, conns: int, duration: float,
            server_pid: int) -> dict:
    """wrk -t1 against host:port for `duration` (whole seconds: wrk's unit),
    started through `prefix` (taskset), as a sample in the bench's terms with
    the server's CPU over the run."""
    seconds = max(1, round(duration))
    cmd = prefix + ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency",
                    f"http://{host}:{port}/"]
    children_before = _children_cpu()
    cpu_before = proc_cpu(server_pid)
    user_before = proc_user_cpu(server_pid)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        text, _ = proc.communicate(timeout=seconds + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise Failed("wrk timed out") from None
    cpu_after = proc_cpu(server_pid)
    user_after = proc_user_cpu(server_pid)
    # Reaping wrk (taskset execs it: one process) added exactly its usage to
    # this process's RUSAGE_CHILDREN; nothing else was reaped meanwhile.
    wrk_cpu = _children_cpu() - children_before
    if proc.returncode != 0:
        raise Failed(f"wrk exit status {proc.returncode}: {text.strip()[-200:]}")
    parsed = parse_wrk(text)
    return {"seconds": parsed["seconds"], "round_trips": parsed["requests"], "bytes": 0,
            "server_cpu": (cpu_after - cpu_before) if None not in (cpu_before, cpu_after)
            else -1.0,
            "server_user_cpu": (user_after - user_before)
            if None not in (user_before, user_after) else -1.0,
            "client_cpu": wrk_cpu, "p50": parsed["p50"], "p99": parsed["p99"],
            "problems": parsed["problems"]}


def measure(row: rows.Row, loop_name: str, settings: Settings, tools: Tools) -> dict:
    """One cell, one round: {"na": reason} | {"error": ...} | a sample in the
    bench's terms (rate, server_us, client_util, other_load, mb_s ...)."""
    if transport(row) == "http" and not tools.have_wrk:
        return {"na": "wrk not found"}
    try:
        server = Server(loop_name, row, tools)
    except NotAvailable as exc:
        return {"na": str(exc)}
    except Failed as exc:
        return {"error": str(exc)}
    run = _http if transport(row) == "http" else _echo
    sample = timed_window(server, tools.cpus, _own_cpu,
                          lambda: run(row, server, tools, settings.duration, settings.warmup))
    return with_rates(sample, "round trips")


def timed_window(server, cpus: list[int], own_cpu, run) -> dict:
    """run()'s sample against `server` (then stopped), with what else ran on
    the benchmark's CPUs meanwhile: their busy time less the server's, the
    load generator's and this driver's (own_cpu()); or {"error": ...}."""
    before = (time.monotonic(), cpus_busy(cpus), proc_cpu(server.pid), own_cpu())
    try:
        sample = run()
        after = (time.monotonic(), cpus_busy(cpus), proc_cpu(server.pid), own_cpu())
    except Failed as exc:
        server.stop()
        problems = server.problems()
        return {"error": str(exc) + (f" ({problems[0]})" if problems else "")}
    finally:
        if server.proc.poll() is None:
            server.stop()
    sample["problems"] += server.problems()
    if None not in (before[1], after[1], before[2], after[2]):
        ours = (after[2] - before[2]) + (after[3] - before[3])
        other = (after[1] - before[1]) - ours
        sample["other_load"] = max(0.0, other / ((after[0] - before[0]) * len(cpus)))
    return sample


def with_rates(sample: dict, what: str) -> dict:
    """The sample's rates per second and CPU per operation (`what`: the
    operations' name, for the error when there were none)."""
    if "error" in sample:
        return sample
    seconds, count = sample["seconds"], sample["round_trips"]
    if count <= 0 or seconds <= 0:
        return {"error": f"no {what} in the timed window"}
    sample["rate"] = count / seconds
    sample["mb_s"] = sample["bytes"] / seconds / 1e6 if sample["bytes"] else None
    if sample["server_cpu"] >= 0:
        sample["server_us"] = sample["server_cpu"] / count * 1e6
        sample["server_util"] = sample["server_cpu"] / seconds
    if sample["server_user_cpu"] >= 0:
        sample["server_user_us"] = sample["server_user_cpu"] / count * 1e6
    if sample["client_cpu"] is not None:
        sample["client_util"] = sample["client_cpu"] / seconds
    return sample


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


# Without --quick: 4 rounds of 1 s after 0.2 s of warm-up.  More short rounds
# rather than few long ones: on a shared machine the noise comes in bursts,
# which a median over rounds absorbs.
FULL = options.Profile(rounds=4, duration=1.0, warmup=0.2)


def main(argv: list[str] | None = None) -> int:
    parser = options.Parser(
        description="Compare event loops as network servers, one fresh process per run.")
    command = options.Command(parser, FULL, default_only=",".join(DEFAULT_GROUPS),
                              only_help="groups (tcp, pipe, unix, udp, http, many: the "
                                        "rows of 1,000 connections)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="do not measure the C server")
    parser.add_argument("--baseline-rounds", type=int, metavar="N",
                        help="rounds of the C server per row (default 2, or 1 with --quick; "
                             "it is a check on the load generator, not a contestant)")
    args = parser.parse_args(argv)

    chosen = command.select(args, ROWS, GROUPS)
    if args.list:
        return options.list_rows(chosen)
    # Usage errors before building anything (command.run checks them again).
    command.loops(args)
    command.check_outputs(args)
    rounds = command.settings(args).rounds

    if not shutil.which("gcc"):
        print("gcc not found: the load generator is built from C at run time", file=sys.stderr)
        return 2
    try:
        bins = {name: build(name) for name in C_SOURCES}
    except subprocess.CalledProcessError as exc:
        print(f"building the C programs failed:\n{exc.stderr}", file=sys.stderr)
        return 2
    if args.no_pin:
        pin = procs.Pinning(False)
    elif not shutil.which("taskset"):
        pin = procs.Pinning(False, "taskset not found")
    else:
        pin = procs.Pinning()

    baseline_rounds = args.baseline_rounds or (1 if args.quick else 2)
    baseline_rounds = 0 if args.no_baseline else min(baseline_rounds, rounds)
    # The C server's rounds, spread over the loops' rounds (2 of 4: 1 and 3).
    rounds_of = {BASELINE: {1 + i * rounds // baseline_rounds for i in range(baseline_rounds)}}
    header = [f"load generator: net/echo_client.c (wrk for http-*); {BASELINE}: "
              f"net/c_echo_server.c in {baseline_rounds} of the {rounds} rounds"
              if baseline_rounds else "load generator: net/echo_client.c (wrk for http-*)"]
    if not shutil.which("wrk"):
        header.append("wrk not found: the http rows are n/a")
    notes = []
    if baseline_rounds:
        notes.append(f"{BASELINE}: a plain C epoll server measured the same way, a check "
                     f"on the load generator, not a contestant: where it is not clearly "
                     f"ahead of the loops, the row is limited by something other than the "
                     f"server.")
    workdir = tempfile.mkdtemp(prefix="minloop-net-")
    tools = Tools(bins, workdir, pin)
    try:
        return command.run(
            args, chosen, pin=pin,
            measure=lambda row, name, settings: measure(row, name, settings, tools),
            extra=[BASELINE] if baseline_rounds else [], rounds_of=rounds_of,
            header=header, notes=notes)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(options.quiet_on_broken_pipe(main))
