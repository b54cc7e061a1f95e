"""Wrong arguments and calls on a closed loop: asyncio's exception types and messages."""

import asyncio
import contextvars
import concurrent.futures
import functools
import signal
import socket
import sys

import pytest

CLOSED = r"^Event loop is closed$"


async def _coro():
    pass


@pytest.fixture
def closed_loop(loop):
    loop.close()
    return loop


@pytest.mark.parametrize("call", [
    pytest.param(lambda lp: lp.call_soon(print), id="call_soon"),
    pytest.param(lambda lp: lp.call_later(1, print), id="call_later"),
    pytest.param(lambda lp: lp.call_at(1, print), id="call_at"),
    pytest.param(lambda lp: lp.call_soon_threadsafe(print), id="call_soon_threadsafe"),
    pytest.param(lambda lp: lp.run_forever(), id="run_forever"),
    pytest.param(lambda lp: lp.run_in_executor(None, print), id="run_in_executor"),
])
def test_closed_loop_methods_raise(closed_loop, call):
    """Scheduling or running on a closed loop -> RuntimeError('Event loop is closed')."""
    with pytest.raises(RuntimeError, match=CLOSED):
        call(closed_loop)


def test_closed_loop_run_until_complete_raises(closed_loop):
    """run_until_complete(future or coro) on a closed loop -> RuntimeError('Event loop is closed')."""
    fut = asyncio.Future(loop=closed_loop)
    with pytest.raises(RuntimeError, match=CLOSED):
        closed_loop.run_until_complete(fut)
    coro = _coro()
    try:
        with pytest.raises(RuntimeError, match=CLOSED):
            closed_loop.run_until_complete(coro)
    finally:
        coro.close()


def test_closed_loop_create_task_raises(closed_loop):
    """create_task on a closed loop -> RuntimeError('Event loop is closed')."""
    coro = _coro()
    try:
        with pytest.raises(RuntimeError, match=CLOSED):
            closed_loop.create_task(coro)
    finally:
        coro.close()


def test_closed_loop_add_reader_writer_raise(closed_loop):
    """add_reader/add_writer on a closed loop -> RuntimeError('Event loop is closed')."""
    a, b = socket.socketpair()
    try:
        with pytest.raises(RuntimeError, match=CLOSED):
            closed_loop.add_reader(a, print)
        with pytest.raises(RuntimeError, match=CLOSED):
            closed_loop.add_writer(a, print)
    finally:
        a.close()
        b.close()


def test_closed_loop_remove_reader_writer_return_false(closed_loop):
    """remove_reader/remove_writer on a closed loop return False (no exception)."""
    a, b = socket.socketpair()
    try:
        assert closed_loop.remove_reader(a) is False
        assert closed_loop.remove_writer(a) is False
    finally:
        a.close()
        b.close()


def test_close_with_registered_fds(loop):
    """close() with readers/writers still registered is fine; removing afterwards returns False."""
    a, b = socket.socketpair()
    try:
        loop.add_reader(a, print)
        loop.add_writer(b, print)
        loop.close()
        assert loop.remove_reader(a) is False
        assert loop.remove_writer(b) is False
    finally:
        a.close()
        b.close()


def test_closed_loop_harmless_methods(closed_loop):
    """stop(), time(), is_closed(), get_debug() still work on a closed loop."""
    closed_loop.stop()
    assert isinstance(closed_loop.time(), float)
    assert closed_loop.is_closed() is True
    assert closed_loop.is_running() is False
    closed_loop.get_debug()
    assert closed_loop.remove_signal_handler(signal.SIGUSR1) is False


