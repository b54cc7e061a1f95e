"""call_later/call_at, the timer heap, loop.time() and asyncio.sleep precision."""

import asyncio
import math
import random
import time

import pytest

# How early asyncio itself may fire a timer: it runs timers whose deadline is
# before now + clock resolution.  Anything earlier than this is a bug.
CLOCK_RES = time.get_clock_info("monotonic").resolution
EARLY_TOLERANCE = 2 * CLOCK_RES + 1e-9


def test_call_later_returns_timer_handle_with_when(loop):
    """call_later returns a handle whose when() is loop.time() + delay."""
    t0 = loop.time()
    h = loop.call_later(10, lambda: None)
    t1 = loop.time()
    assert t0 + 10 <= h.when() <= t1 + 10
    assert h.cancelled() is False
    h.cancel()
    assert h.cancelled() is True


def test_call_at_when_is_exact(loop):
    """call_at keeps the exact deadline it was given."""
    when = loop.time() + 123.456
    h = loop.call_at(when, lambda: None)
    assert h.when() == when
    h.cancel()


def test_call_at_accepts_int_deadline(loop, run_briefly):
    """An int deadline (in the past) is accepted and fires."""
    called = []
    when = int(loop.time()) - 1
    h = loop.call_at(when, called.append, 1)
    assert h.when() == when
    run_briefly(loop)
    assert called == [1]


@pytest.mark.parametrize("delay", [0, 0.0, -1, -1e9])
def test_zero_and_negative_delays_still_give_timer_and_run(loop, run_briefly, delay):
    """call_later(0) and negative delays return a timer handle and run next iteration."""
    called = []
    h = loop.call_later(delay, called.append, delay)
    assert h.when() <= loop.time()
    run_briefly(loop)
    assert called == [delay]


def test_timer_args_passed(loop, run_for):
    """Positional args after the callback reach a timer callback."""
    got = []
    loop.call_later(0.001, lambda *a: got.append(a), 1, 2, 3)
    loop.call_at(loop.time(), lambda *a: got.append(a), "x")
    run_for(loop, 0.02)
    assert sorted(got, key=len) == [("x",), (1, 2, 3)]


def test_ready_callbacks_run_before_timer_due_in_same_iteration(loop, run_briefly):
    """A timer already due runs after the callbacks already in the ready queue."""
    order = []
    loop.call_at(loop.time() - 1, order.append, "timer")
    loop.call_soon(order.append, "soon1")
    loop.call_soon(order.append, "soon2")
    run_briefly(loop)
    assert order == ["soon1", "soon2", "timer"]


def test_due_timer_runs_in_same_iteration_as_ready_callbacks(loop):
    """A timer that is due runs in the same iteration as the already-ready batch."""
    order = []
    loop.call_at(loop.time() - 1, order.append, "timer")
    loop.call_soon(order.append, "soon")
    loop.stop()
    loop.run_forever()
    assert order == ["soon", "timer"]


def test_timers_run_in_deadline_order(loop):
    """Timers run in order of their deadlines, whatever order they were scheduled in."""
    order = []
    base = loop.time() + 0.01
    offsets = [0.009, 0.001, 0.005, 0.003, 0.007, 0.0, 0.002]
    for off in offsets:
        loop.call_at(base + off, order.append, off)
    loop.call_at(base + 0.02, loop.stop)
    loop.run_forever()
    assert order == sorted(offsets)


def test_many_timers_with_random_deadlines_run_sorted(loop):
    """10k timers with random deadlines run in non-decreasing deadline order."""
    rnd = random.Random(1234)
    seen = []
    base = loop.time() + 0.005
    for _ in range(10_000):
        when = base + rnd.random() * 0.03
        loop.call_at(when, seen.append, when)
    loop.call_at(base + 0.05, loop.stop)
    loop.run_forever()
    assert len(seen) == 10_000
    assert seen == sorted(seen)


def test_equal_deadlines_run_fifo_minloop_is_stricter(loop, minloop_only):
    """minloop is stricter: timers with equal deadlines run in scheduling order.

    asyncio's heapq does not guarantee this (with 200 equal deadlines it runs
    them as 0, 2, 6, 14, ...); minloop promises FIFO ties (README's table of
    differences; the `seq` of src/timer_heap.h).
    """
    order = []
    when = loop.time() + 0.01
    for i in range(200):
        loop.call_at(when, order.append, i)
    loop.call_at(when + 0.01, loop.stop)
    loop.run_forever()
    assert order == list(range(200))


