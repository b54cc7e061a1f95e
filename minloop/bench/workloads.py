"""Micro workloads: one kind of event-loop work each, sized by n.

A workload is a function ``setup(loop, n) -> (go, verify)`` taking a fresh loop
that is not running.  ``setup`` builds the inputs (untimed); ``go()`` drives the
loop through the n operations and is the only part that is timed; ``verify()``
checks afterwards that the loop did what asyncio would have done, raising
Misbehaved if not.  Keeping the checks out of ``go`` keeps them out of the
timings, and keeping them at all means a fast but wrong loop cannot win.

``run(workload, loop_factory, n)`` ties the three together around a loop it
creates and closes.  Callbacks are shared Python closures, so their own cost is
the same for every loop; what differs is the loop's work around them.
"""

from __future__ import annotations

import asyncio
import gc
import random
import threading
import time
from typing import Callable, NamedTuple

Step = Callable[[], None]
Setup = Callable[[asyncio.AbstractEventLoop, int], "tuple[Step, Step]"]

SEED = 20240601  # Fixed, so every loop and every round sees the same timers.
MAX_DELAY = 0.050  # the scale workloads' random delays: up to 50 ms


class GcCounter:
    """Collections of the cyclic GC per generation, counted by a gc.callbacks
    hook while installed.  The scale workloads run with the collector on, at
    its default thresholds, as every program does: what a loop allocates and
    keeps tracked shows up here, and in the timings."""

    def __init__(self):
        self.counts = [0, 0, 0]

    def _hook(self, phase, info):
        if phase == "start":
            self.counts[info["generation"]] += 1

    def __enter__(self):
        gc.callbacks.append(self._hook)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self._hook)

    def snapshot(self) -> list:
        return list(self.counts)


# Installed by run() around the timed part; workloads that time phases of
# their own read it for the collections within a phase.
GC = GcCounter()


def _since(before: list) -> list:
    return [now - then for now, then in zip(GC.counts, before)]


class Misbehaved(AssertionError):
    """The loop ran the workload but got the outcome wrong."""


def _expect(ok: bool, what: str) -> None:
    if not ok:
        raise Misbehaved(what)


# ---------------------------------------------------------------------------
# Ready queue
# ---------------------------------------------------------------------------


def call_soon_chain(loop, n):
    """n callbacks in sequence, each scheduling the next (one per iteration)."""
    count = 0

    def step():
        nonlocal count
        count += 1
        if count < n:
            loop.call_soon(step)
        else:
            loop.stop()

    def go():
        loop.call_soon(step)
        loop.run_forever()

    def verify():
        _expect(count == n, f"ran {count} of {n} chained callbacks")

    return go, verify


def call_soon_wide(loop, n):
    """n callbacks scheduled from one callback, then run in a single batch."""
    count = 0

    def tick():
        nonlocal count
        count += 1

    def fan_out():
        call_soon = loop.call_soon
        for _ in range(n):
            call_soon(tick)
        # stop() itself goes through the queue: called directly, asyncio would
        # leave before running the batch that is being scheduled here.
        call_soon(loop.stop)

    def go():
        loop.call_soon(fan_out)
        loop.run_forever()

    def verify():
        _expect(count == n, f"ran {count} of {n} callbacks")

    return go, verify


# ---------------------------------------------------------------------------
# Timers
# ---------------------------------------------------------------------------

# asyncio promises deadline order; libuv (uvloop) rounds deadlines to whole
# milliseconds, so smaller inversions are reported only past this tolerance.
ORDER_TOLERANCE = 0.001