def test_closed_loop_check_precedes_running_check(loop):
    """A closed loop reports 'closed' even when another loop is running."""
    outer = asyncio.SelectorEventLoop()
    loop.close()
    errors = []

    def cb():
        fut = outer.create_future()
        try:
            loop.run_until_complete(fut)
        except RuntimeError as exc:
            errors.append(str(exc))
        fut.cancel()

    try:
        outer.call_soon(cb)
        outer.call_soon(outer.stop)
        outer.run_forever()
    finally:
        outer.close()
    assert errors == ["Event loop is closed"]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the explicit None check is new in Python 3.11")
def test_call_later_none_delay(loop):
    """call_later(None, ...) -> TypeError('delay must not be None')."""
    with pytest.raises(TypeError, match=r"^delay must not be None$"):
        loop.call_later(None, print)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the explicit None check is new in Python 3.11")
def test_call_at_none_when(loop):
    """call_at(None, ...) -> TypeError('when cannot be None')."""
    with pytest.raises(TypeError, match=r"^when cannot be None$"):
        loop.call_at(None, print)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the explicit None check is new in Python 3.11")
def test_call_later_none_checked_before_closed(closed_loop):
    """On a closed loop, call_later(None) still reports the None (checked first)."""
    with pytest.raises(TypeError, match=r"^delay must not be None$"):
        closed_loop.call_later(None, print)
    with pytest.raises(TypeError, match=r"^when cannot be None$"):
        closed_loop.call_at(None, print)


def test_call_later_non_number_delay(loop):
    """call_later('1', ...) -> TypeError."""
    with pytest.raises(TypeError):
        loop.call_later("1", print)


@pytest.mark.parametrize("method", ["call_soon", "call_soon_threadsafe"])
def test_keyword_arguments_rejected(loop, method):
    """call_soon(cb, x=1): only context= is accepted -> TypeError."""
    with pytest.raises(TypeError, match="unexpected keyword argument 'x'"):
        getattr(loop, method)(print, x=1)


def test_call_soon_without_callback(loop):
    """call_soon() with no callback -> TypeError."""
    with pytest.raises(TypeError):
        loop.call_soon()


def test_call_soon_callback_by_keyword(loop):
    """callback= is a keyword too, as in asyncio's signature; given twice,
    or with context= only, it is a TypeError only when it is missing."""
    ran = []
    loop.call_soon(callback=lambda: ran.append('kw'))
    loop.call_soon(context=contextvars.copy_context(), callback=lambda: ran.append('ctx'))
    with pytest.raises(TypeError):
        loop.call_soon(print, callback=print)
    with pytest.raises(TypeError):
        loop.call_soon(context=contextvars.copy_context())
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert ran == ['kw', 'ctx']


@pytest.mark.parametrize("nargs", [0, 1, 2, 3, 5])
def test_call_soon_passes_every_argument_in_order(loop, nargs):
    got = []
    args = tuple(object() for _ in range(nargs))
    handle = loop.call_soon(lambda *a: got.append(a), *args)
    assert handle._args == args
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert got == [args] and all(a is b for a, b in zip(got[0], args))


def test_call_soon_through_a_subclass_and_unbound(loop_factory):
    """A subclass's super().call_soon() reaches the loop's own, which also
    works called unbound on the class."""
    probe = loop_factory()
    base = type(probe)
    probe.close()

    class Counting(base):
        calls = 0

        def call_soon(self, callback, *args, context=None):
            Counting.calls += 1
            return super().call_soon(callback, *args, context=context)

    lp = Counting()
    try:
        ran = []
        lp.call_soon(ran.append, 1)
        lp.run_until_complete(asyncio.sleep(0))
        assert ran == [1] and Counting.calls >= 1
        assert isinstance(base.call_soon(lp, print), asyncio.Handle)
    finally:
        lp.close()


