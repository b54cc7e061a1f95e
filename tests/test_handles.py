"""The objects call_soon/call_later/call_at return, as programs use them:
weak references, identity, lifetime.  Every test runs on asyncio's loop too."""

import gc
import weakref

import pytest


def run_one_iteration(loop):
    loop.call_soon(loop.stop)
    loop.run_forever()


@pytest.mark.parametrize('schedule', ['call_soon', 'call_later', 'call_at'])
def test_handles_take_weak_references(loop, schedule):
    if schedule == 'call_soon':
        handle = loop.call_soon(int)
    elif schedule == 'call_later':
        handle = loop.call_later(0, int)
    else:
        handle = loop.call_at(loop.time(), int)
    ref = weakref.ref(handle)
    assert ref() is handle
    proxy = weakref.proxy(handle)
    assert proxy.cancelled() is False
    run_one_iteration(loop)
    assert ref() is handle              # still held here
    del handle
    gc.collect()                        # asyncio's loop may hold it in a cycle
    run_one_iteration(loop)             # minloop lets go one iteration late
    assert ref() is None
    with pytest.raises(ReferenceError):
        proxy.cancelled()


def test_weak_reference_callbacks_run_when_a_handle_dies(loop):
    died = []
    handle = loop.call_later(0, int)
    ref = weakref.ref(handle, lambda r: died.append(r))
    run_one_iteration(loop)
    del handle
    gc.collect()
    run_one_iteration(loop)
    assert died == [ref]


def test_handles_live_in_weak_collections(loop):
    """Libraries keep their timers in WeakSets / WeakKeyDictionaries."""
    timers = weakref.WeakSet()
    owners = weakref.WeakKeyDictionary()
    handles = [loop.call_later(0, int, i) for i in range(5)]   # unequal
    for i, h in enumerate(handles):
        timers.add(h)
        owners[h] = i
    assert len(timers) == 5 and sorted(owners.values()) == [0, 1, 2, 3, 4]
    run_one_iteration(loop)
    assert len(timers) == 5
    del handles, h
    gc.collect()
    run_one_iteration(loop)
    assert len(timers) == 0 and len(owners) == 0
