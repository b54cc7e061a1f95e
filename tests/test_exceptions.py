"""Exceptions in callbacks: the exception handler, logging, SystemExit/KeyboardInterrupt."""

import asyncio
import logging
import re
import time
from asyncio import format_helpers

import pytest


@pytest.fixture
def handled(loop):
    """Install a recording exception handler; yields the list of (loop, context)."""
    calls = []
    loop.set_exception_handler(lambda lp, ctx: calls.append((lp, ctx)))
    return calls


def test_callback_exception_goes_to_handler(loop, handled, run_briefly):
    """An Exception in call_soon's callback reaches the handler with asyncio's keys."""
    exc = ValueError("boom")

    def bad(x):
        raise exc

    h = loop.call_soon(bad, 1)
    run_briefly(loop)
    assert len(handled) == 1
    lp, ctx = handled[0]
    assert lp is loop
    assert ctx["message"] == ("Exception in callback "
                              + format_helpers._format_callback_source(bad, (1,)))
    assert ctx["exception"] is exc
    assert ctx["handle"] is h
    assert set(ctx) == {"message", "exception", "handle"}


def test_timer_callback_exception_goes_to_handler(loop, handled, run_for):
    """An exception in a timer callback reports the TimerHandle as 'handle'."""
    def bad():
        raise KeyError("t")

    h = loop.call_later(0.001, bad)
    run_for(loop, 0.02)
    assert len(handled) == 1
    ctx = handled[0][1]
    assert ctx["handle"] is h
    assert isinstance(ctx["exception"], KeyError)
    assert ctx["message"].startswith("Exception in callback ")


def test_loop_continues_after_callback_exception(loop, handled, run_briefly):
    """After a failing callback, the rest of the batch and later iterations run."""
    order = []

    def bad():
        raise RuntimeError("x")

    loop.call_soon(order.append, 1)
    loop.call_soon(bad)
    loop.call_soon(order.append, 2)
    run_briefly(loop)
    assert order == [1, 2]
    assert len(handled) == 1


def test_non_exception_base_exception_goes_to_handler(loop, handled, run_briefly):
    """A BaseException other than SystemExit/KeyboardInterrupt goes to the handler too."""
    class MyBase(BaseException):
        pass

    def bad():
        raise MyBase()

    loop.call_soon(bad)
    run_briefly(loop)
    assert len(handled) == 1
    assert isinstance(handled[0][1]["exception"], MyBase)


def test_get_set_exception_handler(loop):
    """get_exception_handler returns the installed handler, or None for the default."""
    assert loop.get_exception_handler() is None

    def handler(lp, ctx):
        pass

    loop.set_exception_handler(handler)
    assert loop.get_exception_handler() is handler
    loop.set_exception_handler(None)
    assert loop.get_exception_handler() is None


def test_set_exception_handler_rejects_non_callable(loop):
    """set_exception_handler(non-callable) -> TypeError with asyncio's message."""
    with pytest.raises(TypeError) as ei:
        loop.set_exception_handler(1)
    assert str(ei.value) == "A callable object or None is expected, got 1"
    assert loop.get_exception_handler() is None


def test_call_exception_handler_direct(loop, handled):
    """call_exception_handler passes the context dict to the handler unchanged."""
    ctx = {"message": "custom", "extra": 1}
    loop.call_exception_handler(ctx)
    assert handled == [(loop, ctx)]


def test_default_handler_logs_to_asyncio_logger(loop, caplog, run_briefly):
    """Without a handler, callback errors are logged at ERROR on the 'asyncio' logger."""
    def bad():
        raise ZeroDivisionError("logged")

    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        loop.call_soon(bad)
        run_briefly(loop)
    records = [r for r in caplog.records if r.name == "asyncio"]
    assert len(records) == 1
    rec = records[0]
    assert rec.levelno == logging.ERROR
    assert rec.getMessage().startswith("Exception in callback ")
    assert "handle: <" in rec.getMessage()
    assert rec.exc_info and rec.exc_info[0] is ZeroDivisionError


def test_default_exception_handler_message_format(loop, caplog):
    """default_exception_handler logs message then sorted 'key: repr(value)' lines."""
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        loop.default_exception_handler({"message": "Hello", "zeta": 1, "alpha": "a"})
    msgs = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert msgs == ["Hello\nalpha: 'a'\nzeta: 1"]


def test_default_exception_handler_without_message(loop, caplog):
    """A context without 'message' is logged as 'Unhandled exception in event loop'."""
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        loop.call_exception_handler({"exception": ValueError("v")})
    recs = [r for r in caplog.records if r.name == "asyncio"]
    assert len(recs) == 1
    assert recs[0].getMessage() == "Unhandled exception in event loop"
    assert recs[0].exc_info[0] is ValueError


def test_custom_handler_can_delegate_to_default(loop, caplog, run_briefly):
    """A custom handler may call loop.default_exception_handler(context)."""
    seen = []

    def handler(lp, ctx):
        seen.append(ctx["message"])
        lp.default_exception_handler(ctx)

    loop.set_exception_handler(handler)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        loop.call_soon(lambda: 1 / 0)
        run_briefly(loop)
    assert len(seen) == 1
    assert any(r.getMessage().startswith("Exception in callback ")
               for r in caplog.records if r.name == "asyncio")


