"""call_soon_threadsafe()'s handle, as the running asyncio makes it.

Where asyncio has events._ThreadSafeHandle (3.14), call_soon_threadsafe()
returns one: cancel() from another thread waits while the callback runs,
and a handle cancelled before it runs is skipped.
"""

import gc
import random
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


@needs_threadsafe_handle
@pytest.mark.parametrize("args", [(), ("a",), ("a", "b")])
@pytest.mark.parametrize("asks", ["cancel", "cancelled"])
def test_another_thread_waits_for_the_running_callback(loop, asks, args):
    # cancel() and cancelled() from another thread return only once the
    # callback that started has finished (the callback is not undone).  The
    # callback first reads its handle's arguments and runs a collection,
    # which walks the handle: minloop keeps the running thread where a
    # Handle keeps a second argument, and neither may disturb the other.
    started, finished = threading.Event(), threading.Event()
    handed = threading.Event()
    seen, holder = [], []

    def callback(*got):
        handed.wait(10)
        seen.append(got == args)
        seen.append(holder[0]._args == args)
        gc.collect()
        started.set()
        time.sleep(0.2)
        finished.set()

    def other_thread():
        handle = loop.call_soon_threadsafe(callback, *args)
        holder.append(handle)
        handed.set()
        started.wait(10)
        answer = getattr(handle, asks)()
        seen.append(finished.is_set())
        seen.append(answer)
        loop.call_soon_threadsafe(loop.stop)

    t = threading.Thread(target=other_thread)
    t.start()
    loop.run_forever()
    t.join()
    assert seen == [True, True, True, None if asks == "cancel" else False]


def test_callback_cancelling_its_own_handle_does_not_wait(loop):
    holder = []
    seen = []

    def callback():
        handle = holder[0]
        handle.cancel()                 # the running thread: no wait
        seen.append(handle.cancelled())
        loop.stop()

    holder.append(loop.call_soon_threadsafe(callback))
    loop.run_forever()
    assert seen == [True]
    assert holder[0].cancelled()
    assert holder[0]._callback is None


def test_callback_running_its_own_handle_again_does_not_deadlock(loop):
    # asyncio's lock is reentrant: _run() from the callback gets past it, to
    # fail entering the context that is already entered; that is reported
    # (to the handler, which 3.14 then fails to run in that same context).
    holder, calls, reported = [], [], []
    loop.set_exception_handler(lambda lp, context: reported.append(context))

    def callback(arg):
        calls.append(arg)
        holder[0]._run()
        loop.stop()

    holder.append(loop.call_soon_threadsafe(callback, "x"))
    loop.run_forever()
    assert calls == ["x"]
    for context in reported:
        assert "cannot enter context" in str(context["exception"])


def test_the_collector_sees_a_running_handle_as_an_idle_one(loop):
    # Once run, the loop no longer holds the handle and the collector walks
    # it; run again by hand (asyncio allows it), it is walked while it runs.
    # minloop keeps the running thread in a word a Handle keeps an argument
    # in: the walk must not report it as an object.
    holder, during = [], []

    def callback(arg):
        during.append(len(gc.get_referents(holder[0])))
        gc.collect()

    holder.append(loop.call_soon_threadsafe(callback, "x"))
    loop.call_soon(loop.stop)
    loop.run_forever()
    holder[0]._run()
    idle = len(gc.get_referents(holder[0]))
    assert during == [idle, idle]


def test_cancel_on_the_loops_thread_before_it_runs(loop):
    ran = []
    handle = loop.call_soon_threadsafe(ran.append, 1)
    handle.cancel()
    assert handle.cancelled()
    assert "cancelled" in repr(handle)
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert ran == []


def test_repr_and_arguments_are_asyncios(loop):
    def callback(a, b, c):
        pass

    handle = loop.call_soon_threadsafe(callback, 1, 2, 3)
    expected = "ThreadSafeHandle" if hasattr(events, "_ThreadSafeHandle") else "Handle"
    assert repr(handle).startswith(f"<{'_' if expected != 'Handle' else ''}{expected} ")
    assert handle._args == (1, 2, 3)
    assert isinstance(handle, events.Handle)
    handle.cancel()
    assert handle._args is None and handle._callback is None
    loop.call_soon(loop.stop)
    loop.run_forever()


def test_debug_traceback_ends_at_the_caller(loop):
    loop.set_debug(True)
    handle = loop.call_soon_threadsafe(lambda: None)
    frame = handle._source_traceback[-1]
    assert frame[0] == __file__
    assert frame[2] == "test_debug_traceback_ends_at_the_caller"
    loop.call_soon(loop.stop)
    loop.run_forever()


@needs_threadsafe_handle
def test_cancel_never_returns_while_the_callback_runs(loop):
    # Many threads each schedule a callback and cancel it at once, racing
    # the loop: whichever wins, a callback that started has finished by the
    # time cancel() returns, and one cancelled before it started never runs.
    n_threads, per_thread = 4, 100
    state = {}          # i -> "started" / "finished"
    broken = []

    def callback(i):
        state[i] = "started"
        time.sleep(0.001)       # let the cancelling thread in
        state[i] = "finished"

    def other_thread(base):
        delays = random.Random(base)
        for i in range(base, base + per_thread):
            handle = loop.call_soon_threadsafe(callback, i)
            time.sleep(delays.random() * 0.002)   # before, during or after
            handle.cancel()
            if state.get(i, "finished") != "finished":
                broken.append(i)

    threads = [threading.Thread(target=other_thread, args=(k * per_thread,))
               for k in range(n_threads)]

    def start():
        for t in threads:
            t.start()

    def stop_when_done():
        if any(t.is_alive() for t in threads):
            loop.call_later(0.01, stop_when_done)
        else:
            loop.stop()

    loop.call_soon(start)
    loop.call_soon(stop_when_done)
    loop.run_forever()
    for t in threads:
        t.join()
    loop.call_soon(loop.stop)
    loop.run_forever()          # whatever was scheduled last runs or is skipped
    assert broken == []
    assert all(v == "finished" for v in state.values())