# (the name in asyncio's debug-mode message, how to schedule a callback)
SCHEDULERS = [
    ("call_soon", lambda lp, cb: lp.call_soon(cb)),
    ("call_soon_threadsafe", lambda lp, cb: lp.call_soon_threadsafe(cb)),
    # call_later delegates to call_at, and asyncio's message says so.
    ("call_at", lambda lp, cb: lp.call_later(1, cb)),
    ("call_at", lambda lp, cb: lp.call_at(1, cb)),
    ("run_in_executor", lambda lp, cb: lp.run_in_executor(None, cb)),
]
SCHEDULER_IDS = ["call_soon", "call_soon_threadsafe", "call_later", "call_at", "run_in_executor"]


@pytest.mark.parametrize("method,prefix", SCHEDULERS, ids=SCHEDULER_IDS)
def test_debug_non_callable_rejected(loop, method, prefix):
    """Debug mode: a non-callable callback -> TypeError naming the method."""
    loop.set_debug(True)
    for bad in (1, None):
        with pytest.raises(TypeError) as ei:
            prefix(loop, bad)
        assert str(ei.value) == f"a callable object was expected by {method}(), got {bad!r}"


@pytest.mark.parametrize("method,call", SCHEDULERS, ids=SCHEDULER_IDS)
def test_debug_coroutine_rejected(loop, method, call):
    """Debug mode: a coroutine function or object as callback -> TypeError naming the method."""
    loop.set_debug(True)
    msg = f"coroutines cannot be used with {method}()"
    with pytest.raises(TypeError) as ei:
        call(loop, _coro)
    assert str(ei.value) == msg
    c = _coro()
    try:
        with pytest.raises(TypeError) as ei:
            call(loop, c)
        assert str(ei.value) == msg
    finally:
        c.close()
    with pytest.raises(TypeError) as ei:
        call(loop, functools.partial(_coro))
    assert str(ei.value) == msg


def test_debug_callable_object_accepted(loop, run_briefly):
    """Debug mode accepts any callable: objects with __call__, partials, builtins."""
    loop.set_debug(True)
    got = []

    class C:
        def __call__(self):
            got.append("obj")

    loop.call_soon(C())
    loop.call_soon(functools.partial(got.append, "partial"))
    loop.call_soon(got.append, "builtin")
    run_briefly(loop)
    assert got == ["obj", "partial", "builtin"]


def test_run_until_complete_rejects_non_awaitable(loop):
    """run_until_complete(1) -> TypeError with asyncio's message."""
    with pytest.raises(TypeError) as ei:
        loop.run_until_complete(1)
    assert str(ei.value) == "An asyncio.Future, a coroutine or an awaitable is required"


def test_run_until_complete_future_of_other_loop(loop):
    """run_until_complete(future of another loop) -> ValueError."""
    other = asyncio.SelectorEventLoop()
    try:
        fut = other.create_future()
        with pytest.raises(ValueError) as ei:
            loop.run_until_complete(fut)
        assert str(ei.value) == ("The future belongs to a different loop than the "
                                 "one specified as the loop argument")
    finally:
        other.close()


def test_create_task_rejects_non_coroutine(loop):
    """create_task(1) -> TypeError('a coroutine was expected, got 1')."""
    with pytest.raises(TypeError, match=r"^a coroutine was expected, got 1$"):
        loop.create_task(1)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10 only warns (DeprecationWarning) for a non-ThreadPoolExecutor")
def test_set_default_executor_type_error(loop):
    """set_default_executor(non-ThreadPoolExecutor) -> TypeError."""
    with pytest.raises(TypeError, match=r"^executor must be ThreadPoolExecutor instance$"):
        loop.set_default_executor(concurrent.futures.Future())


def test_set_exception_handler_type_error(loop):
    """set_exception_handler('x') -> TypeError naming the bad value."""
    with pytest.raises(TypeError) as ei:
        loop.set_exception_handler("x")
    assert str(ei.value) == "A callable object or None is expected, got 'x'"


def test_set_task_factory_type_error(loop):
    """set_task_factory(object()) -> TypeError."""
    with pytest.raises(TypeError, match=r"^task factory must be a callable or None$"):
        loop.set_task_factory(object())
