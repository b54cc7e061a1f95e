"""Creating, using and closing loops: fds released, no ResourceWarning, nesting rules."""

import asyncio
import gc
import os
import signal
import socket
import warnings

import pytest


def test_fixture_gives_requested_implementation(loop, loop_kind):
    """Sanity: the 'minloop' parametrisation really runs minloop's loop, and vice versa."""
    assert isinstance(loop, asyncio.AbstractEventLoop)
    if loop_kind == "minloop":
        import minloop
        assert isinstance(loop, minloop.Loop)
        assert not isinstance(loop, asyncio.BaseEventLoop)
    else:
        assert isinstance(loop, asyncio.BaseEventLoop)


def _exercise(lp):
    """Use timers, tasks, fd callbacks, the executor and (main thread) signals."""
    a, b = socket.socketpair()
    try:
        got = []

        def on_readable():
            got.append(a.recv(10))

        lp.add_reader(a, on_readable)
        b.send(b"x")
        lp.add_signal_handler(signal.SIGUSR1, got.append, "sig")

        async def main():
            await asyncio.sleep(0.001)
            await lp.run_in_executor(None, lambda: None)
            os.kill(os.getpid(), signal.SIGUSR1)
            for _ in range(100):
                if "sig" in got:
                    break
                await asyncio.sleep(0.001)

        lp.run_until_complete(main())
        lp.remove_reader(a)
        assert got == [b"x", "sig"]
    finally:
        a.close()
        b.close()


@pytest.mark.main_interpreter("signals")
def test_close_releases_every_fd(loop_factory, open_fds, assert_no_fd_leak):
    """After close() the process has exactly the fds it had before new_event_loop()."""
    gc.collect()
    before = open_fds()
    lp = loop_factory()
    assert len(open_fds()) >= len(before)
    _exercise(lp)
    lp.run_until_complete(lp.shutdown_default_executor())
    lp.close()
    del lp
    assert_no_fd_leak(before, "create/use/close")


@pytest.mark.main_interpreter("signals")
def test_close_without_executor_shutdown_releases_fds(loop_factory, open_fds, assert_no_fd_leak):
    """close() alone (executor still alive, signal handlers installed) releases the fds."""
    gc.collect()
    before = open_fds()
    lp = loop_factory()
    _exercise(lp)
    lp.add_signal_handler(signal.SIGUSR2, lambda: None)
    lp.close()
    del lp
    assert_no_fd_leak(before, "close() with handlers installed")
    assert signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL


def test_many_loops_do_not_accumulate_fds(loop_factory, open_fds, assert_no_fd_leak):
    """Creating and closing 200 loops leaves no fd behind."""
    gc.collect()
    before = open_fds()
    for _ in range(200):
        lp = loop_factory()
        lp.run_until_complete(asyncio.sleep(0))
        lp.close()
    del lp
    assert_no_fd_leak(before, "200 loops")


@pytest.mark.main_interpreter("signals")
def test_no_resource_warning_for_closed_loop(loop_factory):
    """A loop created, used and closed emits no ResourceWarning (checked after gc)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lp = loop_factory()
        _exercise(lp)
        lp.run_until_complete(lp.shutdown_asyncgens())
        lp.run_until_complete(lp.shutdown_default_executor())
        lp.close()
        del lp
        gc.collect()
    bad = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert bad == []


def test_unclosed_loop_warns_and_closes_on_gc(loop_factory, open_fds, assert_no_fd_leak):
    """A loop dropped without close() warns 'unclosed event loop' and releases its fds."""
    gc.collect()
    before = open_fds()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lp = loop_factory()
        lp.run_until_complete(asyncio.sleep(0))
        del lp
        gc.collect()
    msgs = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert any(m.startswith("unclosed event loop") for m in msgs), msgs
    assert_no_fd_leak(before, "an unclosed, collected loop")


def test_run_until_complete_while_other_loop_running(loop_factory):
    """run_until_complete inside another running loop (same thread) -> RuntimeError."""
    outer = loop_factory()
    inner = loop_factory()
    try:
        errors = []
        fut = inner.create_future()

        def cb():
            try:
                inner.run_until_complete(fut)
            except RuntimeError as exc:
                errors.append(str(exc))
            try:
                inner.run_forever()
            except RuntimeError as exc:
                errors.append(str(exc))

        outer.call_soon(cb)
        outer.call_soon(outer.stop)
        outer.run_forever()
        assert errors == ["Cannot run the event loop while another loop is running"] * 2
        assert not inner.is_running()
        inner.call_soon(fut.set_result, 1)
        assert inner.run_until_complete(fut) == 1
    finally:
        outer.close()
        inner.close()


def test_loop_inside_running_asyncio_loop_refused(loop):
    """The running-loop registry is asyncio's own: a running asyncio loop blocks this one too."""
    outer = asyncio.SelectorEventLoop()
    try:
        errors = []
        fut = loop.create_future()

        def cb():
            try:
                loop.run_until_complete(fut)
            except RuntimeError as exc:
                errors.append(str(exc))

        outer.call_soon(cb)
        outer.call_soon(outer.stop)
        outer.run_forever()
        assert errors == ["Cannot run the event loop while another loop is running"]
    finally:
        outer.close()
        fut.cancel()


