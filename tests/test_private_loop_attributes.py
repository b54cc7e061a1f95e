"""asyncio's private loop attributes that code outside the loop relies on,
on both loops: _run_once (run_forever calls it on every turn, so replacing
it on a subclass or on the instance takes effect), _clock_resolution, and
_selector (the loop's readers and writers, as a selectors selector sees
them: minloop's is a read-only view of its fd table, selector_view.pyx).
"""

import asyncio
import pytest

# --- _run_once ----------------------------------------------------------------


def test_run_once_replaced_on_the_instance_is_called(loop):
    calls = []
    original = loop._run_once

    def counting_run_once():
        calls.append(loop.is_running())
        original()

    loop._run_once = counting_run_once

    async def main():
        for _ in range(3):
            await asyncio.sleep(0)
        return "done"

    assert loop.run_until_complete(main()) == "done"
    assert 4 <= len(calls) <= 8 and all(calls)
    # Taken back: the loop's own again, not called through the instance.
    del loop._run_once
    calls.clear()
    loop.run_until_complete(main())
    assert calls == []


def test_run_once_replaced_by_a_subclass_is_called(loop):
    calls = []

    class CountingLoop(type(loop)):
        def _run_once(self):
            calls.append(1)
            super()._run_once()

    loop = CountingLoop()
    try:
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert calls == [1]
        # stop() takes effect after the iteration that called it, also with
        # an override.
        loop.call_soon(loop.call_soon, loop.stop)
        loop.run_forever()
        assert calls == [1, 1, 1]
    finally:
        loop.close()


def test_run_once_is_looked_up_once_per_run(loop):
    """A replacement made while the loop runs takes effect on its next run
    (asyncio's would from the next iteration; no code relies on that)."""
    calls = []

    def replace():
        loop._run_once = lambda original=loop._run_once: (calls.append(1), original())
        loop.stop()

    loop.call_soon(replace)
    loop.run_forever()
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert calls == [1]


def test_minloop_runs_its_compiled_iteration_unless_replaced(loop, loop_kind):
    """run_forever recognises LoopCore's own _run_once (then it calls the
    compiled iteration, no Python call per turn) by its function."""
    if loop_kind != "minloop":
        pytest.skip("minloop's fast path")
    from minloop.loop import LoopCore
    assert loop._run_once.__func__ is LoopCore._run_once


# --- _clock_resolution -------------------------------------------------------


def test_clock_resolution(loop):
    assert isinstance(loop._clock_resolution, float)
    assert 0 < loop._clock_resolution < 0.1


def test_timers_due_within_the_clock_resolution_run_now(loop):
    """A timer due less than _clock_resolution from now runs in this
    iteration (asyncio's end_time); the attribute may be set."""
    loop._clock_resolution = 0.5
    ran = []
    loop.call_later(0.2, ran.append, 1)
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert ran == [1]
