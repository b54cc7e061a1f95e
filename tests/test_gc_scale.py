"""What the loop costs the cycle collector at scale, on both loops.

The collector starts a collection every gc.get_threshold()[0] net new
tracked objects (700 up to 3.13, 2000 from 3.14), so whatever the loop
allocates per callback, per fired timer and per sleep decides how often a
program with 100,000 live objects pays for a collection.  What that
collection is depends on the collector: a young one (generation 0) on the
generational collector (3.10-3.13, 3.14.5 on), an increment (reported as
generation 1: the young objects and a slice of the old ones) on the
incremental one of 3.14.0-3.14.4.  Either way the loop must not start it:
asyncio fires a timer without allocating; so must minloop.  The tests below
assert that no collection of any generation starts, which is what holds on
both collectors; automatic_collection() tells which one is running."""

import asyncio
import gc
import weakref

import pytest


class CollectionCounter:
    """Counts collections per generation while installed in gc.callbacks."""

    def __init__(self):
        self.counts = [0, 0, 0]

    def __call__(self, phase, info):
        if phase == 'start':
            self.counts[info['generation']] += 1

    def __enter__(self):
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self)


def automatic_collection():
    """The generation the running collector reports for a collection that
    allocations start: 0 (generational) or 1 (incremental)."""
    gc.collect()
    with CollectionCounter() as collections:
        keep = []
        while sum(collections.counts) == 0:
            keep.append([])
    return collections.counts.index(1)


def test_allocations_start_one_collection_at_the_threshold():
    """The premise of the tests below, on the running collector: counted
    allocations start a collection, young or an increment, once they pass
    the threshold, and not before."""
    gc.collect()
    threshold = gc.get_threshold()[0]
    with CollectionCounter() as collections:
        keep = [[] for _ in range(threshold - 50)]
        assert collections.counts == [0, 0, 0]
        keep += [[] for _ in range(100)]
    assert collections.counts in ([1, 0, 0], [0, 1, 0]), collections.counts
    assert automatic_collection() == collections.counts.index(1)


def run_one_iteration(loop):
    loop.call_soon(loop.stop)
    loop.run_forever()


@pytest.mark.parametrize('cancel_half', [False, True], ids=['all', 'half-cancelled'])
def test_firing_held_timers_starts_no_collection(loop, cancel_half):
    """20,000 due timers whose handles the program keeps (the usual
    `self._timer = loop.call_later(...)`): firing them allocates nothing that
    lives on, so no collection starts (30 would at asyncio's threshold)."""
    fired = []
    handles = [loop.call_later(-1, fired.append, i) for i in range(20_000)]
    if cancel_half:
        for h in handles[::2]:
            h.cancel()
    gc.collect()
    with CollectionCounter() as collections:
        run_one_iteration(loop)
    assert len(fired) == (10_000 if cancel_half else 20_000)
    assert collections.counts == [0, 0, 0]
    assert gc.get_count()[0] < gc.get_threshold()[0]


def test_running_callbacks_leaves_the_allocation_count_flat(loop):
    """A burst of call_soon callbacks, run and dropped, twice: the second
    burst adds (almost) nothing to the collector's allocation count."""
    def burst():
        for _ in range(5_000):
            loop.call_soon(int)
        run_one_iteration(loop)

    burst()
    gc.collect()
    before = gc.get_count()[0]
    burst()
    assert gc.get_count()[0] - before < 700


def test_held_handles_and_their_arguments_are_not_counted_minloop_is_stricter(
        loop, minloop_only):
    """20,000 callbacks and timers of one or two arguments, held by the
    program, more than any free list keeps: none of them, nor their
    arguments, counts as an allocation (asyncio counts a handle, a context
    and a tuple for each), so scheduling them starts no collection.
    Measured on 3.14.10: 6 for minloop, 120,011 for asyncio."""
    token = object()
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        soon = [loop.call_soon(id, token) for _ in range(20_000)]
        later = [loop.call_later(3600, divmod, 7, 2) for _ in range(20_000)]
        grown = gc.get_count()[0] - before
    finally:
        gc.enable()
    # The two lists themselves count: a few hundred at most.
    assert grown < 700, grown
    assert soon[0]._args == (token,) and later[-1]._args == (7, 2)
    for h in later:
        h.cancel()
    run_one_iteration(loop)


def test_waking_many_sleeping_tasks_starts_no_young_collection_minloop_is_stricter(
        loop, minloop_only):
    """20,000 tasks asleep; their timers fire together and every task wakes
    and sleeps again.  A young collection in the middle of that burst would
    walk every future and coroutine the tasks just made: the loop adds no
    counted object per fired timer or wake-up (no handle, no argument tuple),
    so the burst starts none, of any generation (asyncio's starts dozens:
    53 young ones on 3.11, 18 on 3.14.10, whose threshold is 2000)."""
    n = 20_000
    woke = 0

    async def sleeper():
        nonlocal woke
        await asyncio.sleep(0.001)
        woke += 1
        await asyncio.sleep(3600)

    async def main():
        tasks = [loop.create_task(sleeper()) for _ in range(n)]
        await asyncio.sleep(0)          # every task is asleep now
        gc.collect()
        with CollectionCounter() as collections:
            while woke < n:
                await asyncio.sleep(0.005)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return collections.counts

    counts = loop.run_until_complete(main())
    assert woke == n
    assert counts == [0, 0, 0], counts


@pytest.mark.parametrize('via', ['callback', 'argument'])
@pytest.mark.parametrize('timer', [False, True], ids=['call_soon', 'call_later'])
def test_cycles_through_handles_in_every_state_are_collected(loop_factory, timer, via):
    """handle -> callback (or its argument) -> object -> handle, for a handle
    never run, run, cancelled, and still queued when its loop closes: all
    collected."""
    def fire_with(owner):
        pass

    class Owner:
        def __init__(self, lp, delay=0):
            callback, args = ((self.fire, ()) if via == 'callback'
                              else (fire_with, (self,)))
            if timer or delay:
                self.handle = lp.call_later(delay, callback, *args)
            else:
                self.handle = lp.call_soon(callback, *args)

        def fire(self):
            pass

    lp = loop_factory()
    lp.set_debug(False)
    try:
        ran = Owner(lp)
        cancelled = Owner(lp)
        cancelled.handle.cancel()
        never_run = Owner(lp, delay=3600)   # still queued when the loop closes
        refs = [weakref.ref(o) for o in (ran, cancelled, never_run)]
        del ran, cancelled, never_run
        lp.run_until_complete(asyncio.sleep(0.002))
        gc.collect()
        assert [r() is None for r in refs] == [True, True, False]
    finally:
        lp.close()
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
