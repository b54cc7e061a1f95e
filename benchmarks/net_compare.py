"""Side-by-side comparison of event loops as network servers.

    python benchmarks/net_compare.py [--quick] [--rounds N] [--json FILE]
                                     [--loops asyncio,minloop,uvloop,rloop]
                                     [--rows ROW|GROUP|PATTERN,...] [--list]

Every cell runs a server (minloop.bench.servers, the package's -- the same
servers ``python -m minloop bench`` measures -- on the loop under test, pinned to CPU 0) against a load generator written in C (net/echo_client.c,
or wrk for the HTTP rows, pinned to CPU 1), each in a fresh process.  As in
compare.py, the loops take turns within each round, so slow drift of the
machine is shared, and the table shows medians over rounds.  A plain C epoll
server (net/c_echo_server.c) is measured the same way, once per row, to show
what the load generator reaches when the server costs next to nothing.

Ratios are minloop's round trips per second over the other loop's: above 1
means minloop is faster.  "CPU-s/1M" is the server process's CPU time (user +
system, read from /proc at the edges of the timed window) per million round
trips: the cost of one round trip with the waiting taken out.  See
benchmarks/net/README.md.

Exit status: 0 on success; 1 if minloop failed or misbehaved on any row (a
feature it does not have yet is "n/a", not a failure); 2 if a loop named in
--require is unavailable or a tool this needs (gcc) is missing.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import asdict, dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
NET = os.path.join(HERE, "net")
sys.path.insert(0, HERE)

import compare  # noqa: E402  (_names; its sys.path line makes minloop importable)

from minloop.bench import loops, procs, report  # noqa: E402
from minloop.bench import suite as bench_suite  # noqa: E402
from minloop.bench.client import cpus_busy, proc_cpu  # noqa: E402

C_SOURCES = {"client": "echo_client.c", "server": "c_echo_server.c"}
BASELINE = "c"  # the C server's column
REF = "minloop"
NOISY = 0.20  # spread (max - min) / median above which a cell is flagged
MAX_NOISY_LISTED = 12
BUSY = 0.10  # other processes' share of the benchmark's CPUs above which we warn
HTTP_RESPONSE_LEN = 78  # len(servers.HTTP_RESPONSE), also c_echo_server.c's

KiB = 1024


# ---------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    id: str
    group: str     # tcp, pipe, unix, udp, http
    kind: str      # minloop.bench.servers --kind
    c_kind: str    # c_echo_server.c --kind
    mode: str      # echo_client.c --mode (http: wrk)
    conns: int
    size: int = KiB
    depth: int = 1
    doc: str = ""


C_MAX_CONNS = 1024  # net/echo_client.c's MAX_CONNS
# The C programs' --kind (server) and --mode (client) by the row's transport,
# the first word of its name.
C_KINDS = {"tcp": "tcp", "pipe": "tcp", "unix": "unix", "udp": "udp", "http": "http"}


def _rows() -> dict[str, Row]:
    """The network rows of ``python -m minloop bench`` (minloop/bench/suite.py,
    the one table of rows and their names) that this script's load
    generators can drive: not the msgs-* rows (per-message servers, measured
    against the Python load generator only), not pipelined HTTP (wrk does not
    pipeline), at most C_MAX_CONNS connections.  Rows of 1,000 connections
    and more form the group "many", outside the default set."""
    rows = []
    for r in bench_suite.ROWS.values():
        transport = r.id.split("-", 1)[0]
        if r.group != "net" or transport not in C_KINDS or r.conns > C_MAX_CONNS:
            continue
        if transport == "http" and r.depth > 1:
            continue
        group = "many" if r.conns >= 1000 else transport
        rows.append(Row(r.id, group, r.kind, C_KINDS[transport], C_KINDS[transport], r.conns,
                        0 if transport == "http" else r.size, r.depth, r.doc))
    return {row.id: row for row in rows}


ROWS = _rows()
GROUPS = ("tcp", "pipe", "unix", "udp", "http", "many")
DEFAULT_GROUPS = GROUPS[:-1]  # the rows of README.md's networking table
TCP_GROUPS = ("tcp", "pipe")  # the rows the geometric means cover


def select_rows(spec: str) -> list[Row]:
    """Rows named by a comma-separated list of ids, groups or glob patterns,
    in table order."""
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    chosen = set()
    for item in wanted:
        if item in GROUPS:
            hits = {r.id for r in ROWS.values() if r.group == item}
        else:
            hits = set(fnmatch.filter(ROWS, item))
        if not hits:
            raise ValueError(f"no row matches {item!r} (see --list)")
        chosen |= hits
    return [row for rid, row in ROWS.items() if rid in chosen]


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


class Pinning:
    """taskset prefixes for the server (CPU 0) and the load generator (CPU 1),
    or none where that is impossible (no taskset, fewer than two CPUs)."""

    def __init__(self, enabled: bool):
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.reason = None
        if not enabled:
            self.reason = "--no-pin"
        elif not shutil.which("taskset"):
            self.reason = "taskset not found"
        elif len(cpus) < 2:
            self.reason = "fewer than two usable CPUs"
        if self.reason:
            self.server = self.client = []
            self.cpus = cpus
            self.describe = f"not pinned ({self.reason})"
        else:
            self.server = ["taskset", "-c", str(cpus[0])]
            self.client = ["taskset", "-c", str(cpus[1])]
            self.cpus = cpus[:2]
            self.describe = f"server on CPU {cpus[0]}, load generator on CPU {cpus[1]}"


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


class Server(procs.ServerProcess):
    """A server process for one measurement: a loop's, or the C baseline."""

    def __init__(self, loop_name: str, row: Row, bins: dict, pin: Pinning, workdir: str):
        path = os.path.join(workdir, f"echo-{os.getpid()}.sock")
        if loop_name == BASELINE:
            cmd = [bins["server"], "--kind", row.c_kind]
        else:
            cmd = procs.module_command("minloop.bench.servers", "--loop", loop_name,
                                       "--kind", row.kind)
        if row.group == "unix":
            cmd += ["--path", path]
        super().__init__(pin.server + cmd)


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


