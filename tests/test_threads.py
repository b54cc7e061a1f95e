"""call_soon_threadsafe, thread wake-up, executors, and the debug-mode thread check."""

import asyncio
import concurrent.futures
import gc
import os
import signal
import sys
import threading
import time
import warnings

import pytest

from thread_helpers import join_all, start_all

WRONG_THREAD = ("Non-thread-safe operation invoked on an event loop other "
                "than the current one")


def test_call_soon_threadsafe_loses_nothing(loop):
    """8 threads x 10,000 call_soon_threadsafe calls: every callback runs exactly once."""
    n_threads, per_thread = 8, 10_000
    total = n_threads * per_thread
    counts = [0] * n_threads
    done = loop.create_future()
    seen = [0]

    def cb(i):
        counts[i] += 1
        seen[0] += 1
        if seen[0] == total and not done.done():
            done.set_result(None)

    start = threading.Barrier(n_threads)

    def producer(i):
        start.wait()
        for _ in range(per_thread):
            loop.call_soon_threadsafe(cb, i)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    try:
        loop.run_until_complete(asyncio.wait_for(done, 30))
    finally:
        for t in threads:
            t.join()
    assert counts == [per_thread] * n_threads


def test_call_soon_threadsafe_preserves_order_per_thread(loop):
    """Calls from one thread run in the order that thread made them."""
    got = []
    done = loop.create_future()

    def producer():
        for i in range(5000):
            loop.call_soon_threadsafe(got.append, i)
        loop.call_soon_threadsafe(done.set_result, None)

    t = threading.Thread(target=producer)
    t.start()
    loop.run_until_complete(asyncio.wait_for(done, 10))
    t.join()
    assert got == list(range(5000))


def test_call_soon_threadsafe_returns_handle(loop, run_briefly):
    """call_soon_threadsafe returns a cancellable handle."""
    called = []
    h = loop.call_soon_threadsafe(called.append, 1)
    h.cancel()
    assert h.cancelled()
    run_briefly(loop)
    assert called == []


def test_call_soon_threadsafe_wakes_sleeping_loop(loop):
    """A loop blocked waiting for a 30 s timer is woken promptly by another thread."""
    fut = loop.create_future()
    far = loop.call_later(30, lambda: None)

    def poke():
        time.sleep(0.05)
        loop.call_soon_threadsafe(fut.set_result, "woken")

    t = threading.Thread(target=poke)
    t0 = time.monotonic()
    t.start()
    try:
        assert loop.run_until_complete(fut) == "woken"
    finally:
        t.join()
    far.cancel()
    assert time.monotonic() - t0 < 1.0


def test_call_soon_threadsafe_wakes_loop_with_nothing_scheduled(loop):
    """A loop with no timers at all (infinite wait) is woken by another thread."""
    def poke():
        time.sleep(0.02)
        loop.call_soon_threadsafe(loop.stop)

    t = threading.Thread(target=poke)
    t0 = time.monotonic()
    t.start()
    loop.run_forever()
    t.join()
    assert time.monotonic() - t0 < 2.0


def test_repeated_wakeups(loop):
    """200 sequential cross-thread wake-ups each reach the sleeping loop."""
    async def main():
        for i in range(200):
            fut = loop.create_future()
            t = threading.Thread(target=loop.call_soon_threadsafe,
                                 args=(fut.set_result, i))
            t.start()
            assert await asyncio.wait_for(fut, 5) == i
            t.join()
        return "ok"

    assert loop.run_until_complete(main()) == "ok"


def test_run_in_executor_default_created_lazily(loop):
    """The default executor is created on first run_in_executor(None, ...)."""
    assert hasattr(loop, "_default_executor")
    assert loop._default_executor is None

    def work(a, b):
        return a + b, threading.current_thread() is not threading.main_thread()

    result = loop.run_until_complete(loop.run_in_executor(None, work, 1, 2))
    assert result == (3, True)
    assert isinstance(loop._default_executor, concurrent.futures.ThreadPoolExecutor)
    first = loop._default_executor
    loop.run_until_complete(loop.run_in_executor(None, work, 3, 4))
    assert loop._default_executor is first


