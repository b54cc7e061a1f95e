"""add_signal_handler/remove_signal_handler (Unix, main thread)."""

import asyncio
import os
import signal
import threading
import time

import pytest

pytestmark = [pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs POSIX signals"),
              pytest.mark.main_interpreter("signals")]


@pytest.fixture(autouse=True)
def guard_signals():
    """Keep a Python handler on SIGUSR1/SIGUSR2 around each test, then restore.

    If a loop fails to install its handler, os.kill() would otherwise kill
    the test process (SIGUSR1's default action is to terminate).  The guard
    only records; the tests check what the loop installs over it.
    """
    stray = []
    saved = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT)}
    for s in (signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(s, lambda signum, frame: stray.append(signum))
    yield stray
    for s, h in saved.items():
        signal.signal(s, h)
    signal.set_wakeup_fd(-1)


def _kill_self(sig):
    os.kill(os.getpid(), sig)


def test_signal_handler_runs_in_loop(loop, guard_signals):
    """SIGUSR1 sent to the process runs the handler as a loop callback, with its args."""
    got = []

    def handler(*args):
        got.append((args, asyncio.get_running_loop() is loop,
                    threading.current_thread() is threading.main_thread()))
        loop.stop()

    loop.add_signal_handler(signal.SIGUSR1, handler, "a", 1)
    loop.call_soon(_kill_self, signal.SIGUSR1)
    loop.call_later(5, loop.stop)
    loop.run_forever()
    assert got == [(("a", 1), True, True)]
    assert guard_signals == []


def test_signal_wakes_loop_waiting_on_far_timer(loop):
    """A signal from another thread wakes a loop waiting for a 30 s timer promptly."""
    got = []

    def handler():
        got.append(1)
        loop.stop()

    loop.add_signal_handler(signal.SIGUSR1, handler)
    far = loop.call_later(30, loop.stop)
    t = threading.Timer(0.02, _kill_self, (signal.SIGUSR1,))
    t0 = time.monotonic()
    t.start()
    loop.run_forever()
    t.join()
    far.cancel()
    assert got == [1]
    assert time.monotonic() - t0 < 2.0


def test_signal_handler_that_stops_the_loop(loop):
    """A signal handler can be loop.stop itself."""
    loop.add_signal_handler(signal.SIGUSR1, loop.stop)
    loop.call_soon(_kill_self, signal.SIGUSR1)
    far = loop.call_later(5, loop.stop)
    t0 = time.monotonic()
    loop.run_forever()
    far.cancel()
    assert time.monotonic() - t0 < 2.0


def test_two_signals_two_handlers(loop):
    """SIGUSR1 and SIGUSR2 each run their own handler."""
    got = []

    def handler(name):
        got.append(name)
        if len(got) == 2:
            loop.stop()

    loop.add_signal_handler(signal.SIGUSR1, handler, "usr1")
    loop.add_signal_handler(signal.SIGUSR2, handler, "usr2")
    loop.call_soon(_kill_self, signal.SIGUSR1)
    loop.call_soon(_kill_self, signal.SIGUSR2)
    far = loop.call_later(5, loop.stop)
    loop.run_forever()
    far.cancel()
    assert sorted(got) == ["usr1", "usr2"]


def test_remove_signal_handler_returns_true_then_false(loop):
    """remove_signal_handler returns True when one was removed, False otherwise."""
    assert loop.remove_signal_handler(signal.SIGUSR1) is False
    loop.add_signal_handler(signal.SIGUSR1, lambda: None)
    assert loop.remove_signal_handler(signal.SIGUSR1) is True
    assert loop.remove_signal_handler(signal.SIGUSR1) is False


def test_remove_restores_default_disposition(loop):
    """Removing a handler resets the signal to SIG_DFL (SIGINT: default_int_handler)."""
    loop.add_signal_handler(signal.SIGUSR1, lambda: None)
    assert signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, signal.SIG_IGN)
    loop.remove_signal_handler(signal.SIGUSR1)
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    loop.add_signal_handler(signal.SIGINT, lambda: None)
    loop.remove_signal_handler(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_removed_handler_no_longer_runs(loop, run_for):
    """After remove_signal_handler the old handler does not run for a new signal."""
    got = []
    loop.add_signal_handler(signal.SIGUSR1, got.append, 1)
    loop.remove_signal_handler(signal.SIGUSR1)
    # Put a plain Python handler back so the kill cannot terminate us.
    stray = []
    signal.signal(signal.SIGUSR1, lambda s, f: stray.append(s))
    loop.call_soon(_kill_self, signal.SIGUSR1)
    run_for(loop, 0.02)
    assert got == []
    assert stray == [signal.SIGUSR1]


def test_add_remove_add_again(loop):
    """add, remove, add again: the new handler works."""
    got = []
    loop.add_signal_handler(signal.SIGUSR1, got.append, "first")
    assert loop.remove_signal_handler(signal.SIGUSR1) is True

    def second():
        got.append("second")
        loop.stop()

    loop.add_signal_handler(signal.SIGUSR1, second)
    loop.call_soon(_kill_self, signal.SIGUSR1)
    far = loop.call_later(5, loop.stop)
    loop.run_forever()
    far.cancel()
    assert got == ["second"]


def test_add_replaces_previous_handler_for_same_signal(loop):
    """A second add_signal_handler for one signal replaces the first."""
    got = []
    loop.add_signal_handler(signal.SIGUSR1, got.append, "first")

    def second():
        got.append("second")
        loop.stop()

    loop.add_signal_handler(signal.SIGUSR1, second)
    loop.call_soon(_kill_self, signal.SIGUSR1)
    far = loop.call_later(5, loop.stop)
    loop.run_forever()
    far.cancel()
    assert got == ["second"]
    assert loop.remove_signal_handler(signal.SIGUSR1) is True
    assert loop.remove_signal_handler(signal.SIGUSR1) is False


def test_signal_handler_exception_goes_to_exception_handler(loop):
    """An exception in a signal handler is routed to the loop's exception handler."""
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    def bad():
        loop.stop()
        raise ValueError("in signal handler")

    loop.add_signal_handler(signal.SIGUSR1, bad)
    loop.call_soon(_kill_self, signal.SIGUSR1)
    far = loop.call_later(5, loop.stop)
    loop.run_forever()
    far.cancel()
    assert len(contexts) == 1
    assert isinstance(contexts[0]["exception"], ValueError)
    assert contexts[0]["message"].startswith("Exception in callback ")


def test_many_signals_coalesce_but_handler_runs(loop):
    """A burst of the same signal runs the handler at least once, at most once per signal."""
    got = []
    loop.add_signal_handler(signal.SIGUSR1, got.append, 1)

    def burst():
        for _ in range(20):
            _kill_self(signal.SIGUSR1)

    loop.call_soon(burst)
    loop.call_later(0.05, loop.stop)
    loop.run_forever()
    assert 1 <= len(got) <= 20


def test_signal_handler_raising_keyboard_interrupt_propagates(loop, run_briefly):
    """A signal handler raising KeyboardInterrupt makes run_forever raise it; the loop survives."""
    def handler():
        raise KeyboardInterrupt

    loop.add_signal_handler(signal.SIGUSR1, handler)
    loop.call_soon(_kill_self, signal.SIGUSR1)
    far = loop.call_later(5, loop.stop)
    with pytest.raises(KeyboardInterrupt):
        loop.run_forever()
    far.cancel()
    assert not loop.is_running()
    run_briefly(loop)


@pytest.mark.parametrize("sig", [0, -1, 999, 65])
def test_invalid_signal_number_raises_valueerror(loop, sig):
    """An out-of-range signal number -> ValueError('invalid signal number N')."""
    with pytest.raises(ValueError) as ei:
        loop.add_signal_handler(sig, lambda: None)
    assert str(ei.value) == f"invalid signal number {sig}"
    with pytest.raises(ValueError):
        loop.remove_signal_handler(sig)


@pytest.mark.parametrize("sig", ["x", 1.5, None])
def test_non_int_signal_raises_typeerror(loop, sig):
    """A non-int signal -> TypeError('sig must be an int, not ...')."""
    with pytest.raises(TypeError) as ei:
        loop.add_signal_handler(sig, lambda: None)
    assert str(ei.value) == f"sig must be an int, not {sig!r}"
    with pytest.raises(TypeError):
        loop.remove_signal_handler(sig)


@pytest.mark.parametrize("name", ["SIGKILL", "SIGSTOP"])
def test_uncatchable_signal_raises_runtimeerror(loop, name):
    """SIGKILL/SIGSTOP cannot be caught -> RuntimeError('sig N cannot be caught')."""
    sig = int(getattr(signal, name))
    with pytest.raises(RuntimeError) as ei:
        loop.add_signal_handler(sig, lambda: None)
    assert str(ei.value) == f"sig {sig} cannot be caught"
    assert loop.remove_signal_handler(sig) is False


def test_coroutine_function_as_handler_raises_typeerror(loop):
    """A coroutine function (or coroutine object) as handler -> TypeError."""
    async def coro():
        pass

    with pytest.raises(TypeError, match=r"^coroutines cannot be used with add_signal_handler\(\)$"):
        loop.add_signal_handler(signal.SIGUSR1, coro)
    c = coro()
    try:
        with pytest.raises(TypeError, match=r"^coroutines cannot be used with add_signal_handler\(\)$"):
            loop.add_signal_handler(signal.SIGUSR1, c)
    finally:
        c.close()
    assert loop.remove_signal_handler(signal.SIGUSR1) is False


def test_add_signal_handler_from_non_main_thread_raises(loop):
    """add_signal_handler from a non-main thread -> RuntimeError (set_wakeup_fd refuses)."""
    errors = []

    def other():
        try:
            loop.add_signal_handler(signal.SIGUSR1, lambda: None)
        except Exception as exc:  # noqa: BLE001 - the type is what is tested
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1
    assert type(errors[0]) is RuntimeError
    assert "main thread" in str(errors[0])
    assert loop.remove_signal_handler(signal.SIGUSR1) is False


def test_loop_in_non_main_thread_cannot_add_signal_handler(loop_factory):
    """A loop running in a worker thread cannot add signal handlers (RuntimeError)."""
    errors = []

    def worker():
        lp = loop_factory()
        try:
            lp.add_signal_handler(signal.SIGUSR1, lambda: None)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            lp.close()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert len(errors) == 1 and type(errors[0]) is RuntimeError


def test_close_removes_signal_handlers(loop_factory):
    """close() removes every signal handler: the signals go back to their defaults."""
    lp = loop_factory()
    lp.add_signal_handler(signal.SIGUSR1, lambda: None)
    lp.add_signal_handler(signal.SIGUSR2, lambda: None)
    lp.add_signal_handler(signal.SIGINT, lambda: None)
    lp.close()
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_wakeup_fd_cleared_after_last_handler_removed(loop):
    """Removing the last signal handler resets signal.set_wakeup_fd to -1."""
    loop.add_signal_handler(signal.SIGUSR1, lambda: None)
    loop.add_signal_handler(signal.SIGUSR2, lambda: None)
    loop.remove_signal_handler(signal.SIGUSR1)
    # Still one handler: the wakeup fd is still installed.
    current = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(current)
    assert current != -1
    loop.remove_signal_handler(signal.SIGUSR2)
    assert signal.set_wakeup_fd(-1) == -1


def test_wakeup_fd_cleared_by_close(loop_factory):
    """close() with handlers installed leaves no wakeup fd pointing at a closed socket."""
    lp = loop_factory()
    lp.add_signal_handler(signal.SIGUSR1, lambda: None)
    lp.close()
    assert signal.set_wakeup_fd(-1) == -1


def test_signal_after_close_does_not_run_handler(loop_factory, guard_signals):
    """After close(), signals no longer reach the closed loop's handlers."""
    got = []
    lp = loop_factory()
    lp.add_signal_handler(signal.SIGUSR1, got.append, 1)
    lp.close()
    stray = []
    signal.signal(signal.SIGUSR1, lambda s, f: stray.append(s))
    _kill_self(signal.SIGUSR1)
    assert got == []
    assert stray == [signal.SIGUSR1]


def test_add_signal_handler_on_closed_loop_raises(loop):
    """add_signal_handler on a closed loop -> RuntimeError('Event loop is closed')."""
    loop.close()
    with pytest.raises(RuntimeError, match=r"^Event loop is closed$"):
        loop.add_signal_handler(signal.SIGUSR1, lambda: None)


def test_python_signal_handler_runs_before_the_loop_blocks(loop, guard_signals):
    """A signal raised by a C callback (os.kill itself) runs its handler at once.

    No bytecode runs after such a callback, so the interpreter has not run the
    pending Python-level handler when the loop goes to wait; the loop must run
    it before blocking, or the handler waits for the next wake-up (here, 5 s).
    The handler raises KeyboardInterrupt, which leaves the loop at once on
    asyncio (any other exception from a handler that runs inside a callback
    goes to the loop's exception handler).
    """
    def handler(signum, frame):
        raise KeyboardInterrupt

    async def main():
        # os.kill runs in the next iteration, once main waits in its sleep.
        loop.call_soon(os.kill, os.getpid(), signal.SIGUSR1)
        await asyncio.sleep(5)

    signal.signal(signal.SIGUSR1, handler)
    task = loop.create_task(main())
    # Without the check the sleep completes and nothing is raised at all.
    with pytest.raises(KeyboardInterrupt):
        loop.run_until_complete(task)
    assert not task.done()
    task.cancel()
    loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