def test_failing_handler_falls_back_to_default(loop, caplog, run_briefly):
    """If the custom handler raises, the default handler logs 'Unhandled error in exception handler'."""
    def handler(lp, ctx):
        raise RuntimeError("handler broke")

    loop.set_exception_handler(handler)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        loop.call_soon(lambda: 1 / 0)
        run_briefly(loop)
    msgs = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert len(msgs) == 1
    assert msgs[0].startswith("Unhandled error in exception handler")
    assert "context: {" in msgs[0]


def test_subclass_overriding_default_handler_is_used(loop_kind, loop_factory):
    """A loop subclass may override default_exception_handler; errors are routed there."""
    tmp = loop_factory()
    base = type(tmp)
    tmp.close()

    seen = []

    class Sub(base):
        def default_exception_handler(self, context):
            seen.append(context["message"])

    try:
        lp = Sub()
    except TypeError:
        pytest.skip(f"{loop_kind} loop class cannot be instantiated directly")
    try:
        lp.call_soon(lambda: 1 / 0)
        lp.call_soon(lp.stop)
        lp.run_forever()
    finally:
        lp.close()
    assert len(seen) == 1 and seen[0].startswith("Exception in callback ")


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_system_exit_and_keyboard_interrupt_propagate_from_run_forever(loop, handled, exc_type):
    """SystemExit/KeyboardInterrupt in a callback leave run_forever; the loop stays usable.

    The callbacks after it in the same batch are not lost: they run on the
    next run_forever, as in asyncio.
    """
    order = []

    def bad():
        raise exc_type()

    loop.call_soon(order.append, 1)
    loop.call_soon(bad)
    loop.call_soon(order.append, 2)
    with pytest.raises(exc_type):
        loop.run_forever()
    assert handled == []
    assert order == [1]
    assert not loop.is_running()
    assert loop.is_closed() is False
    with pytest.raises(RuntimeError, match="no running event loop"):
        asyncio.get_running_loop()
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert order == [1, 2]
    assert loop.run_until_complete(asyncio.sleep(0, "usable")) == "usable"


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_system_exit_and_keyboard_interrupt_propagate_from_run_until_complete(
        loop, handled, exc_type):
    """SystemExit/KeyboardInterrupt in a callback leave run_until_complete; the future stays pending."""
    fut = loop.create_future()

    def bad():
        raise exc_type()

    loop.call_soon(bad)
    with pytest.raises(exc_type):
        loop.run_until_complete(fut)
    assert not fut.done()
    assert handled == []
    loop.call_soon(fut.set_result, "later")
    assert loop.run_until_complete(fut) == "later"


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_system_exit_in_coroutine_propagates(loop, exc_type):
    """SystemExit/KeyboardInterrupt raised inside a task propagate out of run_until_complete."""
    async def main():
        await asyncio.sleep(0)
        raise exc_type()

    with pytest.raises(exc_type):
        loop.run_until_complete(main())
    assert loop.run_until_complete(asyncio.sleep(0, 1)) == 1


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_system_exit_from_timer_propagates(loop, handled, exc_type):
    """SystemExit/KeyboardInterrupt from a timer callback propagate too."""
    def bad():
        raise exc_type()

    loop.call_later(0.001, bad)
    with pytest.raises(exc_type):
        loop.run_forever()
    assert handled == []


def test_keyboard_interrupt_from_exception_handler_propagates(loop, run_briefly):
    """A KeyboardInterrupt raised by the exception handler itself propagates."""
    def handler(lp, ctx):
        raise KeyboardInterrupt

    loop.set_exception_handler(handler)
    loop.call_soon(lambda: 1 / 0)
    with pytest.raises(KeyboardInterrupt):
        run_briefly(loop)


def test_debug_slow_callback_warning(loop, caplog):
    """In debug mode a callback slower than slow_callback_duration is logged as a warning."""
    loop.set_debug(True)
    loop.slow_callback_duration = 0.01

    def slow():
        time.sleep(0.03)

    def fast():
        pass

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        loop.call_soon(slow)
        loop.call_soon(fast)
        loop.call_soon(loop.stop)
        loop.run_forever()
    msgs = [r.getMessage() for r in caplog.records
            if r.name == "asyncio" and r.levelno == logging.WARNING]
    assert len(msgs) == 1, msgs
    assert re.fullmatch(r"Executing <.*slow.*> took \d+\.\d{3} seconds", msgs[0], re.S), msgs[0]
    took = float(re.search(r"took (\d+\.\d{3}) seconds", msgs[0]).group(1))
    assert took >= 0.029


def test_no_slow_callback_warning_without_debug(loop, caplog):
    """Without debug mode, slow callbacks are not reported."""
    loop.slow_callback_duration = 0.001
    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        loop.call_soon(time.sleep, 0.01)
        loop.call_soon(loop.stop)
        loop.run_forever()
    assert not [r for r in caplog.records
                if r.name == "asyncio" and "Executing" in r.getMessage()]


