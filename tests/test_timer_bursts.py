"""Bursts of due timers: many fall due in one iteration, as 100k timeouts
armed together do.

minloop moves a burst out of its heap by another path than single timers
(src/timer_heap.c, heap_drain_due: when a quarter or more of a heap of 16k
timers or more is due, the due ones are sorted out instead of popped).
These tests make such bursts -- with cancellations from the middle, equal
deadlines and timers that stay behind -- and check what asyncio promises
(deadline order, cancelled timers never run, the rest still run later) on
both loops, and FIFO among equal deadlines where minloop is stricter.
"""
import random
import time

# Above the heap's bulk threshold (16k timers) with room to spare, also
# after the cancellations.
N = 30_000


def _burst(loop, deadlines, cancel_every=None):
    """Schedules call_at(when) for each deadline, records (when, i) as each
    runs; cancels every cancel_every-th.  Returns (handles, fired list)."""
    fired = []
    handles = [loop.call_at(when, fired.append, (when, i))
               for i, when in enumerate(deadlines)]
    if cancel_every:
        for h in handles[::cancel_every]:
            h.cancel()
    return handles, fired


def _wait_past(loop, when):
    # Block the loop's thread until `when` has passed, so that the next
    # iteration finds the whole burst due at once.
    while loop.time() <= when:
        time.sleep(0.001)


def _assert_in_deadline_order(fired, expected):
    """What asyncio promises of `fired` against `expected` (sorted (when, i)
    pairs): each timer ran once, in deadline order.  Timers whose deadlines
    are equal may run in any order: asyncio's heapq keeps none.  Such ties
    happen here: 30k random deadlines within 20 ms of a monotonic clock past
    65,536 s (18 hours of uptime) are 1.5e-11 s apart at best, so two of
    them round to the same float in about a third of the runs."""
    assert sorted(fired) == expected
    assert [when for when, _ in fired] == [when for when, _ in expected]


def test_burst_of_due_timers_runs_in_deadline_order(loop):
    rnd = random.Random(10)
    base = loop.time() + 0.05
    deadlines = [base + rnd.random() * 0.02 for _ in range(N)]
    _, fired = _burst(loop, deadlines, cancel_every=7)
    _wait_past(loop, base + 0.02)
    loop.call_soon(loop.stop)
    loop.run_forever()          # one iteration: the whole burst is due
    expected = sorted((w, i) for i, w in enumerate(deadlines) if i % 7)
    _assert_in_deadline_order(fired, expected)


def test_burst_with_timers_left_behind(loop):
    """Half of a big heap is due: those run in order now, the rest later."""
    rnd = random.Random(11)
    base = loop.time() + 0.05
    early = [base + rnd.random() * 0.01 for _ in range(N // 2)]
    # Late enough not to fall due while 30k timers are scheduled on a
    # loaded machine.
    late = [base + 1.0 + rnd.random() * 0.01 for _ in range(N // 2)]
    deadlines = [w for pair in zip(early, late) for w in pair]
    handles, fired = _burst(loop, deadlines, cancel_every=5)
    _wait_past(loop, base + 0.01)
    loop.call_soon(loop.stop)
    loop.run_forever()
    # Every early timer ran, in order, and no later one before it.  Late
    # ones too, in order, where scheduling the burst took past their
    # deadlines (seconds on asyncio's loop under ASan on a busy machine).
    live = sorted((w, i) for i, w in enumerate(deadlines) if i % 5)
    assert len(fired) >= sum(1 for w, _ in live if w < base + 0.5)
    _assert_in_deadline_order(fired, live[:len(fired)])
    ran_first = {i for _, i in fired}
    # The ones left behind can still be cancelled, and the rest run in order.
    for h in handles[1::10]:
        h.cancel()
    loop.call_at(base + 1.05, loop.stop)
    loop.run_forever()
    cancelled = (set(range(0, len(deadlines), 5))
                 | set(range(1, len(deadlines), 10)) - ran_first)
    _assert_in_deadline_order(
        fired, sorted((w, i) for i, w in enumerate(deadlines) if i not in cancelled))


def test_burst_of_equal_deadlines_runs_fifo_minloop_is_stricter(loop, minloop_only):
    """minloop is stricter: a burst with few distinct deadlines, scheduled in
    shuffled order, runs ties in scheduling order (asyncio's heapq does not
    promise it)."""
    rnd = random.Random(12)
    base = loop.time() + 0.05
    deadlines = [base + rnd.randrange(8) * 0.001 for _ in range(N)]
    _, fired = _burst(loop, deadlines, cancel_every=3)
    _wait_past(loop, base + 0.008)
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert fired == sorted((w, i) for i, w in enumerate(deadlines) if i % 3)


def test_memory_is_given_back_after_a_burst(loop, minloop_only):
    rnd = random.Random(13)
    base = loop.time() + 0.02
    before = loop._timer_heap_capacity()
    _burst(loop, [base + rnd.random() * 0.01 for _ in range(N)])
    assert loop._timer_heap_capacity() >= N
    _wait_past(loop, base + 0.01)
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert loop._timer_count() == 0
    assert loop._timer_heap_capacity() <= max(before, 64)