def test_cancelled_timer_never_runs(loop, run_for):
    """A cancelled timer does not fire."""
    called = []
    h = loop.call_later(0.005, called.append, "cancelled")
    loop.call_later(0.006, called.append, "kept")
    h.cancel()
    assert h.cancelled()
    run_for(loop, 0.03)
    assert called == ["kept"]


def test_cancelled_far_timer_does_not_delay_wakeup(loop):
    """A cancelled early timer does not make the loop wake up late or early."""
    far = loop.call_later(30, lambda: None)
    far.cancel()
    fired = []
    loop.call_later(0.02, fired.append, 1)
    loop.call_later(0.02, loop.stop)
    t0 = time.monotonic()
    loop.run_forever()
    elapsed = time.monotonic() - t0
    assert fired == [1]
    assert 0.02 - EARLY_TOLERANCE <= elapsed < 2.0


def test_timer_cancelled_by_earlier_timer_in_same_iteration_is_skipped(loop):
    """Two timers due together: if the first cancels the second, the second is skipped."""
    called = []
    second = None

    def first():
        called.append("first")
        second.cancel()

    # Both deadlines are already past, so both are due in the first iteration.
    now = loop.time()
    loop.call_at(now - 1.0, first)
    second = loop.call_at(now - 0.5, called.append, "second")
    loop.stop()
    loop.run_forever()
    assert called == ["first"]


def test_cancel_many_timers(loop, run_for):
    """Arming and cancelling many timers leaves only the uncancelled ones to run."""
    called = []
    handles = [loop.call_later(0.001 + i * 1e-6, called.append, i)
               for i in range(20_000)]
    for h in handles[::2]:
        h.cancel()
    run_for(loop, 0.05)
    assert called == list(range(1, 20_000, 2))


def test_timer_scheduled_from_timer(loop):
    """A timer callback can schedule another timer that then fires."""
    order = []

    def first():
        order.append(1)
        loop.call_later(0.002, second)

    def second():
        order.append(2)
        loop.stop()

    loop.call_later(0.002, first)
    loop.run_forever()
    assert order == [1, 2]


def test_timer_does_not_fire_early(loop):
    """A call_later(d) callback never runs before d has elapsed on loop.time()."""
    results = []
    for i in range(1, 21):
        d = i / 1000
        t0 = loop.time()
        h = loop.call_later(d, lambda t0=t0, d=d: results.append((loop.time() - t0, d)))
        loop.call_at(h.when(), loop.stop)
        loop.run_forever()
    assert len(results) == 20
    for elapsed, d in results:
        assert elapsed >= d - EARLY_TOLERANCE, (elapsed, d)


def test_sleep_never_returns_early(loop):
    """await asyncio.sleep(d) never returns before d passed (loop.time and time.monotonic)."""
    delays = ([0.0001, 0.0005] + [i / 1000 for i in range(1, 21)]
              + [0.0015, 0.0025, 0.0105])

    async def main():
        bad = []
        for d in delays:
            for _ in range(2):
                t0 = loop.time()
                m0 = time.monotonic()
                await asyncio.sleep(d)
                lt = loop.time() - t0
                mt = time.monotonic() - m0
                if lt < d - EARLY_TOLERANCE or mt < d - EARLY_TOLERANCE:
                    bad.append((d, lt, mt))
        return bad

    assert loop.run_until_complete(main()) == []


def test_sleep_is_not_grossly_late(loop):
    """A 10 ms sleep on an idle loop returns within a generous bound (no lost wakeup)."""
    async def main():
        t0 = time.monotonic()
        await asyncio.sleep(0.01)
        return time.monotonic() - t0
    assert loop.run_until_complete(main()) < 0.5


def test_loop_time_is_monotonic_clock(loop):
    """loop.time() reads the same clock as time.monotonic()."""
    for _ in range(5):
        a = time.monotonic()
        t = loop.time()
        b = time.monotonic()
        assert a - 0.005 <= t <= b + 0.005


def test_loop_time_never_goes_backwards(loop):
    """Successive loop.time() values are non-decreasing."""
    values = [loop.time() for _ in range(10_000)]
    assert values == sorted(values)