def _echo(row: Row, server: Server, bins: dict, pin: Pinning,
          duration: float, warmup: float) -> dict:
    cmd = pin.client + [bins["client"], "--mode", row.mode, "--conns", str(row.conns),
                        "--size", str(row.size), "--depth", str(row.depth),
                        "--duration", f"{duration:g}", "--warmup", f"{warmup:g}",
                        "--server-pid", str(server.pid)]
    if row.mode == "unix":
        cmd += ["--path", server.address["path"]]
    else:
        cmd += ["--host", server.address["host"], "--port", str(server.address["port"])]
    answer = _run_client(cmd, duration + warmup + 30)
    problems = []
    if answer["udp_lost"]:
        problems.append(f"{answer['udp_lost']} datagrams lost")
    return {"seconds": answer["seconds"], "round_trips": answer["round_trips"],
            "bytes": answer["bytes"], "server_cpu": answer["server_cpu"],
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


def _http(row: Row, server: Server, bins: dict, pin: Pinning,
          duration: float, warmup: float) -> dict:
    host, port = server.address["host"], server.address["port"]
    # wrk has no warm-up and takes whole seconds: warm the server with the C
    # client speaking HTTP first.
    _run_client(pin.client + [bins["client"], "--mode", "http", "--host", host,
                              "--port", str(port), "--conns", str(row.conns),
                              "--reply-len", str(HTTP_RESPONSE_LEN),
                              "--duration", "0.05", "--warmup", f"{warmup:g}"],
                warmup + 30)
    seconds = max(1, round(duration))
    cmd = pin.client + ["wrk", "-t1", f"-c{row.conns}", f"-d{seconds}s", "--latency",
                        f"http://{host}:{port}/"]
    children_before = _children_cpu()
    cpu_before = proc_cpu(server.pid)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        text, _ = proc.communicate(timeout=seconds + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise Failed("wrk timed out") from None
    cpu_after = proc_cpu(server.pid)
    # Reaping wrk (taskset execs it: one process) added exactly its usage to
    # this process's RUSAGE_CHILDREN; nothing else was reaped meanwhile.
    wrk_cpu = _children_cpu() - children_before
    if proc.returncode != 0:
        raise Failed(f"wrk exit status {proc.returncode}: {text.strip()[-200:]}")
    parsed = parse_wrk(text)
    return {"seconds": parsed["seconds"], "round_trips": parsed["requests"], "bytes": 0,
            "server_cpu": (cpu_after - cpu_before) if None not in (cpu_before, cpu_after)
            else -1.0,
            "client_cpu": wrk_cpu, "p50": parsed["p50"], "p99": parsed["p99"],
            "problems": parsed["problems"]}


def measure(row: Row, loop_name: str, bins: dict, pin: Pinning, workdir: str,
            duration: float, warmup: float) -> dict:
    """One cell, one round: {"na": reason} | {"error": ...} | a sample."""
    try:
        server = Server(loop_name, row, bins, pin, workdir)
    except NotAvailable as exc:
        return {"na": str(exc)}
    except Failed as exc:
        return {"error": str(exc)}
    # What else ran on the benchmark's CPUs meanwhile: their busy time less
    # the server's, the load generator's and this driver's.
    before = (time.monotonic(), cpus_busy(pin.cpus), proc_cpu(server.pid), _own_cpu())
    try:
        if row.group == "http":
            sample = _http(row, server, bins, pin, duration, warmup)
        else:
            sample = _echo(row, server, bins, pin, duration, warmup)
        after = (time.monotonic(), cpus_busy(pin.cpus), proc_cpu(server.pid), _own_cpu())
    except Failed as exc:
        server.stop()
        problems = server.problems()
        return {"error": str(exc) + (f" ({problems[0]})" if problems else "")}
    finally:
        if server.proc.poll() is None:
            server.stop()
    sample["problems"] += server.problems()
    if None not in (before[2], after[2]):
        ours = (after[2] - before[2]) + (after[3] - before[3])
        other = (after[1] - before[1]) - ours
        sample["other_load"] = max(0.0, other / ((after[0] - before[0]) * len(pin.cpus)))
    if sample["round_trips"] <= 0 or sample["seconds"] <= 0:
        return {"error": "no round trips in the timed window"}
    sample["rt_s"] = sample["round_trips"] / sample["seconds"]
    sample["mb_s"] = sample["bytes"] / sample["seconds"] / 1e6
    sample["cpu_per_m"] = (sample["server_cpu"] / sample["round_trips"] * 1e6
                           if sample["server_cpu"] >= 0 else None)
    sample["server_util"] = (sample["server_cpu"] / sample["seconds"]
                             if sample["server_cpu"] >= 0 else None)
    sample["client_util"] = (sample["client_cpu"] / sample["seconds"]
                             if sample["client_cpu"] is not None else None)
    return sample


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------------------
# Summaries and the table
# ---------------------------------------------------------------------------

METRICS = ("rt_s", "mb_s", "cpu_per_m", "server_util", "client_util", "p50", "p99",
           "other_load")


def summarise(cell: dict) -> None:
    """Add medians (of each metric separately) and the spread of rt_s."""
    samples = cell["samples"]
    cell["median"] = {}
    for metric in METRICS:
        values = [s[metric] for s in samples if s.get(metric) is not None]
        cell["median"][metric] = statistics.median(values) if values else None
    rates = [s["rt_s"] for s in samples]
    cell["spread"] = (max(rates) - min(rates)) / statistics.median(rates) if rates else None


def _si(value: float) -> str:
    return report.si(value)


def _short_reason(reason: str) -> str:
    return reason.split(":", 1)[0].strip() or reason


def _cell_text(cell: dict | None, metric: str = "rt_s", fmt=None) -> str:
    if cell is None:
        return "-"
    value = cell.get("median", {}).get(metric) if cell.get("samples") else None
    if value is None:
        if cell.get("na"):
            return f"n/a ({_short_reason(cell['na'])})"
        return "FAILED" if cell.get("errors") else "-"
    text = fmt(value) if fmt else _si(value)
    if cell["errors"] or cell["problems"]:
        text += "!"
    elif metric == "rt_s" and cell["spread"] is not None and cell["spread"] > NOISY:
        text += "~"
    return text


def _ratio(results: dict, row_id: str, other: str) -> float | None:
    cells = results[row_id]["cells"]
    if REF not in cells or other not in cells:
        return None
    a = cells[REF].get("median", {}).get("rt_s") if cells[REF]["samples"] else None
    b = cells[other].get("median", {}).get("rt_s") if cells[other]["samples"] else None
    return a / b if a and b else None


def markdown(header: list[str], rows: list[list[str]], right_from: int = 1) -> str:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(cells):
        out = [c.ljust(w) if i < right_from else c.rjust(w)
               for i, (c, w) in enumerate(zip(cells, widths))]
        return "| " + " | ".join(out) + " |"

    rule = "|" + "|".join("-" * (w + 1) + (":" if i >= right_from else "-")
                          for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule] + [line(r) for r in rows])


def render(results: dict, loop_names: list[str]) -> str:
    """The main table: rt/s per loop, ratios, CPU-s per 1M, generator CPU."""
    shown = [n for n in ("asyncio", "uvloop", "rloop", "minloop") if n in loop_names]
    columns = shown + [BASELINE]
    others = [n for n in ("asyncio", "uvloop", "rloop") if n in loop_names] \
        if REF in loop_names else []
    header = ["row"] + [n if n != BASELINE else "C server" for n in columns]
    header += [f"{REF}/{n}" for n in others]
    header += [f"CPU-s/1M {n if n != BASELINE else 'C'}" for n in columns]
    header += ["gen CPU% " + "/".join(n if n != BASELINE else "C" for n in columns)]
    header += ["other load%"]
    body = []
    for row_id, entry in results.items():
        cells = entry["cells"]
        line = [row_id] + [_cell_text(cells.get(n)) for n in columns]
        for n in others:
            r = _ratio(results, row_id, n)
            line.append(f"{r:.2f}x" if r else "-")
        line += [_cell_text(cells.get(n), "cpu_per_m", lambda v: f"{v:.2f}")
                 if cells.get(n, {}).get("samples") else "-" for n in columns]
        gens = []
        for n in columns:
            u = cells.get(n, {}).get("median", {}).get("client_util") \
                if cells.get(n, {}).get("samples") else None
            gens.append(f"{u * 100:.0f}" if u is not None else "-")
        line.append("/".join(gens))
        loads = [s["other_load"] for c in cells.values() for s in c["samples"]
                 if s.get("other_load") is not None]
        line.append(f"{statistics.median(loads) * 100:.0f}" if loads else "-")
        body.append(line)
    return markdown(header, body)


def render_extra(results: dict, loop_names: list[str]) -> str:
    """MB/s for the echo rows with large messages; p50/p99 for the HTTP rows."""
    shown = [n for n in ("asyncio", "uvloop", "rloop", "minloop") if n in loop_names]
    columns = shown + [BASELINE]
    names = [n if n != BASELINE else "C server" for n in columns]
    out = []
    mb_rows = [[rid] + [_cell_text(e["cells"].get(n), "mb_s", lambda v: f"{v:.0f}")
                        for n in columns]
               for rid, e in results.items() if e["row"]["size"] >= 64 * KiB]
    if mb_rows:
        out += ["Throughput, MB/s echoed (the same runs):", "",
                markdown(["row"] + names, mb_rows), ""]

    def ms(v):
        return f"{v * 1e3:.2f}"

    lat_rows = []
    for rid, e in results.items():
        if e["row"]["group"] != "http":
            continue
        lat_rows.append([rid] + [
            f"{_cell_text(e['cells'].get(n), 'p50', ms)} / {_cell_text(e['cells'].get(n), 'p99', ms)}"
            if e["cells"].get(n, {}).get("samples") else _cell_text(e["cells"].get(n))
            for n in columns])
    if lat_rows:
        out += ["HTTP latency from wrk, p50 / p99 in ms (medians over rounds):", "",
                markdown(["row"] + names, lat_rows), ""]
    return "\n".join(out)


def _cpu_ratio(results: dict, row_id: str, other: str) -> float | None:
    """The other loop's CPU-s/1M over minloop's: above 1, minloop is cheaper."""
    cells = results[row_id]["cells"]
    if REF not in cells or other not in cells:
        return None
    a = cells[REF].get("median", {}).get("cpu_per_m") if cells[REF]["samples"] else None
    b = cells[other].get("median", {}).get("cpu_per_m") if cells[other]["samples"] else None
    return b / a if a and b else None


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geomeans(results: dict, loop_names: list[str]) -> list[str]:
    """Geometric means over the TCP echo rows of minloop's rate ratio, and of
    its CPU-cost ratio (steadier on a busy machine: waiting costs no CPU)."""
    lines = []
    tcp = [rid for rid, e in results.items() if e["row"]["group"] in TCP_GROUPS]
    if REF not in loop_names or not tcp:
        return lines
    for other in ("uvloop", "asyncio", "rloop"):
        if other not in loop_names:
            continue
        rates = [r for r in (_ratio(results, rid, other) for rid in tcp) if r]
        costs = [r for r in (_cpu_ratio(results, rid, other) for rid in tcp) if r]
        if not rates:
            lines.append(f"geometric mean over the TCP echo rows, {REF}/{other}: "
                         f"n/a (no row has both)")
            continue
        text = (f"geometric mean over the TCP echo rows, {REF}/{other}: {_geomean(rates):.2f}x "
                f"by round trips/s ({len(rates)} of {len(tcp)} rows)")
        if costs:
            text += f", {_geomean(costs):.2f}x by CPU-s/1M ({other}'s over {REF}'s)"
        lines.append(text)
    return lines


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Compare event loops as network servers, one fresh process per run.")
    parser.add_argument("--quick", action="store_true",
                        help="0.25 s runs, 2 rounds (about 3 minutes)")
    parser.add_argument("--rounds", type=int, help="rounds per loop (default 4, or 2 with --quick)")
    parser.add_argument("--duration", type=float,
                        help="timed seconds per run (default 1.0, or 0.25 with --quick; "
                             "wrk rounds it to whole seconds)")
    parser.add_argument("--warmup", type=float,
                        help="untimed seconds before each run (default 0.2, or 0.1 with --quick)")
    parser.add_argument("--loops", default=",".join(loops.NAMES),
                        help="comma-separated loops, in run order (default: %(default)s)")
    parser.add_argument("--rows", default=",".join(DEFAULT_GROUPS),
                        help="comma-separated row ids, groups (tcp, pipe, unix, udp, http, "
                             "many) or glob patterns (default: all but many, the rows of "
                             "1,000 connections)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="do not measure the C server")
    parser.add_argument("--baseline-rounds", type=int,
                        help="rounds of the C server per row (default 2, or 1 with --quick; "
                             "it is a check on the load generator, not a contestant)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin to CPUs")
    parser.add_argument("--require", default="",
                        help="comma-separated loops that must be available (exit 2 if not)")
    parser.add_argument("--json", metavar="FILE", help="also write every sample as JSON")
    parser.add_argument("--list", action="store_true", help="list the rows and exit")
    args = parser.parse_args(argv)

    if args.list:
        for row in ROWS.values():
            print(f"{row.id:<26} {row.doc}")
        return 0
    loop_names = compare._names(parser, args.loops, loops.NAMES, "loop")
    required = compare._names(parser, args.require, loops.NAMES, "loop")
    try:
        rows = select_rows(args.rows)
    except ValueError as exc:
        parser.error(str(exc))
    # More short rounds rather than few long ones: on a shared machine the
    # noise comes in bursts, which a median over rounds absorbs.
    rounds = args.rounds or (2 if args.quick else 4)
    duration = args.duration or (0.25 if args.quick else 1.0)
    warmup = args.warmup if args.warmup is not None else (0.1 if args.quick else 0.2)
    if rounds < 1 or duration <= 0 or warmup < 0:
        parser.error("--rounds, --duration and --warmup must be positive")

    if not shutil.which("gcc"):
        print("gcc not found: the load generator is built from C at run time", file=sys.stderr)
        return 2
    try:
        bins = {name: build(name) for name in C_SOURCES}
    except subprocess.CalledProcessError as exc:
        print(f"building the C programs failed:\n{exc.stderr}", file=sys.stderr)
        return 2
    have_wrk = shutil.which("wrk") is not None
    pin = Pinning(not args.no_pin)

    machine = procs.machine_info()
    probes = procs.probe_loops(sorted(set(loop_names) | set(required), key=loops.NAMES.index),
                                 120.0)
    available = [n for n in loop_names if probes[n]["available"]]
    missing = [n for n in required if not probes[n]["available"]]
    if missing:
        print(f"required loop(s) unavailable: {', '.join(missing)}", file=sys.stderr)
        return 2

    print(f"event loop network benchmarks: median of {rounds} rounds of {duration:g} s "
          f"(after {warmup:g} s warm-up), a fresh server process per run"
          + (" (--quick)" if args.quick else ""))
    print(f"python: {machine['python']} on {machine['platform']}")
    print(f"cpu: {machine['cpu']}, {machine['cpu_count']} CPUs; {pin.describe}")
    print("loops: " + ", ".join(f"{n} {probes[n]['version']}" for n in available))
    for n in loop_names:
        if not probes[n]["available"]:
            print(f"skipped: {n} ({probes[n]['reason']})")
    if not have_wrk:
        print("wrk not found: the http rows are n/a")
    print(flush=True)

    baseline_rounds = args.baseline_rounds or (1 if args.quick else 2)
    baseline_rounds = 0 if args.no_baseline else min(baseline_rounds, rounds)
    # The C server's rounds, spread over the loops' rounds (2 of 4: 1 and 3).
    baseline_at = {1 + i * rounds // baseline_rounds for i in range(baseline_rounds)}
    workdir = tempfile.mkdtemp(prefix="minloop-net-")
    results: dict = {}
    total = len(rows) * (rounds * len(available) + baseline_rounds)
    progress = report.Progress(total)
    try:
        for row in rows:
            names = available + ([BASELINE] if baseline_rounds else [])
            cells = {n: {"samples": [], "errors": [], "problems": [], "na": None}
                     for n in names}
            for round_ in range(1, rounds + 1):
                for name in names:
                    if name == BASELINE and round_ not in baseline_at:
                        continue
                    cell = cells[name]
                    if cell["na"]:  # it will not become available next round
                        progress.step()
                        continue
                    progress.show(row.id, round_, rounds, name)
                    if row.group == "http" and not have_wrk:
                        answer = {"na": "wrk not found"}
                    else:
                        answer = measure(row, name, bins, pin, workdir, duration, warmup)
                    progress.step()
                    if "na" in answer:
                        cell["na"] = answer["na"]
                    elif "error" in answer:
                        cell["errors"].append(f"round {round_}: {answer['error']}")
                    else:
                        cell["samples"].append(answer)
                        cell["problems"] += [f"round {round_}: {p}" for p in answer["problems"]]
            for cell in cells.values():
                summarise(cell)
            results[row.id] = {"row": asdict(row), "cells": cells}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    progress.finish()

    print(render(results, available))
    print()
    print(f"Round trips per second (requests per second for http), median of {rounds} "
          f"rounds; C server: {baseline_rounds} round(s).")
    if REF in available:
        print(f"{REF}/X: {REF}'s rate over X's; above 1 means {REF} is faster.")
    print("CPU-s/1M: server CPU seconds (user + system) per million round trips; "
          "lower is cheaper.")
    print("gen CPU%: the load generator's CPU use in the timed window (100 = one core "
          "saturated: the generator, not the server, set the pace).")
    print("'~': rounds spread by more than "
          f"{NOISY:.0%} (max-min over median); '!': some rounds failed or misbehaved.")
    print("other load%: CPU time other processes took on the benchmark's CPUs during the "
          "runs (median over the row's runs).")
    for line in geomeans(results, available):
        print(line)
    loads = sorted(s["other_load"] for e in results.values() for c in e["cells"].values()
                   for s in c["samples"] if s.get("other_load") is not None)
    if loads and statistics.median(loads) > BUSY:
        print(f"WARNING: the machine was busy: other processes took a median "
              f"{statistics.median(loads):.0%} (worst {loads[-1]:.0%}) of the benchmark's "
              f"CPUs; the servers waited for CPU and the numbers carry that noise.")
    extra = render_extra(results, available)
    if extra:
        print()
        print(extra, end="")

    na = {}
    for rid, entry in results.items():
        for name, cell in entry["cells"].items():
            if cell["na"]:
                na.setdefault((name, cell["na"]), []).append(rid)
    if na:
        print("\nn/a:")
        for (name, reason), rids in na.items():
            print(textwrap.fill(f"{name}: {reason} [{', '.join(rids)}]",
                                initial_indent="  ", subsequent_indent="    ", width=100))

    noisy = sorted(((c["spread"], f"{rid}/{n}") for rid, e in results.items()
                    for n, c in e["cells"].items() if c["spread"] and c["spread"] > NOISY),
                   reverse=True)
    if noisy:
        # On a busy machine most cells are noisy: then the list says nothing
        # the '~' marks do not, and only the worst are named.
        cells_measured = sum(1 for e in results.values() for c in e["cells"].values()
                             if len(c["samples"]) > 1)
        shown = noisy[:MAX_NOISY_LISTED]
        title = (f"noisy (max-min over median > {NOISY:.0%}): {len(noisy)} of "
                 f"{cells_measured} cells" + (", the worst:" if len(noisy) > len(shown) else ":"))
        print("\n" + title)
        print(textwrap.fill(", ".join(f"{name} {spread:.0%}" for spread, name in shown),
                            initial_indent="  ", subsequent_indent="  ", width=100))

    status = 0
    reported = False
    for rid, entry in results.items():
        for name, cell in entry["cells"].items():
            for kind in ("errors", "problems"):
                seen: dict = {}
                for line in cell[kind]:
                    seen.setdefault(line.split(": ", 1)[1], []).append(line.split(":")[0])
                for message, where in seen.items():
                    if not reported:
                        print("\nfailures and misbehaviour:")
                        reported = True
                    label = "FAILED" if kind == "errors" else "misbehaved"
                    print(f"  {rid} / {name}: {label} in {len(where)} round(s): {message}")
                    if name == REF:
                        status = 1

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "rounds": rounds, "duration": duration,
                       "warmup": warmup, "quick": args.quick, "pinning": pin.describe,
                       "baseline_rounds": baseline_rounds, "loops": probes,
                       "results": results}, f, indent=2)
        print(f"\nwrote {args.json}")
    return status


if __name__ == "__main__":
    sys.exit(main())