def test_run_in_executor_returns_asyncio_future(loop):
    """run_in_executor returns an asyncio Future bound to the loop."""
    fut = loop.run_in_executor(None, lambda: 5)
    assert isinstance(fut, asyncio.Future)
    assert fut.get_loop() is loop
    assert loop.run_until_complete(fut) == 5


def test_run_in_executor_exception_propagates(loop):
    """An exception raised in the executor comes out of the awaited future."""
    def bad():
        raise KeyError("in thread")

    with pytest.raises(KeyError, match="in thread"):
        loop.run_until_complete(loop.run_in_executor(None, bad))


def test_run_in_executor_explicit_executor(loop):
    """run_in_executor(executor, ...) uses that executor."""
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="explicit") as ex:
        name = loop.run_until_complete(
            loop.run_in_executor(ex, lambda: threading.current_thread().name))
    assert name.startswith("explicit")
    assert loop._default_executor is None


def test_set_default_executor(loop):
    """set_default_executor's executor serves run_in_executor(None, ...)."""
    ex = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="custom-default")
    try:
        loop.set_default_executor(ex)
        name = loop.run_until_complete(
            loop.run_in_executor(None, lambda: threading.current_thread().name))
        assert name.startswith("custom-default")
    finally:
        ex.shutdown(wait=True)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10 only warns (DeprecationWarning) for a non-ThreadPoolExecutor")
def test_set_default_executor_rejects_non_thread_pool(loop):
    """set_default_executor(non-ThreadPoolExecutor) -> TypeError."""
    with pytest.raises(TypeError, match="executor must be ThreadPoolExecutor instance"):
        loop.set_default_executor(object())


def test_shutdown_default_executor(loop):
    """shutdown_default_executor joins the executor; later use raises RuntimeError."""
    loop.run_until_complete(loop.run_in_executor(None, time.sleep, 0.001))
    ex = loop._default_executor
    threads_before = set(ex._threads)
    loop.run_until_complete(loop.shutdown_default_executor())
    assert all(not t.is_alive() for t in threads_before)
    with pytest.raises(RuntimeError, match="Executor shutdown has been called"):
        loop.run_in_executor(None, time.sleep, 0)


def test_shutdown_default_executor_without_executor(loop):
    """shutdown_default_executor with no executor created is a no-op that completes."""
    loop.run_until_complete(loop.shutdown_default_executor())
    assert loop._default_executor is None


def test_close_shuts_down_default_executor(loop):
    """close() shuts the default executor down (no more submissions accepted)."""
    loop.run_until_complete(loop.run_in_executor(None, lambda: None))
    ex = loop._default_executor
    loop.close()
    with pytest.raises(RuntimeError):
        ex.submit(lambda: None)


def test_to_thread(loop):
    """asyncio.to_thread runs in the default executor and returns the value."""
    async def main():
        return await asyncio.to_thread(lambda: threading.get_ident())
    assert loop.run_until_complete(main()) != threading.get_ident()


def test_wrap_future_from_thread(loop):
    """A concurrent.futures.Future completed in a thread wakes its asyncio wrapper."""
    cf = concurrent.futures.Future()
    t = threading.Timer(0.01, cf.set_result, ("cf",))
    t.start()
    try:
        assert loop.run_until_complete(asyncio.wrap_future(cf, loop=loop)) == "cf"
    finally:
        t.join()


def test_run_coroutine_threadsafe(loop):
    """run_coroutine_threadsafe from another thread runs on the loop."""
    results = []

    async def coro(x):
        await asyncio.sleep(0)
        return x, threading.current_thread() is threading.main_thread()

    def other():
        fut = asyncio.run_coroutine_threadsafe(coro(7), loop)
        results.append(fut.result(5))
        loop.call_soon_threadsafe(loop.stop)

    t = threading.Thread(target=other)
    t.start()
    loop.run_forever()
    t.join()
    assert results == [(7, True)]


