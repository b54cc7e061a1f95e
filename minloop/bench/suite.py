"""The standard benchmark set and its runner: ``python -m minloop bench``.

Rows are of five groups:

* core: a micro workload (workloads.py) timed inside a fresh interpreter per
  loop (child.py); its figure is operations per second;
* scale: the same, at the sizes real servers reach (100k tasks, 200k live
  timers, ...), whole in every profile, with the cyclic GC on at its default
  thresholds and the collections it ran counted per generation;
* memory: a Protocol echo server (servers.py --count) on the loop under test
  in a fresh process, N idle connections to it from another; the figure is
  the growth of the server's resident set per connection, after a full
  collection in the server and a settle time (lower is better);
* net: a server (servers.py) on the loop under test, in a fresh process
  pinned to one CPU, driven by the load generator (client.py) in another
  process pinned to the other CPU; its figure is round trips (requests) per
  second in a timed window after a warm-up;
* other: README.md's "TLS, subprocesses, sendfile, pipes" table, each row
  run in fresh processes by its own module: TLS echo (tls.py: a TLS server
  on the loop, its own load generator), subprocess spawn + wait (spawn.py),
  loop.sendfile to a receiver process (sendfile.py), an os.pipe() between
  two pipe transports (pipes.py); not in --quick.

Within each round the loops take turns on a row, so slow drift of the
machine falls on all of them alike; each figure is the median over rounds.

Row names (the scale and later rows; the older core rows keep their workload
names, which README.md cites): lowercase words joined by '-', subject first,
then its count or message size with k/m suffixes, then the variant;
connections as c<N> in full digits: tasks-100k-sleep2, timers-200k-fire,
tcp-protocol-1k-c1000.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

from . import client as client_module
from . import loops, pipes, procs, report, sendfile, tls, workloads

# The core workloads run at a quarter of their research size
# (benchmarks/compare.py runs them whole), a tenth with --quick: enough for
# steady medians, and the core rows stay within a few minutes.
FULL_DIVISOR = 4
QUICK_DIVISOR = 10
CHILD_TIMEOUT = 120.0
KiB = 1024
MB = 1024 * 1024


@dataclass(frozen=True)
class Row:
    id: str
    group: str          # "core" | "scale" | "memory" | "net" | "other"
    doc: str
    quick: bool         # part of the --quick set
    workload: str = ""  # core, scale: workloads.WORKLOADS key
    n: int = 0          # scale: the workload's size in every profile
    per: str = ""       # what the figure counts per second, if not "ops"
    lower_better: bool = False  # memory: bytes per connection
    min_duration: float = 0.0   # net: timed seconds at least (thousands of connections)
    kind: str = ""      # net: servers.py --kind; other: tls, spawn, sendfile, ospipe
    mode: str = "echo"  # net: client.py --mode
    conns: int = 1
    size: int = KiB
    depth: int = 1
    needs: str = ""     # a module the row needs importable (httptools)
    at_once: int = 0    # spawn: processes at once (0: one after the other);
                        # mode "pipes": stdio as pipes, not /dev/null
    chunk: int = 0      # ospipe: bytes per write

    @property
    def unit(self) -> str:
        if self.group == "memory":
            return "bytes/conn"
        if self.per:
            return f"{self.per}/s"
        if self.group == "core":
            return "ops/s"
        return "requests/s" if self.mode == "http" else "round trips/s"


def _rows() -> list[Row]:
    rows = []
    quick_core = {"call_soon_chain", "call_later_cancel", "sleep0_pingpong"}
    for w in map(workloads.WORKLOADS.get, workloads.CORE):
        rows.append(Row(w.name, "core", w.doc, w.name in quick_core, workload=w.name))
    scale = [
        ("tasks-100k-sleep2", "tasks_sleep_twice", 100_000, "tasks", False,
         "100k tasks each sleeping twice (random delays up to 50 ms), asyncio.gather"),
        ("timers-200k-cancel-half", "timers_held_cancel_half", 200_000, "timers", False,
         "200k call_later (up to 50 ms), handles held, a random half cancelled, "
         "the rest waited for"),
        ("timers-1k-fire", "timers_fire_due", 1_000, "timers", False,
         "firing 1k due timers whose handles are held (the firing alone is timed)"),
        ("timers-200k-fire", "timers_fire_due", 200_000, "timers", False,
         "firing 200k due timers whose handles are held (the firing alone is timed)"),
        ("callbacks-1m-chains100", "call_soon_chains", 1_000_000, "callbacks", False,
         "call_soon in 100 parallel chains (about 100 ready callbacks per iteration)"),
        ("tasks-100k-gather", "gather_tasks", 100_000, "tasks", False,
         "gather of 100k tasks of a coroutine that returns at once"),
    ]
    # None of them is in the --quick set: each is seconds per run and loop.
    for rid, workload, n, per, quick, doc in scale:
        rows.append(Row(rid, "scale", doc, quick, workload=workload, n=n, per=per))
    for conns in (5_000, 10_000):
        rows.append(Row(f"idle-tcp-c{conns}", "memory",
                        f"server RSS per idle TCP connection, {conns:,} connections to a "
                        f"Protocol echo server", False, kind="protocol", conns=conns,
                        lower_better=True))
    # With one message in flight the load generator pays a send and a recv
    # per round trip, as the server does, so at 16 connections it can be the
    # one that saturates (the report flags it).  Pipelined, it pays one send
    # per batch while the server answers each message: a third of the
    # server's CPU per round trip (smoke-measured), so --quick runs those.
    # The rows of README.md's networking table (benchmarks/net_compare.py
    # measures the same ones against its C load generator), under the same
    # names: <transport>-<server kind>-<message size>-c<connections>, one
    # message in flight on each connection unless the name says how many.
    net = []
    for kind, doc in (("protocol", "asyncio.Protocol echo"),
                      ("buffered", "asyncio.BufferedProtocol echo"),
                      ("streams", "start_server streams echo (read, write + drain)"),
                      ("sock", "sock_accept + sock_recv/sock_sendall echo")):
        for size in (KiB, 64 * KiB, 256 * KiB):
            for conns in (1, 16):
                net.append((f"tcp-{kind}-{size // KiB}k-c{conns}", kind, "echo", conns, size,
                            1, False, f"{doc}, {conns} connection(s), one "
                            f"{size // KiB} KiB message in flight on each"))
    for kind in ("protocol", "streams"):
        for conns in (1, 16):
            net.append((f"pipe-{kind}-32x1k-c{conns}", kind, "echo", conns, KiB, 32, False,
                        f"{kind} echo, {conns} connection(s), 32 messages of 1 KiB in "
                        f"flight on each"))
    # With one message in flight the load generator pays a send and a recv
    # per round trip, as the server does, so at 16 connections it can be the
    # one that saturates (the report flags it).  Pipelined, it pays one send
    # per batch while these servers answer each message with a write of its
    # own: a third of the server's CPU per round trip (smoke-measured), so
    # --quick runs those.
    net += [
        ("msgs-protocol-16x1k-c16", "protocol-msg", "echo", 16, KiB, 16, True,
         "Protocol answering each 1 KiB message with its own write; 16 pipelined per "
         "connection, 16 connections"),
        ("msgs-streams-16x1k-c16", "streams-msg", "echo", 16, KiB, 16, True,
         "streams: readexactly(1 KiB) -> write + drain per message; 16 pipelined per "
         "connection, 16 connections"),
    ]
    for conns in (1, 16):
        net.append((f"unix-protocol-1k-c{conns}", "unix", "echo", conns, KiB, 1, False,
                    f"asyncio.Protocol echo over a Unix socket, {conns} connection(s)"))
    for socks in (1, 10):
        net.append((f"udp-1k-s{socks}", "udp", "udp", socks, KiB, 1, False,
                    f"datagram echo, {socks} client socket(s), one 1 KiB datagram in "
                    f"flight on each"))
    for conns in (16, 64):
        net.append((f"http-c{conns}", "http", "http", conns, 0, 1, False,
                     f"keep-alive HTTP/1.1 on httptools, {conns} connections, one request "
                     f"in flight on each"))
    net.append(("http-pipe8-c16", "http", "http", 16, 0, 8, True,
                "keep-alive HTTP/1.1 on httptools, 16 connections, 8 pipelined requests "
                "on each"))
    # Thousands of connections, one message in flight on each: what the loop
    # pays per ready connection when many are ready at once.  A timed window
    # of a second at least, so that every connection makes many round trips.
    for conns in (1_000, 10_000):
        net += [
            (f"tcp-protocol-1k-c{conns}", "protocol", "echo", conns, KiB, 1, False,
             f"asyncio.Protocol echo, {conns:,} connections, one 1 KiB message in flight "
             f"on each"),
            (f"tcp-streams-1k-c{conns}", "streams", "echo", conns, KiB, 1, False,
             f"start_server streams echo, {conns:,} connections, one 1 KiB message in "
             f"flight on each"),
        ]
    net.append(("http-c1000", "http", "http", 1_000, 0, 1, False,
                "keep-alive HTTP/1.1 on httptools, 1,000 connections, one request in "
                "flight on each"))
    for rid, kind, mode, conns, size, depth, quick, doc in net:
        rows.append(Row(rid, "net", doc, quick, kind=kind, mode=mode, conns=conns,
                        size=size or KiB, depth=depth, needs="httptools" if mode == "http" else "",
                        min_duration=1.0 if conns >= 1_000 else 0.0))
    # README.md's "TLS, subprocesses, sendfile, pipes" table, under the same
    # sizes; the pipe row is "ospipe-", as "pipe-" names the pipelined TCP rows.
    for size in (KiB, 64 * KiB):
        for conns in (1, 16):
            rows.append(Row(f"tls-{size // KiB}k-c{conns}", "other",
                            f"TLS echo: create_server(ssl=) + Protocol echo, {conns} "
                            f"connection(s), one {size // KiB} KiB message in flight on each",
                            False, kind="tls", conns=conns, size=size))
    rows.append(Row("spawn-300-sequential", "other",
                    "create_subprocess_exec of `true` and wait, 300 one after the other",
                    False, kind="spawn", n=300, per="processes"))
    rows.append(Row("spawn-300-at50", "other",
                    "create_subprocess_exec of `true` and wait, 300 in batches of 50 at once "
                    "(gather)", False, kind="spawn", n=300, at_once=50, per="processes"))
    rows.append(Row("sendfile-100m", "other",
                    "loop.sendfile of a 100 MB file over loopback TCP to a receiver process "
                    "(loops without it: read + write, as aiohttp falls back)", False,
                    kind="sendfile", size=100 * MB, per="MB"))
    rows.append(Row("ospipe-100m-64k", "other",
                    "100 MiB through an os.pipe() in 64 KiB writes, connect_write_pipe to "
                    "connect_read_pipe on one loop", False, kind="ospipe", size=100 * MB,
                    chunk=64 * KiB, per="MiB"))
    return rows


ROWS = {row.id: row for row in _rows()}
GROUPS = ("core", "scale", "memory", "net", "other")


def select_rows(spec: str | None, quick: bool, rows: dict | None = None,
                groups: dict | None = None) -> list[Row]:
    """Rows named by comma-separated ids, groups or glob patterns (a bare
    word also matches as a prefix: call_soon -> call_soon_*), in table
    order; without a spec, the standard (or --quick) set.  rows: the
    candidates (id -> Row; default ROWS); groups: group name -> row ids
    (default: GROUPS, by each row's group)."""
    rows = ROWS if rows is None else rows
    if groups is None:
        groups = {g: [r.id for r in rows.values() if r.group == g] for g in GROUPS}
    if not spec:
        return [row for row in rows.values() if row.quick or not quick]
    chosen = set()
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item in groups:
            hits = set(groups[item])
        else:
            hits = set(fnmatch.filter(rows, item)) or set(fnmatch.filter(rows, item + "*"))
        if not hits:
            raise ValueError(f"no row matches {item!r}; rows: {', '.join(rows)}")
        chosen |= hits
    return [row for rid, row in rows.items() if rid in chosen]


# ---------------------------------------------------------------------------
# One measurement
# ---------------------------------------------------------------------------


@dataclass
class Settings:
    quick: bool
    rounds: int
    duration: float   # net: timed seconds per run
    warmup: float     # net: untimed seconds before it
    pin: procs.Pinning
    timeout: float = CHILD_TIMEOUT  # seconds before a measuring child is abandoned


def core_size(row: Row, quick: bool) -> int:
    if row.n:
        return row.n
    w = workloads.WORKLOADS[row.workload]
    return max(w.n // (QUICK_DIVISOR if quick else FULL_DIVISOR), w.smoke_n)


# --quick (with --only) shrinks the spawn, sendfile and pipe rows by this.
OTHER_QUICK_DIVISOR = 5


def other_size(row: Row, quick: bool) -> int:
    """The processes (spawn) or bytes (sendfile, ospipe) of an other row."""
    amount = row.n or row.size
    return max(1, amount // OTHER_QUICK_DIVISOR) if quick else amount


def measure_other(row: Row, loop: str, settings: Settings) -> dict:
    """One run of a row of README.md's "TLS, subprocesses, sendfile, pipes"
    table, in fresh processes: the sample (with "rate"), or {"na"}/{"error"}."""
    pin = settings.pin
    if row.kind == "tls":
        return tls.measure(loop, row.size, row.conns, settings.duration, settings.warmup,
                           pin)
    amount = other_size(row, settings.quick)
    if row.kind == "sendfile":
        return sendfile.measure(loop, amount, pin)
    if row.kind == "spawn":
        # Not pinned: the spawned processes would inherit the CPU and queue
        # behind the loop that waits for them.
        argv = procs.module_command("minloop.bench.spawn", loop, str(amount))
        if row.at_once:
            argv += ["--concurrency", str(row.at_once)]
        if row.mode == "pipes":
            argv.append("--pipes")
    elif row.kind == "ospipe":
        argv = procs.module_command("minloop.bench.pipes", loop, f"{amount / MB:g}",
                                    "--chunk-kb", str(row.chunk // KiB),
                                    *pin.args(pin.server))
    else:
        raise ValueError(f"unknown kind {row.kind!r} of row {row.id}")
    answer = procs.run_json(argv, settings.timeout)
    if "unsupported" in answer:
        return {"na": answer["unsupported"]}
    if "error" not in answer:
        answer["problems"] = []
    return answer


def measure_core(row: Row, loop: str, settings: Settings) -> dict:
    n = core_size(row, settings.quick)
    # The scale rows run on one CPU, as issue 10's figures were measured; the
    # core rows as before (call_soon_threadsafe has a second thread).
    pinned = row.group == "scale" and settings.pin.server is not None
    cpu = [str(settings.pin.server)] if pinned else []
    answer = procs.run_json(procs.module_command(
        "minloop.bench.child", row.workload, loop, str(n), *cpu), settings.timeout)
    if "error" in answer:
        return answer
    problem = answer.pop("problem")
    return dict(answer, rate=n / answer["seconds"], n=n,
                problems=[problem] if problem else [])


def measure_net(row: Row, loop: str, settings: Settings) -> dict:
    shortfall = nofile_shortfall(row.conns)
    if shortfall:
        return {"na": shortfall}
    pin = settings.pin
    duration = max(settings.duration, row.min_duration)
    warmup = max(settings.warmup, row.min_duration / 4)
    watch = [c for c in (pin.server, pin.client) if c is not None]
    # The load generator starts alongside the server (a bare interpreter,
    # ready first) and reads the server's address from stdin once it is up.
    client = subprocess.Popen(
        [sys.executable, client_module.__file__, "--address", "-", "--mode", row.mode,
         "--conns", str(row.conns), "--size", str(row.size), "--depth", str(row.depth),
         "--duration", f"{duration:g}", "--warmup", f"{warmup:g}",
         *pin.args(pin.client), *(["--watch-cpus", ",".join(map(str, watch))] if watch else [])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        where = []
        if row.kind == "unix":
            path = os.path.join(tempfile.gettempdir(), f"minloop-bench-{os.getpid()}.sock")
            if os.path.exists(path):
                os.unlink(path)  # a previous run's, killed before it cleaned up
            where = ["--path", path]
        try:
            server = procs.ServerProcess(procs.module_command(
                "minloop.bench.servers", "--loop", loop, "--kind", row.kind,
                "--size", str(row.size), *where, *pin.args(pin.server)))
        except procs.ServerProcess.Unsupported as exc:
            return {"na": str(exc)}
        except procs.ServerProcess.Failed as exc:
            return {"error": str(exc)}
        try:
            answer = procs.communicate_json(client, json.dumps(server.address) + "\n",
                                            duration + warmup + 60)
        finally:
            server.stop()
    finally:
        if client.poll() is None:
            client.kill()
            client.communicate()
    problems = server.problems()
    if "error" in answer:
        return {"error": f"load generator: {answer['error']}"
                + (f" ({problems[0]})" if problems else "")}
    seconds = answer["seconds"]
    if answer["round_trips"] <= 0 or seconds <= 0:
        return {"error": "no round trips in the timed window"}
    sample = dict(answer, rate=answer["round_trips"] / seconds,
                  client_util=answer["client_cpu"] / seconds, problems=problems)
    if row.mode == "echo":
        sample["mb_s"] = answer["round_trips"] * row.size / seconds / 1e6
    if answer.get("server_cpu") is not None:
        sample["server_util"] = answer["server_cpu"] / seconds
        sample["server_us"] = answer["server_cpu"] / answer["round_trips"] * 1e6
        if answer.get("server_user_cpu") is not None:
            sample["server_user_us"] = answer["server_user_cpu"] / answer["round_trips"] * 1e6
        if answer.get("cpus_busy") is not None:
            # What other processes took of the two CPUs meanwhile.
            other = answer["cpus_busy"] - answer["server_cpu"] - answer["client_cpu"]
            sample["other_load"] = max(0.0, other / (seconds * len(watch)))
    return sample


SETTLE = 0.5  # seconds the server's heap is left alone before its RSS is read
SPARE_FILES = 64  # open files a process needs besides its connections


def nofile_shortfall(conns: int) -> str | None:
    """Why conns connections cannot be opened here, or None if they can.
    The soft limit is raised to the hard one in both processes, so the hard
    limit is what counts."""
    try:
        import resource
    except ImportError:
        return None
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < conns + SPARE_FILES:
        return (f"{conns:,} connections need {conns + SPARE_FILES:,} open files; the hard "
                f"limit (ulimit -Hn) is {hard:,}")
    return None


def measure_idle(row: Row, loop: str, settings: Settings) -> dict:
    shortfall = nofile_shortfall(row.conns)
    if shortfall:
        return {"na": shortfall}
    pin = settings.pin
    try:
        server = procs.ServerProcess(procs.module_command(
            "minloop.bench.servers", "--loop", loop, "--kind", "protocol", "--count",
            *pin.args(pin.server)))
    except procs.ServerProcess.Unsupported as exc:
        return {"na": str(exc)}
    except procs.ServerProcess.Failed as exc:
        return {"error": str(exc)}
    client = None
    try:
        server.request("gc")
        time.sleep(SETTLE)
        before = server.request("gc")
        client = subprocess.Popen(
            [sys.executable, client_module.__file__, "--address", "-", "--mode", "idle",
             "--conns", str(row.conns), *pin.args(pin.client)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        client.stdin.write(json.dumps(server.address) + "\n")
        client.stdin.flush()
        # The client connects in batches and waits for a line before each
        # next one: the server accepts every batch before the next arrives,
        # so its accept queue never overflows (a connection dropped from a
        # full queue looks connected to the client and is never accepted).
        total = 0
        while total < row.conns:
            said = client.stdout.readline()
            try:
                total = json.loads(said)["connected"]
            except (ValueError, KeyError, TypeError):
                return {"error": f"load generator: {said.strip() or client.stderr.read()}"}
            deadline = time.monotonic() + 30.0
            while (now := server.request("gc"))["conns"] < total:
                if time.monotonic() > deadline:
                    return {"error": f"the server accepted {now['conns']} of {total} "
                                     f"connections in 30 s"}
                time.sleep(0.05)
            if total < row.conns:
                client.stdin.write("more\n")
                client.stdin.flush()
        time.sleep(SETTLE)
        after = server.request("gc")
    except procs.ServerProcess.Failed as exc:
        return {"error": str(exc)}
    finally:
        if client is not None:
            try:
                client.stdin.close()
                client.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                client.kill()
                client.wait()
        server.stop()
    if before["rss"] is None or after["rss"] is None:
        return {"na": "no /proc/self/status to read the resident set from"}
    problems = server.problems()
    if after["conns"] != row.conns:
        problems.append(f"{after['conns']} connections open at the end, not {row.conns}")
    return {"rate": (after["rss"] - before["rss"]) / row.conns, "rss_before": before["rss"],
            "rss_after": after["rss"], "conns": after["conns"], "problems": problems}


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------


def summarise(cell: dict) -> None:
    """Medians of the samples' figures, and the rounds' spread of the rate."""
    samples = cell["samples"]
    cell["median"] = {}
    for key in ("rate", "seconds", "client_util", "server_util", "server_us", "server_user_us",
                "other_load",
                "cpu", "cpu_us", "mb_s", "p50", "p99"):
        values = [s[key] for s in samples if s.get(key) is not None]
        cell["median"][key] = statistics.median(values) if values else None
    # Collections per generation, and per-phase times: medians of each part.
    for key in ("gc", "gc_fire"):
        lists = [s[key] for s in samples if s.get(key) is not None]
        if lists:
            cell["median"][key] = [statistics.median(g) for g in zip(*lists)]
    phases = [s["phases_ms"] for s in samples if s.get("phases_ms")]
    if phases:
        cell["median"]["phases_ms"] = {k: statistics.median(p[k] for p in phases)
                                       for k in phases[0]}
    rates = [s["rate"] for s in samples]
    cell["spread"] = (max(rates) - min(rates)) / statistics.median(rates) if rates else None


def _finish_row(row: Row, cells: dict, settings: Settings) -> dict:
    for cell in cells.values():
        summarise(cell)
    entry = {"row": dict(asdict(row), unit=row.unit), "cells": cells}
    if row.group in ("core", "scale"):
        entry["n"] = core_size(row, settings.quick)
    elif row.group == "other" and row.kind != "tls":
        entry["n"] = other_size(row, settings.quick)
    entry["ratios"] = report.ratios(entry)
    entry["cpu_ratios"] = report.ratios(entry, "server_us", lower_better=True)
    entry["ratio_ranges"] = report.ratio_ranges(entry)
    return entry


def measure_row(row: Row, loop: str, settings: Settings) -> dict:
    """One run of a standard row on one loop: the sample, or {"na"}/{"error"}."""
    if row.group in ("core", "scale"):
        return measure_core(row, loop, settings)
    if row.group == "memory":
        return measure_idle(row, loop, settings)
    if row.group == "other":
        return measure_other(row, loop, settings)
    return measure_net(row, loop, settings)


def run_rows(rows: list[Row], loop_names: list[str], settings: Settings,
             progress: report.Progress, results: dict, measure=measure_row,
             rounds_of: dict | None = None) -> dict:
    """Measure rows into results (row id -> entry), loops taking turns within
    each round.  Interrupted (KeyboardInterrupt), results keep every finished
    row and the finished rounds of the row under way, and the interrupt
    propagates.  measure(row, name, settings): one run (a script's own
    measuring: benchmarks/net_compare.py's C load generator); rounds_of:
    name -> the rounds a column runs in, where not all (a baseline)."""
    rounds_of = rounds_of or {}
    for row in rows:
        cells = {name: {"samples": [], "errors": [], "problems": [], "na": None}
                 for name in loop_names}
        if row.needs and importlib.util.find_spec(row.needs) is None:
            for cell in cells.values():
                cell["na"] = f"{row.needs} is not installed"
        try:
            for round_ in range(1, settings.rounds + 1):
                for name in loop_names:
                    if name in rounds_of and round_ not in rounds_of[name]:
                        continue
                    cell = cells[name]
                    if cell["na"]:  # it will not become available next round
                        progress.step()
                        continue
                    progress.show(row.id, round_, settings.rounds, name)
                    answer = measure(row, name, settings)
                    progress.step()
                    if "na" in answer:
                        cell["na"] = answer["na"]
                    elif "error" in answer:
                        cell["errors"].append(f"round {round_}: {answer['error']}")
                    else:
                        answer["round"] = round_
                        cell["samples"].append(answer)
                        cell["problems"] += [f"round {round_}: {p}"
                                             for p in answer["problems"]]
        except KeyboardInterrupt:
            if any(c["samples"] for c in cells.values()):
                results[row.id] = _finish_row(row, cells, settings)
            raise
        results[row.id] = _finish_row(row, cells, settings)
    return results


def runs(rows: list[Row], names: list[str], rounds: int, rounds_of: dict | None = None
         ) -> int:
    """How many measurements run_rows makes (the progress line's total)."""
    rounds_of = rounds_of or {}
    per_row = sum(len(rounds_of[n]) if n in rounds_of else rounds for n in names)
    return len(rows) * per_row


def run_script(rows: list[Row], loop_names: list[str], settings: Settings, *,
               required: list[str] = (), measure=measure_row, extra: list[str] = (),
               rounds_of: dict | None = None, header: list[str] = (),
               notes: list[str] = (), json_path: str | None = None,
               plot_path: str | None = None) -> int:
    """The whole run, for ``python -m minloop bench`` and every script in
    benchmarks/: probe the loops, print the header, measure the rows (loops
    taking turns within each round, progress on stderr), print the report,
    write the JSON and the plot.  extra: columns that are not loops (a
    baseline server), measured by measure after the loops; header, notes:
    the script's own lines.  The exit status: 0; 1 if minloop failed or
    misbehaved on some row; 2 if a loop in required is missing; 130 if
    interrupted (the finished rounds are reported)."""
    machine = procs.machine_info()
    probes = procs.probe_loops(sorted(set(loop_names) | set(required), key=loops.NAMES.index),
                               settings.timeout)
    available = [n for n in loop_names if probes[n]["available"]]
    missing = [n for n in required if not probes[n]["available"]]
    if missing:
        print(f"required loop(s) unavailable: {', '.join(missing)}", file=sys.stderr)
        return 2
    print(report.header(machine, probes, loop_names, settings, rows)
          + "".join(report.fill(line) + "\n" for line in header), flush=True)
    if not available:
        print("no loop can run here", file=sys.stderr)
        return 1
    columns = available + list(extra)
    progress = report.Progress(runs(rows, columns, settings.rounds, rounds_of))
    results: dict = {}
    interrupted = False
    try:
        run_rows(rows, columns, settings, progress, results, measure, rounds_of)
    except KeyboardInterrupt:
        interrupted = True
        progress.interrupted(len(results))
    else:
        progress.finish()
    if not results:
        return 130 if interrupted else 1

    print_report(results, columns, settings)
    for line in notes:
        print(report.fill(line))
    status = 130 if interrupted else (0 if report.ok(results) else 1)
    if json_path:
        report.write_json(json_path, machine, probes, settings, results,
                          interrupted=interrupted)
        print(f"\nwrote {json_path}")
    if plot_path:
        versions = {n: probes[n]["version"] for n in available}
        try:
            report.plot(plot_path, results, available,
                        dict(machine, rounds=settings.rounds, versions=versions))
        except Exception as exc:  # checked before measuring; this is rarer (disk full)
            print(f"minloop bench: --plot {plot_path}: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            return 1
        print(f"wrote {plot_path}")
    return status


# The summary's subsets besides the groups: README.md's networking table's
# geometric mean covers its TCP echo rows (one message in flight or
# pipelined), not UDP, Unix, HTTP or the thousands of connections.
SUMMARY_SUBSETS = {
    "tcp echo": lambda rid, entry: (entry["row"]["group"] == "net"
                                    and rid.startswith(("tcp-", "pipe-"))
                                    and entry["row"]["conns"] < 1_000),
}


def print_report(results: dict, available: list[str], settings: Settings) -> None:
    """The table, the details, the notes and the summary, as the bench prints them."""
    print(report.table(results, available))
    for part in (report.details(results, available),
                 report.notes(results, available, settings),
                 report.summary(results, available, SUMMARY_SUBSETS)):
        if part:
            print()
            print(part)


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="fewer rows, smaller sizes, shorter runs (about half a minute)")
    parser.add_argument("--json", metavar="FILE",
                        help="also write the environment, every round's figures, medians "
                             "and ratios as JSON")
    parser.add_argument("--plot", metavar="FILE.png",
                        help='also draw minloop\'s ratios, a panel per group, as .png, .svg, '
                             '.pdf, ... (needs matplotlib: pip install "minloop[plot]")')
    parser.add_argument("--loops", default=",".join(loops.NAMES),
                        help="comma-separated loops, in run order (default: %(default)s; "
                             "those not installed are skipped)")
    parser.add_argument("--only", metavar="ROWS",
                        help="comma-separated row ids, groups (core, scale, memory, net, "
                             "other) or "
                             "patterns instead of every row (--list shows them; without "
                             "--only or --quick the run takes roughly 27 minutes)")
    parser.add_argument("--rounds", type=int, metavar="N",
                        help="rounds per row and loop (default 5, or 3 with --quick)")
    parser.add_argument("--duration", type=float,
                        help="timed seconds per network run (default 0.3, or 0.15 with "
                             "--quick; at least 1 with 1,000 connections and more)")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin the server, the load generator and the scale "
                             "runs to CPUs")
    parser.add_argument("--list", action="store_true", help="list the rows and exit")


def _check_output(parser: argparse.ArgumentParser, option: str, path: str) -> None:
    """Refuse now, before any measuring, a file that could not be written later."""
    where = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        parser.error(f"{option} {path}: is a directory")
    if not os.path.isdir(where):
        parser.error(f"{option} {path}: no such directory: {where}")
    if not os.access(where, os.W_OK | os.X_OK) or (
            os.path.exists(path) and not os.access(path, os.W_OK)):
        parser.error(f"{option} {path}: not writable")


def _check_plot(parser: argparse.ArgumentParser, path: str) -> None:
    _check_output(parser, "--plot", path)
    try:
        formats = report.plot_formats()
    except report.PlotUnavailable as exc:
        parser.error(f"--plot needs matplotlib ({exc}): pip install \"minloop[plot]\"")
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if ext not in formats:
        parser.error(f"--plot {path}: the file name must end in one of "
                     + ", ".join("." + f for f in sorted(formats)))


def parse_loops(parser: argparse.ArgumentParser, text: str, option: str = "--loops"
                ) -> list[str]:
    """Comma-separated loop names, checked (a usage error names the known ones)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in loops.NAMES]
    if unknown or (not names and option == "--loops"):
        parser.error(f"{option}: unknown loop(s): {', '.join(unknown) or '(none)'}; "
                     f"known: {', '.join(loops.NAMES)}")
    return names


def main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        rows = select_rows(args.only, args.quick)
    except ValueError as exc:
        parser.error(str(exc))
    if args.list:
        for row in rows:
            mark = "*" if row.quick else " "
            print(report.list_line(row.id, mark, row.doc))
        print("\n* in the --quick set")
        return 0
    names = parse_loops(parser, args.loops)
    rounds = args.rounds if args.rounds is not None else (3 if args.quick else 5)
    duration = args.duration if args.duration is not None else (0.15 if args.quick else 0.3)
    if rounds < 1:
        parser.error("--rounds must be at least 1")
    if duration <= 0:
        parser.error("--duration must be positive")
    if args.json:
        _check_output(parser, "--json", args.json)
    if args.plot:
        _check_plot(parser, args.plot)
    settings = Settings(args.quick, rounds, duration, 0.05 if args.quick else 0.1,
                        procs.Pinning(not args.no_pin))
    return run_script(rows, names, settings, json_path=args.json, plot_path=args.plot)