def test_call_at_infinity_accepted_never_fires(loop, run_for):
    """call_at(inf) is accepted, keeps when() == inf and never fires; sooner timers still do."""
    called = []
    h = loop.call_at(math.inf, called.append, "inf")
    assert h.when() == math.inf
    loop.call_later(0.01, called.append, "soon")
    t0 = time.monotonic()
    run_for(loop, 0.03)
    assert time.monotonic() - t0 < 2.0
    assert called == ["soon"]
    h.cancel()


def test_call_later_infinity_accepted_never_fires(loop, run_for):
    """call_later(inf) is accepted and never fires."""
    called = []
    h = loop.call_later(math.inf, called.append, 1)
    assert h.when() == math.inf
    run_for(loop, 0.02)
    assert called == []
    h.cancel()


def test_nan_deadline_rejected_minloop_is_stricter(loop, minloop_only):
    """minloop is stricter: NaN when/delay raises ValueError.

    asyncio (3.11) accepts call_at(nan) / call_later(nan) and returns a
    TimerHandle with when=nan, which then fires at once (nan compares False).
    """
    with pytest.raises(ValueError):
        loop.call_at(math.nan, lambda: None)
    with pytest.raises(ValueError):
        loop.call_later(math.nan, lambda: None)


def test_timer_handle_ordering(loop):
    """TimerHandles order by deadline with <, <=, >, >=."""
    now = loop.time()
    a = loop.call_at(now + 10, lambda: None)
    b = loop.call_at(now + 20, lambda: None)
    assert a < b and a <= b and b > a and b >= a
    assert not (b < a)
    a.cancel()
    b.cancel()


def test_timer_handle_equality_and_hash(loop):
    """Equal TimerHandles (same when, callback, args) compare equal and hash alike."""
    now = loop.time()

    def cb():
        pass

    a = loop.call_at(now + 10, cb)
    b = loop.call_at(now + 10, cb)
    c = loop.call_at(now + 11, cb)
    assert a == b and hash(a) == hash(b)
    assert a != c
    a.cancel()
    b.cancel()
    c.cancel()


def test_wait_for_timeout_uses_timers(loop):
    """asyncio.wait_for times out through the loop's timers."""
    async def main():
        t0 = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.sleep(10), 0.01)
        return time.monotonic() - t0
    elapsed = loop.run_until_complete(main())
    assert 0.01 - EARLY_TOLERANCE <= elapsed < 2.0


def test_cancel_after_run_does_not_disturb_other_timers(loop, run_for):
    """Cancelling a timer that already ran marks it cancelled and leaves other timers alone."""
    order = []
    done = loop.call_later(0, order.append, "done")
    run_for(loop, 0.005)
    assert order == ["done"]
    later = [loop.call_later(0.001 * (i + 1), order.append, i) for i in range(10)]
    done.cancel()
    assert done.cancelled() is True
    later[3].cancel()
    done.cancel()
    run_for(loop, 0.03)
    assert order == ["done", 0, 1, 2, 4, 5, 6, 7, 8, 9]


def test_cancel_timer_from_its_own_callback(loop, run_for):
    """A timer cancelling itself while it runs is harmless; later timers still run."""
    order = []
    holder = []

    def cb():
        order.append("self")
        holder[0].cancel()

    holder.append(loop.call_later(0.001, cb))
    loop.call_later(0.005, order.append, "next")
    run_for(loop, 0.02)
    assert order == ["self", "next"]
    assert holder[0].cancelled() is True


def test_timer_cancelled_then_rescheduled_callbacks(loop, run_for):
    """Arm/cancel churn in random order keeps every surviving timer, in deadline order."""
    rnd = random.Random(99)
    now = loop.time()
    fired = []
    live = {}
    for i in range(3000):
        when = now + 0.002 + rnd.random() * 0.02
        live[i] = (when, loop.call_at(when, fired.append, i))
        if rnd.random() < 0.4:
            victim = rnd.choice(list(live))
            live.pop(victim)[1].cancel()
    run_for(loop, 0.05)
    expected = [i for i, _ in sorted(live.items(), key=lambda kv: (kv[1][0], kv[0]))]
    assert sorted(fired) == sorted(expected)
    whens = [live[i][0] for i in fired]
    assert whens == sorted(whens)