@pytest.mark.parametrize("method", ["call_soon", "call_later", "call_at"])
def test_debug_wrong_thread_raises(loop, method):
    """In debug mode, call_soon/call_later/call_at from another thread raise RuntimeError."""
    loop.set_debug(True)
    errors = []

    def from_thread():
        try:
            if method == "call_soon":
                loop.call_soon(lambda: None)
            elif method == "call_later":
                loop.call_later(0, lambda: None)
            else:
                loop.call_at(loop.time(), lambda: None)
        except RuntimeError as exc:
            errors.append(str(exc))
        else:
            errors.append(None)

    async def main():
        # Submitted from inside the running loop: the check is only made
        # while the loop runs.
        await loop.run_in_executor(None, from_thread)

    loop.run_until_complete(main())
    assert errors == [WRONG_THREAD]


def test_debug_call_soon_threadsafe_from_thread_is_fine(loop):
    """In debug mode call_soon_threadsafe from another thread is allowed."""
    loop.set_debug(True)
    fut = loop.create_future()
    loop.run_until_complete(loop.run_in_executor(
        None, loop.call_soon_threadsafe, fut.set_result, 1))
    assert loop.run_until_complete(fut) == 1


def test_no_thread_check_when_loop_not_running(loop):
    """The debug thread check applies only while the loop runs (asyncio's _check_thread)."""
    loop.set_debug(True)
    errors = []

    def from_thread():
        try:
            loop.call_soon(lambda: None).cancel()
        except RuntimeError as exc:
            errors.append(exc)

    t = threading.Thread(target=from_thread)
    t.start()
    t.join()
    assert errors == []


def test_loop_runs_in_non_main_thread(loop_factory):
    """A loop created and run in a worker thread works and is stoppable from outside."""
    result = {}
    started = threading.Event()
    holder = {}

    def worker():
        lp = loop_factory()
        holder["loop"] = lp
        try:
            lp.call_soon(started.set)
            lp.run_forever()

            async def coro():
                await asyncio.sleep(0.001)
                return threading.get_ident()

            result["ident"] = lp.run_until_complete(coro())
        finally:
            lp.close()

    t = threading.Thread(target=worker)
    t.start()
    assert started.wait(5)
    holder["loop"].call_soon_threadsafe(holder["loop"].stop)
    t.join(5)
    assert not t.is_alive()
    assert result["ident"] == t.ident


def test_is_running_seen_from_other_thread(loop):
    """is_running() is True when asked from another thread while the loop runs."""
    seen = []

    def check():
        seen.append(loop.is_running())
        loop.call_soon_threadsafe(loop.stop)

    loop.call_soon(lambda: threading.Thread(target=check).start())
    loop.run_forever()
    assert seen == [True]


# ----------------------------------------------------------------------
# The cross-thread entries under load: call_soon_threadsafe, stop() through
# it, run_coroutine_threadsafe and signals, each from many threads at once
# into a running loop.  With the GIL they check the hand-off's bookkeeping;
# on a free-threaded build (the GitHub workflow's 3.14t jobs) they are the
# races docs/threading.md is about.  Each is bounded to a second or two.

def test_call_soon_threadsafe_many_threads_exactly_once_in_order(loop):
    """16 threads push into a running loop: each callback runs once, each thread's in FIFO order."""
    n_threads, per_thread = 16, 2000
    got = [[] for _ in range(n_threads)]
    remaining = [n_threads * per_thread]
    done = loop.create_future()

    def cb(i, seq):
        got[i].append(seq)
        remaining[0] -= 1
        if remaining[0] == 0:
            done.set_result(None)

    start = threading.Barrier(n_threads + 1)

    def producer(i):
        start.wait()
        for seq in range(per_thread):
            loop.call_soon_threadsafe(cb, i, seq)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(n_threads)]
    start_all(threads)

    async def main():
        # The loop is running (and sleeping in its poller) when they start.
        await loop.run_in_executor(None, start.wait)
        await asyncio.wait_for(done, 20)

    try:
        loop.run_until_complete(main())
    finally:
        join_all(threads)
    assert got == [list(range(per_thread))] * n_threads
    assert remaining == [0]


