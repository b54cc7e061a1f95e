"""The interpreters group: each workload in 1 and in N sub-interpreters at
once, and, as the ceiling, in N separate processes at once.

    python -m minloop bench --only interpreters --loops asyncio,minloop [--interpreters N]
    python -m minloop.bench.interpreters WORKLOAD LOOP N COUNT [--size B] [--processes]
        -> {"rate", "seconds", "overlap", "cpu_util", "other_load", "rates",
            "collections", "problems"}

A program that wants every core from one process (3.14+) runs an event loop
in each of several sub-interpreters with their own GIL
(``concurrent.interpreters``, ``InterpreterPoolExecutor``).  This group
measures what that buys: each workload in one such sub-interpreter, then in
COUNT of them at once (``--interpreters``, default: the CPUs this process
may use), on minloop and on asyncio's own loop in the same interpreters.  No
other loop loads in a sub-interpreter (uvloop, rloop ...: their extension
modules refuse one); such a loop is n/a here.

How one measurement runs (this module's command line, in a fresh process):
the process starts COUNT threads; each creates an own-GIL sub-interpreter
and runs the workload there: imports the loop, a small untimed warm-up run,
then builds the workload on a fresh loop (untimed), collects garbage, says
"ready" on a pipe and blocks on a second one.  Once every interpreter is
ready the main interpreter releases them all with one write (the barrier),
and each times its run with time.perf_counter() (CLOCK_MONOTONIC: one clock
for the whole process) with the cyclic GC on, then checks the outcome as
workloads.py's workloads do.  The 1-interpreter figure runs in a
sub-interpreter too, through the same code, so that the two differ only in
how many run at once.

The ceiling, "N procs": the same workload in COUNT fresh processes at once,
each in its main interpreter (``--processes``; the bench starts them
itself): each process runs the very same in_interpreter() (warm-up, untimed
setup, gc on, the same checks), says "ready" on a pipe of its own, blocks
reading one it inherited, and all are released by one write of COUNT bytes;
each times its run with time.perf_counter(), which is CLOCK_MONOTONIC, one
clock for the whole machine, so the windows of different processes compare
as those of one process's threads do.  The aggregate is computed exactly as
for the interpreters.  Why: COUNT/1 mixes two things, what sub-interpreters
cost and what the machine gives COUNT busy threads at all (on a small VM two
vCPUs may share one physical core, or its frequency budget, and then even
two separate processes of dense Python each run at half the rate of one
alone).  COUNT processes are what COUNT sub-interpreters can hope for at
best, so "interp/procs", the COUNT-interpreter aggregate over the
COUNT-process one, is the cost of sub-interpreters alone: near 1, they scale
as separate processes do, whatever the machine's own limit.  It is the same
idea as reporting a plain C server's figure beside a latency-bound network
row: the figure that shows where the machine, not the loop, ends.

The figure: the aggregate rate, the operations of all interpreters over the
wall time from the first start to the last end (the union of their timed
windows).  An interpreter that finishes late therefore counts against the
aggregate (a sum of each interpreter's own rate would not see it), and the
figure is a rate the process really sustained.  "overlap" says how much the
windows overlapped (the common part over the union): near 1, the
interpreters did run at once.  "cpu_util": the CPU time of the
interpreters' threads in their timed runs (time.thread_time()), over the
union window: about COUNT where every interpreter kept a core busy.
"other_load": what other processes took of this process's CPUs from the
release to the last result (/proc/stat, 10 ms ticks), as the network rows
report it: a busy machine shows there, not as a loop's poor scaling (for
the processes: what processes other than the measuring ones and their
parent took, the children's CPU time after "ready" from getrusage).

The workloads (rows.py's interpreters group, by workload name):
  call_soon_chain  workloads.py's: a callback that schedules itself
  timer_chains     timer firings in 100 chains, each timer re-arming its
                   chain with call_later(0) beside 10k held far-future
                   timers: a timer through the heap per firing, no waiting
                   on the clock (workloads.py's timer rows wait for their
                   deadlines or time the firing alone, neither of which one
                   barrier can line up across interpreters)
  tcp_echo         an asyncio.Protocol echo server and its client on the
                   same loop over 127.0.0.1, one SIZE-byte message in
                   flight: no load generator outside competes for the cores
The HTTP row is not here: the engine's HTTP server stands on httptools, a
Cython extension that does not load in an own-GIL sub-interpreter, and a
pure-Python parser would time the parser, not the loop.

Each row's measurement (one round, one loop) is three runs: a fresh process
with one interpreter, one with COUNT, then COUNT fresh processes; the
rounds, the loops taking turns, the medians and the main table are
runner.py's (the figure there: the COUNT-interpreter aggregate), and
print_report() adds the group's own tables: 1 and COUNT interpreters side
by side, COUNT/1 and minloop over asyncio at each; then COUNT interpreters
beside COUNT processes, interp/procs and minloop over asyncio in COUNT
processes.  On a Python without concurrent.interpreters the whole group is
n/a: the processes are not measured there either (the ceiling means
something only beside the interpreters' figure), though run_processes()
itself runs on any Python.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import select
import statistics
import sys
import threading
import time

from . import loops, procs, report, runner, workloads
from .client import cpus_busy
from .measure import measure_row
from .rows import KiB, QUICK_DIVISOR, Row

GROUP = "interpreters"
START_TIMEOUT = 60.0  # seconds for every interpreter to start, import and warm up


def cpus() -> int:
    """The CPUs this process may run on: the default interpreter count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def unavailable() -> str | None:
    """Why no own-GIL sub-interpreter can be started here, or None."""
    try:
        import concurrent.interpreters  # noqa: F401  (3.14+)
    except ImportError:
        return (f"needs concurrent.interpreters (Python 3.14+) to start sub-interpreters "
                f"with their own GIL; this is Python {platform.python_version()}")
    return None


