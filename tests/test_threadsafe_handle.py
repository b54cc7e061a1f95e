"""call_soon_threadsafe()'s handle, as the running asyncio makes it.

Where asyncio has events._ThreadSafeHandle (3.14), call_soon_threadsafe()
returns one: cancel() from another thread waits while the callback runs,
and a handle cancelled before it runs is skipped.
"""

import threading
import time
from asyncio import events

import pytest

needs_threadsafe_handle = pytest.mark.skipif(
    not hasattr(events, "_ThreadSafeHandle"),
    reason="this asyncio has no events._ThreadSafeHandle")


@needs_threadsafe_handle
def test_handle_is_asyncios_threadsafe_handle(loop):
    handle = loop.call_soon_threadsafe(lambda: None)
    assert isinstance(handle, events._ThreadSafeHandle)
    loop.call_soon(loop.stop)
    loop.run_forever()


@needs_threadsafe_handle
def test_cancel_from_another_thread_waits_for_the_running_callback(loop):
    started, finished = threading.Event(), threading.Event()
    seen = []

    def callback():
        started.set()
        time.sleep(0.2)
        finished.set()

    def other_thread():
        handle = loop.call_soon_threadsafe(callback)
        started.wait()
        handle.cancel()
        seen.append(finished.is_set())
        loop.call_soon_threadsafe(loop.stop)

    t = threading.Thread(target=other_thread)
    t.start()
    loop.run_forever()
    t.join()
    assert seen == [True]


def test_handle_cancelled_before_it_runs_is_skipped(loop):
    ran = []
    cancelled = threading.Event()

    def other_thread():
        handle = loop.call_soon_threadsafe(ran.append, "ran")
        handle.cancel()
        assert handle.cancelled()
        cancelled.set()
        loop.call_soon_threadsafe(loop.stop)

    loop.call_soon(cancelled.wait)      # holds the loop until then
    t = threading.Thread(target=other_thread)
    t.start()
    loop.run_forever()
    t.join()
    assert ran == []