def test_stop_through_call_soon_threadsafe_while_threads_push(loop):
    """stop() scheduled from a thread stops run_forever; nothing pushed meanwhile is lost."""
    n_threads, per_thread = 8, 2000
    counts = [0] * n_threads
    stopper_ready = threading.Event()

    def cb(i):
        counts[i] += 1

    def producer(i):
        for n in range(per_thread):
            loop.call_soon_threadsafe(cb, i)
            if i == 0 and n == per_thread // 2:
                stopper_ready.set()

    def stopper():
        stopper_ready.wait(10)
        loop.call_soon_threadsafe(loop.stop)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(n_threads)]
    threads.append(threading.Thread(target=stopper))
    loop.call_soon(start_all, threads)
    t0 = time.monotonic()
    loop.run_forever()     # returns once the stopper's stop() has run
    assert time.monotonic() - t0 < 10
    assert not loop.is_running()
    join_all(threads)
    # Whatever was queued behind stop() runs on the next run, once each.
    loop.run_until_complete(asyncio.sleep(0))
    while sum(counts) < n_threads * per_thread:
        before = sum(counts)
        loop.run_until_complete(asyncio.sleep(0))
        assert sum(counts) > before
    assert counts == [per_thread] * n_threads


def test_run_coroutine_threadsafe_from_many_threads(loop):
    """8 threads x 50 run_coroutine_threadsafe: each result reaches its thread."""
    n_threads, per_thread = 8, 50
    results = [None] * n_threads
    errors = []

    async def square(x):
        await asyncio.sleep(0)
        return x * x

    def client(i):
        try:
            futs = [asyncio.run_coroutine_threadsafe(square(i * 1000 + k), loop)
                    for k in range(per_thread)]
            results[i] = [f.result(10) for f in futs]
        except BaseException as exc:   # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n_threads)]

    async def main():
        start_all(threads)
        await loop.run_in_executor(None, join_all, threads)

    loop.run_until_complete(asyncio.wait_for(main(), 20))
    assert errors == []
    assert results == [[(i * 1000 + k) ** 2 for k in range(per_thread)]
                       for i in range(n_threads)]


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs SIGUSR1")
@pytest.mark.main_interpreter("signals")
def test_signals_delivered_while_threads_hammer(loop):
    """Signals reach their handler, each once, while 8 threads push callbacks."""
    n_signals, n_threads = 10, 8
    handled = []
    pushed = [0]
    stop_pushing = threading.Event()
    ack = threading.Event()

    def on_signal():
        handled.append(threading.get_ident())
        ack.set()

    def bump():
        pushed[0] += 1

    def producer():
        # Bursts of 20, each waited for, not a flood: asyncio writes a byte
        # to its self-pipe per call, and a socketpair holds only a few
        # hundred one-byte writes; once it is full, the signal's byte is
        # dropped too (a lost signal, "BlockingIOError" reported).  8
        # threads x 21 calls outstanding at most stays below that.
        # A burst is waited for however long the loop takes (a busy
        # machine): pushing on after a timeout would unbound the bytes
        # outstanding and drop asyncio's signal byte (seen in CI).
        ran = threading.Event()
        while not stop_pushing.is_set():
            ran.clear()
            for _ in range(20):
                loop.call_soon_threadsafe(bump)
            loop.call_soon_threadsafe(ran.set)
            while not ran.wait(0.5):
                if stop_pushing.is_set():
                    return

    def sender():
        # One signal at a time: two pending at once would merge into one.
        for _ in range(n_signals):
            ack.clear()
            os.kill(os.getpid(), signal.SIGUSR1)
            if not ack.wait(5):
                break
        stop_pushing.set()

    loop.add_signal_handler(signal.SIGUSR1, on_signal)
    threads = [threading.Thread(target=producer) for _ in range(n_threads)]
    threads.append(threading.Thread(target=sender))
    try:
        async def main():
            start_all(threads)
            await loop.run_in_executor(None, join_all, threads)

        loop.run_until_complete(asyncio.wait_for(main(), 20))
    finally:
        stop_pushing.set()
        loop.remove_signal_handler(signal.SIGUSR1)
    assert handled == [threading.get_ident()] * n_signals   # on the loop's thread
    assert pushed[0] > 0