# ---------------------------------------------------------------------------
# Workloads (setup(loop, n) -> (go, verify), as workloads.py's)
# ---------------------------------------------------------------------------

TIMER_CHAINS = 100
TIMERS_HELD = 10_000


def timer_chains(loop, n):
    """n timer firings in 100 chains, each re-arming with call_later(0), 10k timers held."""
    count = 0
    last = n - TIMER_CHAINS  # the firings up to here re-arm their chain
    fired_far = 0

    def fire():
        nonlocal count
        count += 1
        if count <= last:
            loop.call_later(0, fire)
        elif count == n:
            loop.stop()

    def far():
        nonlocal fired_far
        fired_far += 1

    base = loop.time() + 3600.0  # an hour ahead: never due during the run
    held = [loop.call_at(base + i * 1e-3, far) for i in range(TIMERS_HELD)]

    def start():
        for _ in range(min(TIMER_CHAINS, n)):
            loop.call_later(0, fire)

    def go():
        loop.call_soon(start)
        loop.run_forever()

    def verify():
        for h in held:
            h.cancel()
        workloads._expect(count == n, f"{count} of {n} timer firings")
        workloads._expect(fired_far == 0, f"{fired_far} far-future timers ran")

    return go, verify


def tcp_echo(loop, n, size=KiB):
    """n round trips of a 1 KiB message, Protocol echo server and client on one loop."""
    message = b"x" * size
    trips = 0
    pending = 0  # bytes of the message in flight still to come back
    surplus = 0  # bytes back beyond what was sent

    class Echo(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport

        def data_received(self, data):
            self.transport.write(data)

    class Client(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport

        def data_received(self, data):
            nonlocal trips, pending, surplus
            pending -= len(data)
            if pending > 0:
                return
            surplus -= pending
            trips += 1
            if trips < n:
                pending = size
                self.transport.write(message)
            else:
                loop.stop()

    server = loop.run_until_complete(loop.create_server(Echo, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    transport, _ = loop.run_until_complete(
        loop.create_connection(Client, "127.0.0.1", port))

    def go():
        nonlocal pending
        pending = size
        transport.write(message)
        loop.run_forever()

    def verify():
        transport.close()
        server.close()
        loop.run_until_complete(asyncio.wait_for(server.wait_closed(), 10.0))
        workloads._expect(trips == n, f"{trips} of {n} round trips")
        workloads._expect(surplus == 0, f"{surplus} bytes echoed beyond those sent")

    return go, verify


SETUPS = {"call_soon_chain": workloads.call_soon_chain, "timer_chains": timer_chains,
          "tcp_echo": tcp_echo}
SMOKE_N = 1_000  # the warm-up run's size


def size_of(row: Row, quick: bool) -> int:
    """Operations per interpreter: the row's n, a tenth with --quick."""
    return max(row.n // QUICK_DIVISOR, SMOKE_N) if quick else row.n


# ---------------------------------------------------------------------------
# Inside one sub-interpreter
# ---------------------------------------------------------------------------

# What each sub-interpreter runs: it starts with the path the interpreter was
# configured with, not this process's (procs.module_command put the package's
# root first at run time).
_CODE = """\
import json, os, sys
sys.path[:] = {path!r}
try:
    from minloop.bench.interpreters import in_interpreter
except BaseException as exc:
    os.write({ready_w}, b"!")
    os.write({out_w}, json.dumps({{"error": f"{{type(exc).__name__}}: {{exc}}"}}).encode())
    raise
in_interpreter({workload!r}, {loop!r}, {n}, {size}, {ready_w}, {go_r}, {out_w})
"""


def in_interpreter(workload: str, loop_name: str, n: int, size: int,
                   ready_w: int, go_r: int, out_w: int) -> None:
    """One interpreter's run: warm up, build, say ready (exactly one byte on
    ready_w, whatever happens), wait for the release on go_r, time the run,
    check it; one JSON object on out_w.  The same for a sub-interpreter
    (run_interpreters) and for a process's main interpreter (run_processes,
    the ceiling).  go_r at its end without a release (the parent gone): no
    run, an error."""
    setup = SETUPS[workload]
    if workload == "tcp_echo":
        setup = (lambda loop, n, _setup=setup: _setup(loop, n, size))
    ready = False
    loop = None
    result: dict = {"error": "interrupted"}
    try:
        try:
            factory = loops.factory(loop_name)
        except loops.Unavailable as exc:
            result = {"unsupported": str(exc)}
            return
        warm = factory()
        try:
            go, verify = setup(warm, min(n, SMOKE_N))
            go()
            verify()
        except workloads.Misbehaved:
            pass  # the measured run reports it
        finally:
            warm.close()
        loop = factory()
        go, verify = setup(loop, n)
        gc.collect()
        ready = True
        # The process's CPU time so far (run_processes: its other_load).
        cpu_ready = time.process_time()
        os.write(ready_w, b"r")
        if not os.read(go_r, 1):
            result = {"error": "the barrier closed without a release"}
            return
        with workloads.GcCounter() as collections:
            cpu = time.thread_time()
            start = time.perf_counter()
            go()
            end = time.perf_counter()
            cpu = time.thread_time() - cpu
        result = {"start": start, "end": end, "cpu": cpu, "n": n,
                  "collections": collections.snapshot(), "problem": None,
                  "cpu_ready": cpu_ready}
        try:
            verify()
        except workloads.Misbehaved as exc:
            result["problem"] = str(exc)
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        if not ready:
            os.write(ready_w, b"!")
        if loop is not None:
            loop.close()
        os.write(out_w, json.dumps(result).encode())


# ---------------------------------------------------------------------------
# One measurement: COUNT interpreters of a fresh process
# ---------------------------------------------------------------------------


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


class _OtherLoad:
    """What other processes take of this process's CPUs from now on
    (/proc/stat, 10 ms ticks): share() is their part of those CPUs' time
    since, less this process's own CPU time and `also_ours` seconds more
    (its children's, for run_processes); None where there is no /proc."""

    def __init__(self) -> None:
        self.cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.busy = cpus_busy(self.cpus) if self.cpus else None
        self.own, self.clock = time.process_time(), time.perf_counter()

    def share(self, also_ours: float = 0.0) -> float | None:
        if self.busy is None:
            return None
        took = (cpus_busy(self.cpus) - self.busy - (time.process_time() - self.own)
                - also_ours)
        return max(0.0, took / ((time.perf_counter() - self.clock) * len(self.cpus)))


def _readable(fds, deadline: float) -> list:
    """Those of fds that are readable by deadline (time.monotonic()); [] once
    it has passed."""
    left = deadline - time.monotonic()
    return select.select(list(fds), [], [], left)[0] if left > 0 else []


def run_interpreters(workload: str, loop_name: str, n: int, count: int,
                     size: int = KiB) -> dict:
    """The workload in count own-GIL sub-interpreters at once, released
    together: the aggregate figures (the module docstring), or
    {"unsupported"}/{"error"}."""
    why = unavailable()
    if why:
        return {"unsupported": why}
    from concurrent import interpreters

    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    outs = [os.pipe() for _ in range(count)]
    failed: list = [None] * count

    def run(i: int) -> None:
        code = _CODE.format(path=list(sys.path), workload=workload, loop=loop_name, n=n,
                            size=size, ready_w=ready_w, go_r=go_r, out_w=outs[i][1])
        try:
            interp = interpreters.create()
        except Exception as exc:
            failed[i] = f"creating the interpreter: {type(exc).__name__}: {exc}"
            os.write(ready_w, b"!")
            return
        try:
            interp.exec(code)
        except interpreters.ExecutionFailed as exc:
            failed[i] = str(exc)
        finally:
            interp.close()

    threads = [threading.Thread(target=run, args=(i,), name=f"interpreter-{i + 1}")
               for i in range(count)]
    for t in threads:
        t.start()
    said = b""
    while len(said) < count:
        readable, _, _ = select.select([ready_r], [], [], START_TIMEOUT)
        if not readable:
            # The waiting interpreters hold the process: the parent's
            # timeout ends it.
            return {"error": f"{count - len(said)} of {count} interpreters not ready "
                             f"within {START_TIMEOUT:g} s"}
        said += os.read(ready_r, count - len(said))
    load = _OtherLoad()
    os.write(go_w, b"g" * count)  # the barrier: every interpreter at once
    for t in threads:
        t.join()
    other = load.share()
    answers = []
    for i, (r, w) in enumerate(outs):
        os.close(w)
        text = _read_all(r)
        os.close(r)
        try:
            answers.append(json.loads(text))
        except ValueError:
            answers.append({"error": failed[i] or "said nothing"})
    return aggregate(answers, "interpreter", other)


def aggregate(answers: list[dict], what: str, other: float | None) -> dict:
    """The figures of one measurement from its runs' answers (in_interpreter's
    JSON), the same for interpreters and processes (what names them): the
    aggregate rate over the union of the timed windows, the overlap, the
    CPUs kept busy, other_load as given; or {"unsupported"}/{"error"}."""
    count = len(answers)
    for a in answers:
        if "unsupported" in a:
            return {"unsupported": a["unsupported"]}
    errors = [f"{what} {i + 1} of {count}: {a['error']}"
              for i, a in enumerate(answers) if "error" in a]
    if errors:
        return {"error": "; ".join(errors)}
    first = min(a["start"] for a in answers)
    last = max(a["end"] for a in answers)
    window = last - first
    common = max(0.0, min(a["end"] for a in answers) - max(a["start"] for a in answers))
    return {"rate": sum(a["n"] for a in answers) / window, "seconds": window,
            "overlap": common / window,
            "cpu_util": sum(a["cpu"] for a in answers) / window, "other_load": other,
            "rates": [a["n"] / (a["end"] - a["start"]) for a in answers],
            "collections": [sum(g) for g in zip(*(a["collections"] for a in answers))],
            "problems": [f"{what} {i + 1} of {count}: {a['problem']}"
                         for i, a in enumerate(answers) if a["problem"]]}


# ---------------------------------------------------------------------------
# The ceiling: COUNT fresh processes, each in its main interpreter
# ---------------------------------------------------------------------------


def _tail(err) -> str:
    """The last line a child wrote to stderr (a binary temporary file)."""
    err.seek(0)
    lines = err.read().decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else "(no output)"


def run_processes(workload: str, loop_name: str, n: int, count: int, size: int = KiB,
                  timeout: float = 600.0) -> dict:
    """The workload in count fresh processes at once, each running
    in_interpreter() in its main interpreter, released together: the same
    figures as run_interpreters (the ceiling, the module docstring), or
    {"unsupported"}/{"error"}.  Runs on any Python.  timeout: seconds for
    the timed runs and their checks, after the release."""
    import resource
    import subprocess
    import tempfile

    def children_cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    children = []  # (process, its ready pipe's read end, its out pipe's read end, stderr)
    go_r, go_w = os.pipe()
    mine = [go_r, go_w]  # the descriptors this function still has to close
    cpu_before = children_cpu()
    try:
        for _ in range(count):
            ready_r, ready_w = os.pipe()
            out_r, out_w = os.pipe()
            mine += [ready_r, ready_w, out_r, out_w]
            err = tempfile.TemporaryFile()
            argv = procs.module_command(
                "minloop.bench.interpreters", workload, loop_name, str(n), "1",
                "--size", str(size), "--child", f"{ready_w},{go_r},{out_w}",
                root=loops.root_of(loop_name))
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=err,
                                    pass_fds=(ready_w, go_r, out_w))
            children.append((proc, ready_r, out_r, err))
            # The child's ends only in the child: a child that dies closes
            # its pipes (end of file here).
            for fd in (ready_w, out_w):
                os.close(fd)
                mine.remove(fd)
        os.close(go_r)
        mine.remove(go_r)

        # Every process ready (or said why not: "!"), within START_TIMEOUT.
        waiting = {ready_r: i for i, (_, ready_r, _, _) in enumerate(children)}
        deadline = time.monotonic() + START_TIMEOUT
        while waiting:
            readable = _readable(waiting, deadline)
            if not readable:
                return {"error": f"{len(waiting)} of {count} processes not ready "
                                 f"within {START_TIMEOUT:g} s"}
            for fd in readable:
                i = waiting.pop(fd)
                if not os.read(fd, 1):
                    proc, _, _, err = children[i]
                    try:
                        proc.wait(5.0)
                    except subprocess.TimeoutExpired:
                        pass
                    return {"error": f"process {i + 1} of {count} ended before it was "
                                     f"ready (exit status {proc.returncode}): {_tail(err)}"}
        load = _OtherLoad()
        os.write(go_w, b"g" * count)  # the barrier: every process at once

        # Each one's JSON, to the end of its pipe (it has exited), then its exit.
        chunks = {out_r: [] for _, _, out_r, _ in children}
        texts = {}
        deadline = time.monotonic() + timeout
        while chunks:
            readable = _readable(chunks, deadline)
            if not readable:
                return {"error": f"{len(chunks)} of {count} processes still running "
                                 f"after {timeout:g} s"}
            for fd in readable:
                chunk = os.read(fd, 65536)
                if chunk:
                    chunks[fd].append(chunk)
                else:
                    texts[fd] = b"".join(chunks.pop(fd))
        for i, (proc, _, _, _) in enumerate(children):
            try:
                proc.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return {"error": f"process {i + 1} of {count} did not exit after its result"}
        answers = []
        for proc, _, out_r, err in children:
            try:
                answers.append(json.loads(texts[out_r]))
            except ValueError:
                answers.append({"error": f"said nothing (exit status {proc.returncode}): "
                                         f"{_tail(err)}"})
        # Other processes: all but this one and its children after they said
        # ready.
        other = None
        if all("cpu_ready" in a for a in answers):
            theirs = children_cpu() - cpu_before - sum(a["cpu_ready"] for a in answers)
            other = load.share(theirs)
        return aggregate(answers, "process", other)
    finally:
        for proc, _, _, err in children:
            if proc.poll() is None:  # an error or an interrupt left it running
                proc.kill()
                proc.wait()
            err.close()
        for fd in mine:
            os.close(fd)


# ---------------------------------------------------------------------------
# The bench's side: a row on a loop, 1 and count interpreters
# ---------------------------------------------------------------------------


def measure(row: Row, loop: str, settings, count: int) -> dict:
    """One round of an interpreters row on one loop: a fresh process with one
    interpreter, then one with count, then count fresh processes (the
    ceiling); the sample ("rate": count interpreters' aggregate; "rate_1",
    "scaling": count's over one's in this round; "rate_procs": count
    processes' aggregate, "interp_over_procs": count interpreters' over it in
    this round, with the processes' "overlap_procs", "cpu_util_procs",
    "other_load_procs", "rates_procs", "collections_procs"), or
    {"na"}/{"error"}."""
    why = unavailable()
    if why:
        return {"na": why}
    n = size_of(row, settings.quick)
    runs = {}
    for k in dict.fromkeys((1, count)):
        answer = procs.run_json(procs.module_command(
            "minloop.bench.interpreters", row.workload, loop, str(n), str(k),
            "--size", str(row.size), root=loops.root_of(loop)), settings.timeout)
        if "unsupported" in answer:
            why = f"in a sub-interpreter: {answer['unsupported']}"
            # minloop not loading in a sub-interpreter is its bug, not n/a.
            return {"error": why} if loop == report.REF else {"na": why}
        if "error" in answer:
            return {"error": f"{k} interpreter(s): {answer['error']}"}
        runs[k] = answer
    # The ceiling: the same workload, through the same in_interpreter(), in
    # count processes' main interpreters.
    ceiling = run_processes(row.workload, loop, n, count, row.size, settings.timeout)
    if "unsupported" in ceiling:
        why = f"in {count} processes: {ceiling['unsupported']}"
        return {"error": why} if loop == report.REF else {"na": why}
    if "error" in ceiling:
        return {"error": f"{count} process(es): {ceiling['error']}"}
    one, many = runs[1], runs[count]
    return {"rate": many["rate"], "rate_1": one["rate"], "scaling": many["rate"] / one["rate"],
            "seconds": many["seconds"], "overlap": many["overlap"],
            "cpu_util": many["cpu_util"], "cpu_util_1": one["cpu_util"],
            "other_load": _worst(one.get("other_load"), many.get("other_load")),
            "rates": many["rates"], "collections": many["collections"], "n": n,
            "interpreters": count,
            "rate_procs": ceiling["rate"],
            "interp_over_procs": many["rate"] / ceiling["rate"],
            "seconds_procs": ceiling["seconds"], "overlap_procs": ceiling["overlap"],
            "cpu_util_procs": ceiling["cpu_util"],
            "other_load_procs": ceiling.get("other_load"),
            "rates_procs": ceiling["rates"], "collections_procs": ceiling["collections"],
            "problems": (one["problems"] + (many["problems"] if count != 1 else [])
                         + [f"{count} processes: {p}" for p in ceiling["problems"]])}


def _worst(*loads):
    known = [x for x in loads if x is not None]
    return max(known) if known else None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interpreters", type=int, default=cpus(), metavar="N",
                        help="the interpreters group: how many sub-interpreters run at "
                             "once beside the 1-interpreter run (default: the CPUs, "
                             "%(default)s)")


def run_keywords(args: argparse.Namespace, parser, rows: list[Row]) -> dict:
    """What ``python -m minloop bench`` hands runner.run_script when rows
    include this group: the measuring function (this group's rows here, the
    others measure.measure_row's), the header line, the group's table."""
    if args.interpreters < 1:
        parser.error("--interpreters must be at least 1")
    if not any(row.group == GROUP for row in rows):
        return {}
    count = args.interpreters

    def measure_any(row: Row, loop: str, settings) -> dict:
        if row.group == GROUP:
            return measure(row, loop, settings, count)
        return measure_row(row, loop, settings)

    why = unavailable()
    line = (f"interpreters rows: cannot run here: {why}" if why else
            f"interpreters rows: each workload in 1 and in {count} own-GIL "
            f"sub-interpreters of one process at once (threads released together), "
            f"each in a fresh process, then in {count} fresh processes at once (the "
            f"ceiling), unpinned; the figure: the {count}-interpreter aggregate rate")
    return {"measure": measure_any, "header": [line],
            "after": lambda results, columns: print_report(results, columns, count)}


# ---------------------------------------------------------------------------
# The group's table
# ---------------------------------------------------------------------------


def _stats(samples: list[dict], key: str) -> tuple:
    """(median, spread) of a sample key over the rounds; the spread is the
    engine's (runner.spread: max - min over the median)."""
    values = [s[key] for s in samples if s.get(key)]
    if not values:
        return None, None
    return statistics.median(values), runner.spread(values)


def summarise(entry: dict, count: int) -> dict:
    """The group's figures of a row, per loop: rate_1, rate_n (median and
    spread), scaling (median, lowest, highest over the rounds' own ratios),
    overlap and cpu_util (medians); the ceiling: rate_procs (median and
    spread), interp_over_procs (as scaling), overlap_procs, cpu_util_procs,
    other_load_procs; and minloop over asyncio at 1 and at n interpreters
    and in n processes ("procs")."""
    out = {"interpreters": count, "loops": {}}
    for name, cell in entry["cells"].items():
        samples = cell["samples"]
        if not samples:
            continue
        r1, s1 = _stats(samples, "rate_1")
        rn, sn = _stats(samples, "rate")
        scalings = [s["scaling"] for s in samples]
        rp, sp = _stats(samples, "rate_procs")
        ceilings = [s["interp_over_procs"] for s in samples]
        out["loops"][name] = {
            "rate_1": r1, "spread_1": s1, "rate_n": rn, "spread_n": sn,
            "scaling": statistics.median(scalings),
            "scaling_range": [min(scalings), max(scalings)],
            "overlap": statistics.median(s["overlap"] for s in samples),
            "cpu_util": statistics.median(s["cpu_util"] for s in samples),
            "cpu_util_1": statistics.median(s["cpu_util_1"] for s in samples),
            "other_load": max((s["other_load"] for s in samples
                               if s.get("other_load") is not None), default=None),
            "rate_procs": rp, "spread_procs": sp,
            "interp_over_procs": statistics.median(ceilings),
            "interp_over_procs_range": [min(ceilings), max(ceilings)],
            "overlap_procs": statistics.median(s["overlap_procs"] for s in samples),
            "cpu_util_procs": statistics.median(s["cpu_util_procs"] for s in samples),
            "other_load_procs": max((s["other_load_procs"] for s in samples
                                     if s.get("other_load_procs") is not None),
                                    default=None)}
    got = out["loops"]
    if report.REF in got:
        for other in report.others(got):
            out.setdefault("ref_over", {})[other] = {
                "1": got[report.REF]["rate_1"] / got[other]["rate_1"],
                "n": got[report.REF]["rate_n"] / got[other]["rate_n"],
                "procs": got[report.REF]["rate_procs"] / got[other]["rate_procs"]}
    return out


def _pct(spread) -> str:
    return "" if spread is None else f" {spread:.0%}"


def _load(value) -> str:
    return "-" if value is None else f"{value:.0%}"


def print_report(results: dict, columns: list[str], count: int) -> None:
    """The group's tables after the bench's.  The first, per row and loop:
    the 1- and count-interpreter aggregate rates with their spreads, count/1
    with the rounds' range, the overlap and the CPUs kept busy; minloop over
    each other loop at 1 and at count.  The second, the ceiling: the
    count-interpreter aggregate again beside the count-process one,
    interp/procs with the rounds' range, the processes' overlap, CPUs and
    other load; minloop over each other loop in count interpreters and in
    count processes.  (Two tables, as one would not fit 80 columns.)  Adds
    the figures to the rows' entries (the JSON)."""
    mine = {rid: e for rid, e in results.items() if e["row"]["group"] == GROUP}
    if not any(c["samples"] for e in mine.values() for c in e["cells"].values()):
        return
    head = ["row / loop", "1 interp", f"{count} interp", f"{count}/1 (range)",
            "overlap", "CPUs", "other"]
    lines = [head]
    ceiling = [["row / loop", f"{count} interp", f"{count} procs", "interp/procs",
                "overlap", "CPUs", "other"]]
    for rid, entry in mine.items():
        figures = entry["interpreters"] = summarise(entry, count)
        lines.append([rid, "", "", "", "", "", ""])
        ceiling.append([rid, "", "", "", "", "", ""])
        for name, f in figures["loops"].items():
            lo, hi = f["scaling_range"]
            lines.append([f"  {name}", report.si(f["rate_1"]) + _pct(f["spread_1"]),
                          report.si(f["rate_n"]) + _pct(f["spread_n"]),
                          f"{f['scaling']:.2f}x ({lo:.2f}-{hi:.2f})",
                          f"{f['overlap']:.0%}", f"{f['cpu_util']:.2f}",
                          _load(f["other_load"])])
            lo, hi = f["interp_over_procs_range"]
            ceiling.append([f"  {name}", report.si(f["rate_n"]) + _pct(f["spread_n"]),
                            report.si(f["rate_procs"]) + _pct(f["spread_procs"]),
                            f"{f['interp_over_procs']:.2f}x ({lo:.2f}-{hi:.2f})",
                            f"{f['overlap_procs']:.0%}", f"{f['cpu_util_procs']:.2f}",
                            _load(f["other_load_procs"])])
        for other, r in figures.get("ref_over", {}).items():
            lines.append([f"  {report.REF}/{other}", f"{r['1']:.2f}x", f"{r['n']:.2f}x",
                          "", "", "", ""])
            ceiling.append([f"  {report.REF}/{other}", f"{r['n']:.2f}x",
                            f"{r['procs']:.2f}x", "", "", "", ""])
    print()
    print(report.fill(f"interpreters: aggregate rate (operations of all interpreters over "
                      f"the union of their timed windows) in 1 and in {count} own-GIL "
                      f"sub-interpreters at once; medians over the rounds, each with the "
                      f"rounds' spread (max-min over median); {count}/1: the median of the "
                      f"rounds' own ratios and their range; overlap: the common part of "
                      f"the {count} windows over their union; CPUs: the {count} interpreters' "
                      f"CPU time in their runs over the union window; other: the most other "
                      f"processes took of the CPUs in any run of the row."))
    print("\n".join(report._columns(lines, 1, [0, 1, 1, 1, 1, 1, 1])))
    print()
    print(report.fill(f"interpreters, the ceiling: the same workloads in {count} separate "
                      f"processes at once (each in its main interpreter, released by the "
                      f"same kind of barrier, the aggregate taken the same way), what "
                      f"{count} busy threads get from this machine at all; {count} procs: "
                      f"their aggregate (median, spread); interp/procs: {count} "
                      f"interpreters' aggregate over {count} processes', the median of the "
                      f"rounds' own ratios and their range (near 1: sub-interpreters scale "
                      f"as processes do); overlap, CPUs, other: the processes'."))
    print("\n".join(report._columns(ceiling, 1, [0, 1, 1, 1, 1, 1, 1])))


# ---------------------------------------------------------------------------
# The measuring process
# ---------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m minloop.bench.interpreters")
    parser.add_argument("workload", choices=sorted(SETUPS))
    parser.add_argument("loop")
    parser.add_argument("n", type=int)
    parser.add_argument("count", type=int)
    parser.add_argument("--size", type=int, default=KiB)
    parser.add_argument("--processes", action="store_true",
                        help="COUNT fresh processes at once, each in its main "
                             "interpreter (the ceiling), not COUNT sub-interpreters")
    # run_processes' children: in_interpreter() in this main interpreter, on
    # the descriptors inherited (ready pipe's write end, barrier's read end,
    # result pipe's write end).
    parser.add_argument("--child", metavar="READY_W,GO_R,OUT_W", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        ready_w, go_r, out_w = (int(fd) for fd in args.child.split(","))
        in_interpreter(args.workload, args.loop, args.n, args.size, ready_w, go_r, out_w)
        return 0
    if args.processes:
        result = run_processes(args.workload, args.loop, args.n, args.count, args.size)
        print(json.dumps(result), flush=True)
        return 0
    result = run_interpreters(args.workload, args.loop, args.n, args.count, args.size)
    sys.stdout.flush()
    print(json.dumps(result), flush=True)
    if "error" in result and "not ready" in result["error"]:
        os._exit(1)  # interpreters still waiting on the barrier hold the process
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