def call_later_cancel_half(loop, n):
    """n call_later with random delays in [0, 50 ms], every other one cancelled.

    The loop runs until all n - n//2 survivors have fired.  Besides the count,
    verify() checks that no cancelled timer ran and that timers fired in
    deadline order.
    """
    rng = random.Random(SEED)
    delays = [rng.uniform(0.0, 0.050) for _ in range(n)]
    survivors = n - n // 2
    handles = []
    fired = []  # indexes into handles, in firing order
    wrongly_fired = 0

    def fire(i):
        fired.append(i)
        if len(fired) == survivors:
            loop.stop()

    def cancelled_fired(i):
        nonlocal wrongly_fired
        wrongly_fired += 1

    def arm():
        call_later = loop.call_later
        for i, delay in enumerate(delays):
            if i % 2:
                call_later(delay, cancelled_fired, i).cancel()
                handles.append(None)
            else:
                handles.append(call_later(delay, fire, i))

    def go():
        loop.call_soon(arm)
        loop.run_forever()

    def verify():
        problems = []
        if wrongly_fired:
            problems.append(f"{wrongly_fired} cancelled timers ran")
        if len(fired) != survivors or len(set(fired)) != survivors:
            problems.append(f"{len(fired)} firings of {survivors} live timers")
        # asyncio's call_later always returns a TimerHandle; uvloop returns a
        # plain Handle (no when()) for delays that round to 0 ms.
        untimed = sum(1 for h in handles if h is not None and not hasattr(h, "when"))
        if untimed:
            problems.append(f"{untimed} call_later handles have no when()")
        whens = [handles[i].when() for i in fired if hasattr(handles[i], "when")]
        worst = max((a - b for a, b in zip(whens, whens[1:])), default=0.0)
        if worst > ORDER_TOLERANCE:
            problems.append(f"timers fired out of deadline order by up to {worst * 1e3:.2f} ms")
        _expect(not problems, "; ".join(problems))

    return go, verify


CHURN_BATCH = 100  # arm+cancel pairs per loop iteration
CHURN_LIVE = 10_000  # timers left armed throughout, as a server's idle timeouts


def call_at_churn(loop, n):
    """n call_at + cancel() pairs, none of which is ever due.

    The pairs are spread over n / CHURN_BATCH loop iterations, so that a loop
    which defers the removal of cancelled timers pays its clean-ups inside the
    measurement, as a server re-arming a timeout per request would.  A fixed
    set of live far-future timers keeps the heap from being trivially empty.
    """
    rng = random.Random(SEED)
    base = loop.time() + 3600.0  # an hour ahead: never due during the run
    offsets = [rng.uniform(0.0, 60.0) for _ in range(n)]
    fired = 0
    done = 0

    def never():
        nonlocal fired
        fired += 1

    live = [loop.call_at(base + rng.uniform(0.0, 60.0), never) for _ in range(CHURN_LIVE)]

    def batch():
        nonlocal done
        call_at = loop.call_at
        end = min(done + CHURN_BATCH, n)
        for i in range(done, end):
            call_at(base + offsets[i], never).cancel()
        done = end
        if done < n:
            loop.call_soon(batch)
        else:
            loop.stop()

    def go():
        loop.call_soon(batch)
        loop.run_forever()

    def verify():
        _expect(done == n, f"armed and cancelled {done} of {n} timers")
        _expect(fired == 0, f"{fired} far-future timers ran")
        _expect(not any(h.cancelled() for h in live), "a live timer reports cancelled")
        for h in live:
            h.cancel()

    return go, verify


# ---------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------


