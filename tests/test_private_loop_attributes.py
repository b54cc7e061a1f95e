"""asyncio's private loop attributes that code outside the loop relies on,
on both loops: _run_once (run_forever calls it on every turn, so replacing
it on a subclass or on the instance takes effect), _clock_resolution, and
_selector (the loop's readers and writers, as a selectors selector sees
them: minloop's is a read-only view of its fd table, selector_view.pyx).
"""

import asyncio
import selectors
import socket

import pytest
from asyncio import selector_events

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
    assert loop._run_once == LoopCore._run_once.__get__(loop)


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


# --- _selector -----------------------------------------------------------------


@pytest.fixture
def sockpair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_selector_keys(loop, sockpair):
    a, b = sockpair
    selector = loop._selector
    with pytest.raises(KeyError, match="is not registered"):
        selector.get_key(a)
    loop.add_reader(a, lambda: None)
    key = loop._selector.get_key(a)
    assert (key.fileobj, key.fd, key.events) == (a, a.fileno(), selectors.EVENT_READ)
    reader, writer = key.data
    assert isinstance(reader, asyncio.Handle) and writer is None
    assert not reader.cancelled()
    loop.add_writer(a.fileno(), lambda: None)
    key = loop._selector.get_key(a.fileno())
    assert key.events == selectors.EVENT_READ | selectors.EVENT_WRITE
    assert key.data[0] is reader and not key.data[1].cancelled()
    # The fd given as an int: that is its file object.
    loop.add_writer(b.fileno(), lambda: None)
    assert loop._selector.get_key(b).fileobj == b.fileno()
    assert selector_events._test_selector_event(loop._selector, a.fileno(),
                                                selectors.EVENT_WRITE)
    loop.remove_reader(a)
    assert loop._selector.get_key(a).events == selectors.EVENT_WRITE
    loop.remove_writer(a)
    with pytest.raises(KeyError):
        loop._selector.get_key(a)
    assert not selector_events._test_selector_event(loop._selector, a.fileno(),
                                                    selectors.EVENT_READ)


def test_selector_lookup_errors(loop, sockpair):
    a, b = sockpair
    with pytest.raises(ValueError):
        loop._selector.get_key(-1)
    with pytest.raises(ValueError):
        loop._selector.get_key(object())
    # A socket closed since it was registered is still found by the object.
    loop.add_reader(a, lambda: None)
    fd = a.fileno()
    a.close()
    assert loop._selector.get_key(a).fd == fd
    loop.remove_reader(a)


def test_selector_map(loop, sockpair):
    a, b = sockpair
    loop.add_reader(a, lambda: None)
    loop.add_writer(b, lambda: None)
    mapping = loop._selector.get_map()
    assert {a.fileno(), b.fileno()} <= set(mapping)
    assert mapping[a].fd == a.fileno()
    assert mapping[b.fileno()].events == selectors.EVENT_WRITE
    assert a in mapping
    assert len(mapping) == len(list(mapping))
    loop.remove_reader(a)
    loop.remove_writer(b)
    assert a.fileno() not in loop._selector.get_map()


def test_selector_after_close(loop_factory):
    loop = loop_factory()
    loop.close()
    assert loop._selector is None


def test_selector_sees_sock_operations(loop):
    """A blocked sock_recv() waits with a reader on the socket's fd, until
    it ends."""
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    with a, b:
        async def main():
            task = asyncio.ensure_future(loop.sock_recv(a, 10))
            await asyncio.sleep(0)
            assert loop._selector.get_key(a).events == selectors.EVENT_READ
            b.send(b"x")
            assert await task == b"x"
            with pytest.raises(KeyError):
                loop._selector.get_key(a)

        loop.run_until_complete(main())


def test_minloop_selector_is_a_read_only_view(loop, loop_kind, sockpair):
    if loop_kind != "minloop":
        pytest.skip("asyncio's loop has a real selector")
    a, b = sockpair
    selector = loop._selector
    assert isinstance(selector, selectors.BaseSelector)
    assert type(selector).__name__ == "FdTableView"
    for call in (lambda: selector.register(a, selectors.EVENT_READ),
                 lambda: selector.modify(a, selectors.EVENT_READ),
                 lambda: selector.unregister(a),
                 lambda: selector.select(0)):
        with pytest.raises(NotImplementedError):
            call()
    with pytest.raises(KeyError):
        loop._selector.get_key(a)
    # A view kept after the loop closed: a closed selector.
    loop.close()
    assert selector.get_map() is None
    with pytest.raises(RuntimeError, match="Selector is closed"):
        selector.get_key(a)
