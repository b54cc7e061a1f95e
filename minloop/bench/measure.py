"""One measurement: a row of the bench (rows.py) on one loop, in fresh processes.

Each function returns the sample (a dict with "rate", the row's figure, and
"problems", what the run saw go wrong without failing), or {"na": reason}
where the loop cannot run the row, or {"error": ...} where the run failed.
The rounds around them, and the medians, are runner.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from . import client as client_module
from . import loops, procs, sendfile, tls
from .settings import Settings
from .rows import KiB, MB, Row, core_size, other_size


def measure_row(row: Row, loop: str, settings: Settings) -> dict:
    """One run of a standard row on one loop: the sample, or {"na"}/{"error"}."""
    if row.group in ("core", "scale"):
        return measure_core(row, loop, settings)
    if row.group == "memory":
        return measure_idle(row, loop, settings)
    if row.group == "other":
        return measure_other(row, loop, settings)
    return measure_net(row, loop, settings)


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
        argv = procs.module_command("minloop.bench.spawn", loop, str(amount),
                                    root=loops.root_of(loop))
        if row.at_once:
            argv += ["--concurrency", str(row.at_once)]
        if row.mode == "pipes":
            argv.append("--pipes")
    elif row.kind == "ospipe":
        argv = procs.module_command("minloop.bench.pipes", loop, f"{amount / MB:g}",
                                    "--chunk-kb", str(row.chunk // KiB),
                                    *pin.args(pin.server), root=loops.root_of(loop))
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
        "minloop.bench.child", row.workload, loop, str(n), *cpu, root=loops.root_of(loop)),
        settings.timeout)
    if "error" in answer:
        return answer
    problem = answer.pop("problem")
    return dict(answer, rate=n / answer["seconds"], n=n,
                problems=[problem] if problem else [])


def start_net_client(row: Row, pin, duration: float, warmup: float,
                     watch: list[int] | None = None) -> subprocess.Popen:
    """The row's load generator (client.py), started; it reads the server's
    address from its stdin (the server's "ready" line) and answers one JSON
    line."""
    return subprocess.Popen(
        [sys.executable, client_module.__file__, "--address", "-", "--mode", row.mode,
         "--conns", str(row.conns), "--size", str(row.size), "--depth", str(row.depth),
         "--duration", f"{duration:g}", "--warmup", f"{warmup:g}",
         *pin.args(pin.client), *(["--watch-cpus", ",".join(map(str, watch))] if watch else [])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def start_net_server(row: Row, loop: str, pin, tag: str = "") -> procs.ServerProcess:
    """The row's server (servers.py) on `loop`, pinned, listening (a Unix
    row's socket named after this process and `tag`: two servers of one
    run need two)."""
    where = []
    if row.kind == "unix":
        path = os.path.join(tempfile.gettempdir(), f"minloop-bench-{os.getpid()}{tag}.sock")
        if os.path.exists(path):
            os.unlink(path)  # a previous run's, killed before it cleaned up
        where = ["--path", path]
    return procs.ServerProcess(procs.module_command(
        "minloop.bench.servers", "--loop", loop, "--kind", row.kind,
        "--size", str(row.size), *where, *pin.args(pin.server),
        root=loops.root_of(loop)))


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
    client = start_net_client(row, pin, duration, warmup, watch)
    try:
        try:
            server = start_net_server(row, loop, pin)
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
            *pin.args(pin.server), root=loops.root_of(loop)))
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
