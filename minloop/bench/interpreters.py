"""The interpreters group: each workload in 1 and in N sub-interpreters at once.

    python -m minloop bench --only interpreters --loops asyncio,minloop [--interpreters N]
    python -m minloop.bench.interpreters WORKLOAD LOOP N COUNT [--size B]
        -> {"rate", "seconds", "overlap", "cpu_util", "rates", "collections", "problems"}

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
report it: a busy machine shows there, not as a loop's poor scaling.

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

Each row's measurement (one round, one loop) is two fresh processes, one
interpreter then COUNT; the rounds, the loops taking turns, the medians and
the main table are runner.py's (the figure there: the COUNT-interpreter
aggregate), and report() adds the group's own table: 1 and COUNT
interpreters side by side, COUNT/1, and minloop over asyncio at each.
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
    check it; one JSON object on out_w."""
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
        os.write(ready_w, b"r")
        os.read(go_r, 1)
        with workloads.GcCounter() as collections:
            cpu = time.thread_time()
            start = time.perf_counter()
            go()
            end = time.perf_counter()
            cpu = time.thread_time() - cpu
        result = {"start": start, "end": end, "cpu": cpu, "n": n,
                  "collections": collections.snapshot(), "problem": None}
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
    all_cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    busy, own, clock = cpus_busy(all_cpus), time.process_time(), time.perf_counter()
    os.write(go_w, b"g" * count)  # the barrier: every interpreter at once
    for t in threads:
        t.join()
    # What other processes took of this process's CPUs meanwhile (10 ms ticks).
    other = None
    if busy is not None and all_cpus:
        took = cpus_busy(all_cpus) - busy - (time.process_time() - own)
        other = max(0.0, took / ((time.perf_counter() - clock) * len(all_cpus)))
    answers = []
    for i, (r, w) in enumerate(outs):
        os.close(w)
        text = _read_all(r)
        os.close(r)
        try:
            answers.append(json.loads(text))
        except ValueError:
            answers.append({"error": failed[i] or "said nothing"})
    for a in answers:
        if "unsupported" in a:
            return {"unsupported": a["unsupported"]}
    errors = [f"interpreter {i + 1} of {count}: {a['error']}"
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
            "problems": [f"interpreter {i + 1} of {count}: {a['problem']}"
                         for i, a in enumerate(answers) if a["problem"]]}


# ---------------------------------------------------------------------------
# The bench's side: a row on a loop, 1 and count interpreters
# ---------------------------------------------------------------------------


def measure(row: Row, loop: str, settings, count: int) -> dict:
    """One round of an interpreters row on one loop: a fresh process with one
    interpreter, then one with count; the sample ("rate": count's aggregate;
    "rate_1", "scaling": count's over one's in this round), or {"na"}/{"error"}."""
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
    one, many = runs[1], runs[count]
    return {"rate": many["rate"], "rate_1": one["rate"], "scaling": many["rate"] / one["rate"],
            "seconds": many["seconds"], "overlap": many["overlap"],
            "cpu_util": many["cpu_util"], "cpu_util_1": one["cpu_util"],
            "other_load": _worst(one.get("other_load"), many.get("other_load")),
            "rates": many["rates"], "collections": many["collections"], "n": n,
            "interpreters": count,
            "problems": one["problems"] + (many["problems"] if count != 1 else [])}


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
            f"each in a fresh process, unpinned; the figure: the {count}-interpreter "
            f"aggregate rate")
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
    overlap and cpu_util (medians); and minloop over asyncio at 1 and at n."""
    out = {"interpreters": count, "loops": {}}
    for name, cell in entry["cells"].items():
        samples = cell["samples"]
        if not samples:
            continue
        r1, s1 = _stats(samples, "rate_1")
        rn, sn = _stats(samples, "rate")
        scalings = [s["scaling"] for s in samples]
        out["loops"][name] = {
            "rate_1": r1, "spread_1": s1, "rate_n": rn, "spread_n": sn,
            "scaling": statistics.median(scalings),
            "scaling_range": [min(scalings), max(scalings)],
            "overlap": statistics.median(s["overlap"] for s in samples),
            "cpu_util": statistics.median(s["cpu_util"] for s in samples),
            "cpu_util_1": statistics.median(s["cpu_util_1"] for s in samples),
            "other_load": max((s["other_load"] for s in samples
                               if s.get("other_load") is not None), default=None)}
    got = out["loops"]
    if report.REF in got:
        for other in report.others(got):
            out.setdefault("ref_over", {})[other] = {
                "1": got[report.REF]["rate_1"] / got[other]["rate_1"],
                "n": got[report.REF]["rate_n"] / got[other]["rate_n"]}
    return out


def _pct(spread) -> str:
    return "" if spread is None else f" {spread:.0%}"


def print_report(results: dict, columns: list[str], count: int) -> None:
    """The group's table after the bench's: per row and loop, the 1- and
    count-interpreter aggregate rates with their spreads, count/1 with the
    rounds' range, the overlap and the CPUs kept busy; minloop over each
    other loop at 1 and at count.  Adds the figures to the rows' entries
    (the JSON)."""
    mine = {rid: e for rid, e in results.items() if e["row"]["group"] == GROUP}
    if not any(c["samples"] for e in mine.values() for c in e["cells"].values()):
        return
    head = ["row / loop", "1 interp", f"{count} interp", f"{count}/1 (range)",
            "overlap", "CPUs", "other"]
    lines = [head]
    for rid, entry in mine.items():
        figures = entry["interpreters"] = summarise(entry, count)
        lines.append([rid, "", "", "", "", "", ""])
        for name, f in figures["loops"].items():
            lo, hi = f["scaling_range"]
            lines.append([f"  {name}", report.si(f["rate_1"]) + _pct(f["spread_1"]),
                          report.si(f["rate_n"]) + _pct(f["spread_n"]),
                          f"{f['scaling']:.2f}x ({lo:.2f}-{hi:.2f})",
                          f"{f['overlap']:.0%}", f"{f['cpu_util']:.2f}",
                          "-" if f["other_load"] is None else f"{f['other_load']:.0%}"])
        for other, r in figures.get("ref_over", {}).items():
            lines.append([f"  {report.REF}/{other}", f"{r['1']:.2f}x", f"{r['n']:.2f}x",
                          "", "", "", ""])
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
    args = parser.parse_args(argv)
    result = run_interpreters(args.workload, args.loop, args.n, args.count, args.size)
    sys.stdout.flush()
    print(json.dumps(result), flush=True)
    if "error" in result and "not ready" in result["error"]:
        os._exit(1)  # interpreters still waiting on the barrier hold the process
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