def test_slow_callback_duration_default(loop):
    """slow_callback_duration defaults to 0.1 seconds and is writable."""
    assert loop.slow_callback_duration == 0.1
    loop.slow_callback_duration = 0.5
    assert loop.slow_callback_duration == 0.5


def test_debug_exception_context_has_source_traceback(loop, handled, run_briefly):
    """In debug mode the context also carries 'source_traceback' (where the handle was created)."""
    loop.set_debug(True)

    def bad():
        raise ValueError

    loop.call_soon(bad)
    run_briefly(loop)
    assert len(handled) == 1
    ctx = handled[0][1]
    assert "source_traceback" in ctx
    # The last frame is this test's call_soon line.
    assert ctx["source_traceback"][-1].name == "test_debug_exception_context_has_source_traceback"


def test_keyboard_interrupt_in_own_task_is_not_reported_later(loop, handled):
    """run_until_complete(coro) raising KeyboardInterrupt consumes the task's exception.

    No 'Task exception was never retrieved' reaches the handler once the
    task is collected.
    """
    import gc

    async def main():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        loop.run_until_complete(main())
    gc.collect()
    assert handled == []


def test_callback_in_an_already_entered_context_is_reported(loop, caplog):
    """A handle whose context is already entered (the loop runs inside that
    very context) cannot enter it: asyncio reports that through the exception
    handler and goes on; it must not escape run_forever."""
    import contextvars
    import sys

    ctx = contextvars.copy_context()
    reported = []
    ran = []
    loop.set_exception_handler(lambda lp, context: reported.append(context))
    loop.call_soon(ran.append, 'bad', context=ctx)
    loop.call_soon(ran.append, 'next')
    loop.call_soon(loop.stop)
    ctx.run(loop.run_forever)
    assert ran == ['next']
    if sys.version_info >= (3, 12):
        # 3.12 runs the custom handler in the handle's context, which cannot
        # be entered either: asyncio logs both errors instead.
        assert reported == []
        assert 'Unhandled error in exception handler' in caplog.text
        assert 'is already entered' in caplog.text
    else:
        assert len(reported) == 1
        assert isinstance(reported[0]['exception'], RuntimeError)
        assert reported[0]['message'].startswith('Exception in callback')


def test_non_context_rejected_at_call_minloop_is_stricter(loop, loop_kind):
    """minloop is stricter: a context= that is not a contextvars.Context is a
    TypeError at the call (asyncio fails later, when the callback is due)."""
    if loop_kind != "minloop":
        pytest.skip("asyncio does not make this promise; minloop is stricter")
    with pytest.raises(TypeError, match='contextvars.Context'):
        loop.call_soon(print, context={'not': 'a context'})
    with pytest.raises(TypeError, match='contextvars.Context'):
        loop.call_later(1, print, context=42)


def test_handler_runs_with_the_callback_exception_being_handled(loop, run_briefly):
    """asyncio calls the exception handler from its except clause: inside the
    handler sys.exc_info() is the callback's exception (logging.exception()
    and a bare `raise` rely on it); after it, nothing is being handled."""
    import sys

    exc = ValueError("boom")
    seen = []

    def handler(lp, context):
        seen.append(sys.exc_info()[1])

    def bad(a, b, c):  # three arguments: the handle keeps them in a tuple
        raise exc

    def after():
        seen.append(sys.exc_info())

    loop.set_exception_handler(handler)
    loop.call_soon(bad, 1, 2, 3)
    loop.call_soon(lambda: (_ for _ in ()).throw(exc))  # no arguments
    loop.call_soon(after)
    run_briefly(loop)
    assert seen == [exc, exc, (None, None, None)]


@pytest.mark.parametrize("nargs", [0, 1, 2, 3])
def test_failed_callback_leaves_its_context(loop, handled, run_briefly, nargs):
    """A callback that raised has left its context when the next one runs:
    its var.set() is not seen outside, and the same context can be run
    again (entering an entered context would be a RuntimeError)."""
    import contextvars

    var = contextvars.ContextVar("var", default="outside")
    ctx = contextvars.copy_context()
    seen = []

    def bad(*args):
        var.set("inside")
        raise ValueError(len(args))

    def look():
        seen.append(var.get())

    loop.call_soon(bad, *range(nargs), context=ctx)
    loop.call_soon(look)
    loop.call_soon(look, context=ctx)
    run_briefly(loop)
    assert [str(c["exception"]) for _, c in handled] == [str(nargs)]
    assert seen == ["outside", "inside"]


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_system_exit_leaves_the_callbacks_context(loop, exc_type):
    """SystemExit/KeyboardInterrupt leave run_forever after the callback's
    context was left: running that context again works."""
    import contextvars

    ctx = contextvars.copy_context()

    def bad():
        raise exc_type()

    loop.call_soon(bad, context=ctx)
    with pytest.raises(exc_type):
        loop.run_forever()
    assert ctx.run(lambda: "entered again") == "entered again"