def sleep0_pingpong(loop, n):
    """Two tasks taking turns with ``await asyncio.sleep(0)``, n switches in all.

    asyncio's ready queue is FIFO, so the two tasks must strictly alternate.
    """
    switches = 0
    repeats = 0  # times a task ran twice in a row
    last = None

    async def player(me, turns):
        nonlocal switches, repeats, last
        for _ in range(turns):
            if last == me:
                repeats += 1
            last = me
            switches += 1
            await asyncio.sleep(0)

    async def match():
        await asyncio.gather(player(0, n // 2), player(1, n - n // 2))

    def go():
        loop.run_until_complete(match())

    def verify():
        _expect(switches == n, f"{switches} of {n} switches")
        _expect(repeats <= 1, f"tasks did not alternate ({repeats} repeated turns)")

    return go, verify


def gather_tasks(loop, n):
    """Create n tasks of a coroutine that returns at once, then gather them."""
    results = []

    async def trivial(i):
        return i

    async def main():
        create_task = loop.create_task
        tasks = [create_task(trivial(i)) for i in range(n)]
        results.extend(await asyncio.gather(*tasks))

    def go():
        loop.run_until_complete(main())

    def verify():
        _expect(results == list(range(n)), "gather returned wrong or misordered results")

    return go, verify


# ---------------------------------------------------------------------------
# Scale: many tasks, many live timers, many ready callbacks at once
# ---------------------------------------------------------------------------
#
# These hold what they create the way real code does (tasks gathered, timer
# handles kept in a list as ``self._h = loop.call_later(...)`` keeps them),
# so that a loop whose objects the cyclic GC must traverse pays for it here.


def tasks_sleep_twice(loop, n):
    """n tasks each sleeping twice (random delays up to 50 ms), gathered."""
    rng = random.Random(SEED)
    delays = [(rng.uniform(0.0, MAX_DELAY), rng.uniform(0.0, MAX_DELAY)) for _ in range(n)]
    results = []

    async def sleeper(i, first, second):
        await asyncio.sleep(first)
        await asyncio.sleep(second)
        return i

    async def main():
        create_task = loop.create_task
        tasks = [create_task(sleeper(i, a, b)) for i, (a, b) in enumerate(delays)]
        results.extend(await asyncio.gather(*tasks))

    def go():
        loop.run_until_complete(main())

    def verify():
        _expect(results == list(range(n)), "gather returned wrong or misordered results")

    return go, verify


def timers_held_cancel_half(loop, n):
    """n call_later (random delays up to 50 ms), handles held; a random half cancelled.

    Phases (figures): schedule all n keeping every handle, cancel a random
    half, then fire: until the last survivor ran.  The collections the GC ran
    while firing are counted on their own.
    """
    rng = random.Random(SEED)
    delays = [rng.uniform(0.0, MAX_DELAY) for _ in range(n)]
    doomed = rng.sample(range(n), n // 2)
    doomed_set = set(doomed)
    survivors = n - n // 2
    handles = []  # every handle, cancelled or not, held to the end
    fired = 0
    wrongly_fired = 0
    marks = {}

    def fire():
        nonlocal fired
        fired += 1
        if fired == survivors:
            marks["fired"] = time.perf_counter()
            marks["gc_fire"] = _since(marks["gc_cancelled"])
            loop.stop()

    def cancelled_fired():
        nonlocal wrongly_fired
        wrongly_fired += 1

    callbacks = [cancelled_fired if i in doomed_set else fire for i in range(n)]

    def arm():
        marks["start"] = time.perf_counter()
        call_later = loop.call_later
        append = handles.append
        for delay, callback in zip(delays, callbacks):
            append(call_later(delay, callback))
        marks["scheduled"] = time.perf_counter()
        for i in doomed:
            handles[i].cancel()
        marks["cancelled"] = time.perf_counter()
        marks["gc_cancelled"] = GC.snapshot()

    def go():
        loop.call_soon(arm)
        loop.run_forever()

    def verify():
        _expect(not wrongly_fired, f"{wrongly_fired} cancelled timers ran")
        _expect(fired == survivors, f"{fired} firings of {survivors} live timers")

    def figures():
        return {"phases_ms": {
                    "schedule": (marks["scheduled"] - marks["start"]) * 1e3,
                    "cancel": (marks["cancelled"] - marks["scheduled"]) * 1e3,
                    "fire": (marks["fired"] - marks["cancelled"]) * 1e3},
                "gc_fire": marks["gc_fire"]}

    return go, verify, figures


def timers_fire_due(loop, n):
    """n call_later (random delays up to 50 ms), handles held, fired once all are due.

    Only the firing is timed: after scheduling, the arming callback blocks
    until every deadline has passed, so the loop then finds n due timers and
    runs them back to back.  The figure is timers fired per second; its
    inverse is the per-timer firing cost at n live timers.
    """
    rng = random.Random(SEED)
    delays = [rng.uniform(0.0, MAX_DELAY) for _ in range(n)]
    handles = []
    fired = 0
    marks = {}

    def fire():
        nonlocal fired
        fired += 1
        if fired == n:
            marks["fired"] = time.perf_counter()
            marks["gc_fire"] = _since(marks["gc_due"])
            loop.stop()

    def arm():
        call_later = loop.call_later
        append = handles.append
        for delay in delays:
            append(call_later(delay, fire))
        # Past the last deadline by the loop's clock and by ours (uvloop's
        # clock may lag: it is read once per iteration); 2 ms for rounding.
        time.sleep(MAX_DELAY + 0.002)
        marks["due"] = time.perf_counter()
        marks["gc_due"] = GC.snapshot()

    def go():
        loop.call_soon(arm)
        loop.run_forever()

    def verify():
        _expect(fired == n, f"{fired} firings of {n} timers")

    def figures():
        seconds = marks["fired"] - marks["due"]
        return {"seconds": seconds, "ns_per_timer": seconds / n * 1e9,
                "gc_fire": marks["gc_fire"]}

    return go, verify, figures


CHAINS = 100


def call_soon_chains(loop, n):
    """n callbacks in 100 parallel chains, each scheduling the next of its chain.

    About 100 callbacks are ready at every iteration of the loop.
    """
    count = 0
    last = n - CHAINS  # the callbacks up to here schedule a successor

    def step():
        nonlocal count
        count += 1
        if count <= last:
            loop.call_soon(step)
        elif count == n:
            loop.stop()

    def start():
        for _ in range(CHAINS):
            loop.call_soon(step)

    def go():
        loop.call_soon(start)
        loop.run_forever()

    def verify():
        _expect(count == n, f"ran {count} of {n} chained callbacks")

    return go, verify


# ---------------------------------------------------------------------------
# Threads
# ---------------------------------------------------------------------------


def call_soon_threadsafe(loop, n):
    """Another thread makes n call_soon_threadsafe calls; the loop counts them.

    The thread is started from inside the running loop so that every call
    lands on a running loop and the wake-up path is exercised.
    """
    count = 0

    def tick():
        nonlocal count
        count += 1
        if count == n:
            loop.stop()

    def produce():
        call = loop.call_soon_threadsafe
        for _ in range(n):
            call(tick)

    thread = threading.Thread(target=produce, name="threadsafe-producer", daemon=True)

    def go():
        loop.call_soon(thread.start)
        loop.run_forever()
        thread.join()

    def verify():
        _expect(count == n, f"ran {count} of {n} thread-safe callbacks")

    return go, verify


# ---------------------------------------------------------------------------
# Registry and runner
# ---------------------------------------------------------------------------


class Workload(NamedTuple):
    name: str
    setup: Setup
    n: int  # full size, used by compare.py
    smoke_n: int  # tiny size for smoke checks and warm-up runs

    @property
    def doc(self) -> str:
        return (self.setup.__doc__ or "").strip().splitlines()[0]


WORKLOADS = {
    w.name: w
    for w in (
        Workload("call_soon_chain", call_soon_chain, 1_000_000, 1_000),
        Workload("call_soon_wide", call_soon_wide, 1_000_000, 1_000),
        Workload("call_later_cancel", call_later_cancel_half, 200_000, 1_000),
        Workload("call_at_churn", call_at_churn, 1_000_000, 1_000),
        Workload("sleep0_pingpong", sleep0_pingpong, 200_000, 1_000),
        Workload("gather_tasks", gather_tasks, 100_000, 1_000),
        Workload("call_soon_threadsafe", call_soon_threadsafe, 200_000, 1_000),
        # Scale: their n is the point, the bench runs them whole.
        Workload("tasks_sleep_twice", tasks_sleep_twice, 100_000, 1_000),
        Workload("timers_held_cancel_half", timers_held_cancel_half, 200_000, 1_000),
        Workload("timers_fire_due", timers_fire_due, 200_000, 1_000),
        Workload("call_soon_chains", call_soon_chains, 1_000_000, 1_000),
    )
}


# The loop-core set (README.md's "Loop core" table) and the scale set
# (issue 10's workloads, run whole by ``python -m minloop bench``).
CORE = ("call_soon_chain", "call_soon_wide", "call_later_cancel", "call_at_churn",
        "sleep0_pingpong", "gather_tasks", "call_soon_threadsafe")
SCALE = ("tasks_sleep_twice", "timers_held_cancel_half", "timers_fire_due", "call_soon_chains")
GROUPS = {"core": CORE, "scale": SCALE}


def measure(workload: Workload, loop_factory, n: int) -> dict:
    """Run one workload of size n on a new loop, the collector on.

    Returns {"seconds": the time of ``go`` (or the workload's own timed
    part), "gc": collections per generation during ``go``, any figures the
    workload adds}.  Raises Misbehaved (with that dict in ``.figures``) if
    verify() fails.
    """
    loop = loop_factory()
    try:
        parts = workload.setup(loop, n)
        go, verify = parts[:2]
        figures = parts[2] if len(parts) > 2 else dict
        # Start from a clean heap so one run's garbage is not the next's pause.
        gc.collect()
        with GC:
            before = GC.snapshot()
            start = time.perf_counter()
            go()
            seconds = time.perf_counter() - start
            collections = _since(before)
        result = {"seconds": seconds, "gc": collections}
        try:
            verify()
        except Misbehaved as exc:
            exc.figures = result
            exc.seconds = seconds
            raise
        result.update(figures())
        return result
    finally:
        loop.close()


def run(workload: Workload, loop_factory, n: int) -> float:
    """measure(), returning only the seconds."""
    return measure(workload, loop_factory, n)["seconds"]