# ----------------------------------------------------------------------
# close() racing with producers, and wake-ups racing with the loop going to
# sleep.  asyncio's rule for the first: close() drops whatever is queued, and
# a call after it raises RuntimeError('Event loop is closed').  So each call
# racing a close() must either be accepted (then run, or be dropped by that
# close() and released) or raise that error -- never vanish into a closed
# loop, never crash.

CLOSED = "Event loop is closed"


class _Token:
    """A callback argument that reports its own release."""

    __slots__ = ("__weakref__",)
    released = None   # a list: one entry per released token

    def __del__(self):
        _Token.released.append(1)


def _close_racing_producers(lp, n_threads, run_first):
    """Run `lp` (or not), then close it while n_threads push into it; returns
    (created, accepted, refused, ran, errors) after every producer is done."""
    accepted = [0] * n_threads
    refused = [0] * n_threads
    ran = [0]
    errors = []
    start = threading.Barrier(n_threads + 1)

    def cb(token):
        ran[0] += 1

    def producer(i):
        start.wait()
        k = 0
        while True:
            k += 1
            if k % 8 == 0:
                # Let the other threads (the closing one) in often, and keep
                # the queue from growing without bound while the loop is not
                # consuming.
                time.sleep(0.0002 if k > 20_000 else 0)
            try:
                if k % 16 == 0:
                    # asyncio's private wake-up, used by some libraries: it
                    # races close() for the wake-up fd.
                    lp._write_to_self()
                lp.call_soon_threadsafe(cb, _Token())
            except RuntimeError as exc:
                if str(exc) == CLOSED:
                    refused[i] += 1
                else:
                    errors.append(exc)
                return
            except BaseException as exc:   # reported below
                errors.append(exc)
                return
            accepted[i] += 1

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(n_threads)]
    start_all(threads)
    start.wait()
    if run_first:
        # Let the loop consume (and sleep, and be woken) for a while.
        lp.run_until_complete(asyncio.sleep(0.02))
    # Callbacks pile up for close() to drop.
    time.sleep(0.003)
    lp.close()            # the producers are still pushing
    join_all(threads)
    return sum(accepted), sum(refused), ran[0], errors


@pytest.mark.parametrize("run_first", [True, False], ids=["ran", "never-ran"])
def test_call_soon_threadsafe_racing_close_schedules_or_raises(loop_factory, loop_kind,
                                                              run_first):
    """12 threads push while the loop closes: each call is accepted (then run or
    dropped by close() and released) or raises RuntimeError('Event loop is closed')."""
    n_threads, rounds = 12, 5
    _Token.released = released = []
    try:
        for _ in range(rounds):
            released.clear()
            lp = loop_factory()
            lp.set_debug(False)
            accepted, refused, ran, errors = _close_racing_producers(
                lp, n_threads, run_first)
            assert errors == []
            assert refused == n_threads      # each thread stopped at the close
            assert ran <= accepted
            if loop_kind == "minloop":
                # Stricter than asyncio, whose call can append to the ready
                # deque just after close() cleared it (the callback is then
                # held, never run, until the loop is freed): every accepted
                # callback either ran or was dropped by close() -- released
                # by now -- and nothing is queued in the closed loop.
                gc.collect()
                assert lp._ready_count() == 0
                assert len(released) == accepted + refused
            assert lp.is_closed()
            with pytest.raises(RuntimeError, match=CLOSED):
                lp.call_soon_threadsafe(int)
            lp._write_to_self()    # nothing to wake, no error (asyncio's too)
            del lp
            gc.collect()
            # Nothing leaked: every token ever created is released.
            assert len(released) == accepted + refused
    finally:
        _Token.released = None