def test_sequential_loops_in_same_thread(loop_factory):
    """Two loops may run one after the other in the same thread."""
    a = loop_factory()
    b = loop_factory()
    try:
        assert a.run_until_complete(asyncio.sleep(0, "a")) == "a"
        assert b.run_until_complete(asyncio.sleep(0, "b")) == "b"
        assert a.run_until_complete(asyncio.sleep(0, "a2")) == "a2"
    finally:
        a.close()
        b.close()


def test_get_event_loop_inside_callback_returns_running_loop(loop):
    """asyncio.get_event_loop() inside a running callback returns the running loop."""
    seen = []
    loop.call_soon(lambda: seen.append(asyncio.get_event_loop()))
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert seen == [loop]


def test_set_event_loop_and_get_event_loop(loop):
    """asyncio.set_event_loop(loop) makes it the current loop for the thread."""
    asyncio.set_event_loop(loop)
    try:
        assert asyncio.get_event_loop() is loop
    finally:
        asyncio.set_event_loop(None)


def test_debug_mode_tracks_coroutine_origin_while_running(loop):
    """In debug mode run_forever sets coroutine origin tracking depth, and restores it after."""
    import sys
    from asyncio import constants
    before = sys.get_coroutine_origin_tracking_depth()
    loop.set_debug(True)
    seen = []
    loop.call_soon(lambda: seen.append(sys.get_coroutine_origin_tracking_depth()))
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert seen == [constants.DEBUG_STACK_DEPTH]
    assert sys.get_coroutine_origin_tracking_depth() == before


def test_close_clears_ready_and_timers(loop_factory):
    """close() drops queued callbacks and timers; none run, nothing lingers."""
    lp = loop_factory()
    called = []
    lp.call_soon(called.append, 1)
    lp.call_later(0.001, called.append, 2)
    lp.close()
    assert called == []
    assert lp.is_closed()


def test_running_loop_reset_after_run(loop):
    """After run_until_complete returns there is no running loop in this thread."""
    loop.run_until_complete(asyncio.sleep(0))
    assert asyncio._get_running_loop() is None


def test_loop_repr(loop):
    """repr(loop) shows running/closed/debug state like asyncio's."""
    r = repr(loop)
    assert "running=False" in r and "closed=False" in r and "debug=False" in r
    loop.close()
    assert "closed=True" in repr(loop)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.main_interpreter("fork")
def test_new_loop_in_forked_child(loop_factory):
    """A child forked from a process with a loop can create and run its own new loop."""
    parent_loop = loop_factory()
    try:
        parent_loop.run_until_complete(asyncio.sleep(0))
        pid = os.fork()
        if pid == 0:  # child
            code = 1
            try:
                child = loop_factory()
                try:
                    if child.run_until_complete(asyncio.sleep(0.001, "ok")) == "ok":
                        code = 0
                finally:
                    child.close()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        parent_loop.close()