def test_no_wakeup_lost_against_a_long_poll(loop):
    """8 threads x 300 ping-pongs with a loop that would otherwise sleep 60 s.

    Each producer pushes at a different moment relative to the loop going to
    sleep (the window between the loop's look at its queue and its blocking
    wait is the one a lost wake-up falls into); a lost wake-up leaves the
    callback queued until the 60 s timer, and the producer's generous wait
    fails.  No speed is asserted."""
    n_threads, rounds = 8, 300
    far = loop.call_later(60, lambda: None)   # the poll's timeout, were it lost
    failures = []

    def producer(i):
        ev = threading.Event()
        for r in range(rounds):
            ev.clear()
            loop.call_soon_threadsafe(ev.set)
            if not ev.wait(10):
                failures.append((i, r))
                return
            if r % 3 == 1:
                time.sleep(0)       # vary the phase against the loop
            elif r % 3 == 2:
                time.sleep(0.0001)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(n_threads)]

    async def main():
        start_all(threads)
        await loop.run_in_executor(None, join_all, threads)

    try:
        loop.run_until_complete(asyncio.wait_for(main(), 60))
    finally:
        far.cancel()
    assert failures == []
    if hasattr(loop, "_wakeups_sent"):
        # minloop: the loop did sleep and was woken (the path under test).
        assert loop._wakeups_sent > 0


@pytest.mark.timeout(120)
def test_no_wakeup_lost_with_nothing_scheduled(loop):
    """The same with no timer at all (an infinite wait if a wake-up is lost):
    one thread at a time, so the loop is certainly asleep or going to sleep."""
    failures = []

    def producer():
        ev = threading.Event()
        for r in range(1000):
            ev.clear()
            loop.call_soon_threadsafe(ev.set)
            if not ev.wait(10):
                failures.append(r)
                break
            if r & 1:
                time.sleep(0)
        loop.call_soon_threadsafe(loop.stop)

    t = threading.Thread(target=producer)
    loop.call_soon(t.start)
    loop.run_forever()       # returns only if the last wake-up arrived too
    t.join(10)
    assert failures == []


def test_callback_running_an_iteration_itself(loop_kind, loop, minloop_only):
    """A callback that runs loop._run_once() empties the batch its caller is
    running: the outer iteration stops there (asyncio's deque raises
    IndexError; minloop popped a NULL and crashed) and each callback runs once."""
    ran = []
    loop.call_soon(loop._run_once)
    loop.call_soon(ran.append, 1)
    loop.call_soon(ran.append, 2)
    loop._run_once()
    assert ran == [1, 2]
    assert loop._ready_count() == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
@pytest.mark.main_interpreter("fork")
def test_forked_child_wakes_its_loop_from_its_own_thread(loop):
    """fork() while 4 threads push into the loop: in the child (their pushes
    gone, the ring's lock reset), a thread of the child wakes the inherited
    loop from an infinite wait, and the callbacks queued at fork() run once."""
    stop_pushing = threading.Event()
    ran = []

    def producer():
        while not stop_pushing.is_set():
            loop.call_soon_threadsafe(ran.append, 1)
            time.sleep(0)

    threads = [threading.Thread(target=producer) for _ in range(4)]
    start_all(threads)
    try:
        time.sleep(0.01)
        with warnings.catch_warnings():
            # 3.12+: "This process is multi-threaded, use of fork() may lead
            # to deadlocks in the child" -- the point of this test.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:   # child: only this thread exists
            code = 1
            try:
                signal.alarm(10)          # never outlive a broken test
                queued = (loop._ready_count() if hasattr(loop, "_ready_count")
                          else len(loop._ready))
                ran.clear()
                woke = []

                def poke():
                    time.sleep(0.05)      # the loop is asleep by now
                    loop.call_soon_threadsafe(lambda: (woke.append(1), loop.stop()))

                def start():
                    threading.Thread(target=poke).start()

                loop.call_soon(start)
                loop.run_forever()        # nothing else scheduled: only poke() ends it
                code = 0 if woke == [1] and len(ran) == queued else 2
                loop.close()
            finally:
                os._exit(code)
    finally:
        stop_pushing.set()
        join_all(threads)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
