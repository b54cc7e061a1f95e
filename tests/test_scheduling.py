"""call_soon, the ready queue, stop(), run_forever/run_until_complete, close()."""

import asyncio
import contextvars
import sys

import pytest

var = contextvars.ContextVar("var", default="unset")


def test_call_soon_runs_in_fifo_order(loop):
    """Callbacks scheduled with call_soon run in the order they were scheduled."""
    order = []
    for i in range(1000):
        loop.call_soon(order.append, i)
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert order == list(range(1000))


def test_call_soon_passes_positional_args(loop, run_briefly):
    """Positional arguments after the callback are passed to it unchanged."""
    got = []
    marker = object()
    loop.call_soon(lambda *a: got.append(a), 1, "two", None, marker)
    loop.call_soon(lambda: got.append(()))
    run_briefly(loop)
    assert got == [(1, "two", None, marker), ()]


def test_call_soon_returns_handle_like_object(loop, run_briefly):
    """call_soon returns an object with cancel() and cancelled()."""
    h = loop.call_soon(lambda: None)
    assert callable(h.cancel) and callable(h.cancelled)
    assert h.cancelled() is False
    run_briefly(loop)
    # Running a handle does not mark it cancelled.
    assert h.cancelled() is False


def test_cancelled_handle_does_not_run(loop, run_briefly):
    """handle.cancel() before the loop reaches it means the callback never runs."""
    called = []
    h = loop.call_soon(called.append, 1)
    loop.call_soon(called.append, 2)
    h.cancel()
    assert h.cancelled() is True
    h.cancel()  # idempotent
    assert h.cancelled() is True
    run_briefly(loop)
    assert called == [2]


def test_handle_cancelled_by_earlier_callback_in_same_batch_is_skipped(loop, run_briefly):
    """A ready handle cancelled by a callback earlier in the same batch is skipped."""
    called = []
    later = None

    def first():
        called.append("first")
        later.cancel()

    loop.call_soon(first)
    later = loop.call_soon(called.append, "later")
    run_briefly(loop)
    assert called == ["first"]


def test_call_soon_context_kwarg_is_used(loop, run_briefly):
    """context= runs the callback inside that Context (contextvars visible)."""
    ctx = contextvars.copy_context()
    ctx.run(var.set, "in-ctx")
    seen = []
    loop.call_soon(lambda: seen.append(var.get()), context=ctx)
    run_briefly(loop)
    assert seen == ["in-ctx"]
    assert var.get() == "unset"


def test_callback_changes_to_context_stay_in_that_context(loop, run_briefly):
    """A ContextVar set by a callback lands in the handle's context, not the caller's."""
    ctx = contextvars.copy_context()
    loop.call_soon(var.set, "changed", context=ctx)
    run_briefly(loop)
    assert ctx[var] == "changed"
    assert var.get() == "unset"


def _fresh_str(text):
    """An equal str that is a new object, not the interned one (asyncio's C
    Task passes such a "context" keyword name to call_soon)."""
    fresh = "".join([text[:1], text[1:]])
    assert fresh == text and fresh is not sys.intern(text)
    return fresh


def test_call_soon_context_keyword_of_any_identity(loop, run_briefly):
    """context= is taken whatever object spells the keyword name: the
    interned "context", a new equal string (the same one again, and another
    one), a str subclass."""
    class Name(str):
        pass

    first, second = _fresh_str("context"), _fresh_str("context")
    names = [first, first, second, "context", Name("context"), first]
    seen = []
    for i, name in enumerate(names):
        ctx = contextvars.copy_context()
        ctx.run(var.set, f"ctx{i}")
        loop.call_soon(lambda i=i: seen.append((i, var.get())), **{name: ctx})
    run_briefly(loop)
    assert seen == [(i, f"ctx{i}") for i in range(len(names))]
    assert var.get() == "unset"


def test_call_soon_callback_by_keyword_and_through_partial(loop, run_briefly):
    """callback= works as a keyword (asyncio's is an ordinary parameter),
    and functools.partial's keywords reach call_soon."""
    import functools
    ctx = contextvars.copy_context()
    ctx.run(var.set, "partial")
    seen = []
    loop.call_soon(callback=lambda: seen.append("kw"))
    functools.partial(loop.call_soon, context=ctx)(lambda a: seen.append((a, var.get())), 1)
    functools.partial(loop.call_soon, lambda: seen.append("bare"))()
    run_briefly(loop)
    assert seen == ["kw", (1, "partial"), "bare"]


@pytest.mark.parametrize("args, kwargs, words", [
    ((), {}, ()),
    ((), {"context": None}, ()),
    ((print,), {"x": 1}, ("unexpected keyword argument 'x'",)),
    ((print,), {_fresh_str("contexy"): 1}, ("unexpected keyword argument 'contexy'",)),
    ((print,), {"context": None, "y": 1}, ("unexpected keyword argument 'y'",)),
    ((print,), {"callback": print}, ("multiple values", "'callback'")),
], ids=["nothing", "only-context", "unknown", "unknown-fresh-str", "context-and-unknown",
        "callback-twice"])
def test_call_soon_rejects_bad_arguments(loop, run_briefly, args, kwargs, words):
    """Bad calls raise TypeError (the message names the offending keyword)
    and schedule nothing."""
    called = []
    args = tuple(called.append if a is print else a for a in args)
    kwargs = {k: called.append if v is print else v for k, v in kwargs.items()}
    with pytest.raises(TypeError) as info:
        loop.call_soon(*args, **kwargs)
    for word in words:
        assert word in str(info.value)
    run_briefly(loop)
    assert called == []


@pytest.mark.skipif(sys.version_info < (3, 11),
                    reason="create_task(context=) is new in Python 3.11")
def test_task_and_future_callbacks_get_their_context(loop):
    """The C Task and Future pass context= to call_soon under their own
    keyword-name object: a task made with context= runs every step in it,
    and a done callback added with context= runs in that one."""
    seen = []

    async def body():
        for _ in range(3):
            seen.append(var.get())
            await asyncio.sleep(0)
        return var.get()

    async def main():
        ctx = contextvars.copy_context()
        ctx.run(var.set, "task-ctx")
        task = loop.create_task(body(), context=ctx)
        cb_ctx = contextvars.copy_context()
        cb_ctx.run(var.set, "cb-ctx")
        fut = loop.create_future()
        fut.add_done_callback(lambda f: seen.append(var.get()), context=cb_ctx)
        fut.set_result(None)
        return await task

    assert loop.run_until_complete(main()) == "task-ctx"
    assert sorted(seen) == ["cb-ctx"] + ["task-ctx"] * 3


def test_call_soon_signature(loop):
    """inspect.signature() shows asyncio's signature."""
    import inspect
    assert str(inspect.signature(loop.call_soon)) == "(callback, *args, context=None)"


def test_call_soon_on_a_subclass_of_the_loop_class(loop):
    """A loop class's subclass schedules callbacks as the class does."""
    sub = type("SubLoop", (type(loop),), {})()
    try:
        seen = []
        sub.call_soon(seen.append, 1)
        sub.call_soon(seen.append, 2, context=contextvars.copy_context())
        sub.call_soon(sub.stop)
        sub.run_forever()
        assert seen == [1, 2]
    finally:
        sub.close()


@pytest.mark.parametrize("name", ["call_soon", "call_soon_threadsafe"])
def test_call_soon_kept_bound(loop, name):
    """`call_soon = loop.call_soon`, kept and called many times (code that
    schedules in bulk does), schedules on that loop."""
    bound = getattr(loop, name)
    assert bound.__self__ is loop
    assert bound == getattr(loop, name)
    seen = []
    for i in range(3):
        bound(seen.append, i)
    bound(callback=lambda: seen.append("kw"), context=contextvars.copy_context())
    bound(loop.stop)
    loop.run_forever()
    assert seen == [0, 1, 2, "kw"]


@pytest.mark.parametrize("name", ["call_soon", "call_soon_threadsafe"])
def test_call_soon_bound_to_something_not_a_loop(loop, minloop_only, name):
    """Binding LoopCore's entry to another object raises TypeError (the
    bound method would read the object as a loop)."""
    entry = vars(type(loop).__mro__[1])[name]
    for bad in (object(), 1):
        with pytest.raises(TypeError):
            entry.__get__(bad)


def test_call_soon_unbound_checks_self(loop, minloop_only):
    """LoopCore.call_soon called on something not a loop raises TypeError
    (it read the object as a loop and crashed)."""
    cls = type(loop).__mro__[1]
    assert cls.__name__ == "LoopCore"
    for bad in (object(), None, 1):
        with pytest.raises(TypeError):
            cls.call_soon(bad, print)
    with pytest.raises(TypeError):
        cls.call_soon()


def test_call_soon_default_context_is_a_copy_of_the_current(loop, run_briefly):
    """Without context=, the callback sees a copy of the caller's context at call_soon time."""
    seen = []

    def setter():
        var.set("set-in-callback")
        seen.append(var.get())

    token = var.set("caller")
    try:
        loop.call_soon(lambda: seen.append(var.get()))
        loop.call_soon(setter)
        # Each handle got its own copy: setter's change is invisible here ...
        loop.call_soon(lambda: seen.append(var.get()))
        var.set("after-call_soon")  # ... and so is a change made after call_soon.
        run_briefly(loop)
    finally:
        var.reset(token)
    assert seen == ["caller", "set-in-callback", "caller"]


@pytest.mark.skipif(sys.version_info < (3, 12),
                    reason="asyncio.Handle.get_context() is new in Python 3.12")
def test_handle_get_context(loop):
    """handle.get_context() returns the context= Context, or the copy it made."""
    ctx = contextvars.copy_context()
    h = loop.call_soon(lambda: None, context=ctx)
    assert h.get_context() is ctx
    t = loop.call_later(10, lambda: None, context=ctx)
    assert t.get_context() is ctx
    t.cancel()
    h2 = loop.call_soon(lambda: None)
    assert isinstance(h2.get_context(), contextvars.Context)
    assert h2.get_context() is not ctx


def test_minloop_handle_get_context_on_every_python(loop, minloop_only):
    """minloop's Handle has get_context() on every Python, even < 3.12
    (minloop/handles.pyi; asyncio's has it from 3.12)."""
    ctx = contextvars.copy_context()
    h = loop.call_soon(lambda: None, context=ctx)
    assert h.get_context() is ctx


def test_callbacks_scheduled_by_callbacks_run_next_iteration(loop):
    """ntodo rule: a batch runs only the handles ready when it started.

    'a' schedules 'b'; 'c' (already queued) calls stop().  stop takes effect at
    the end of the batch [a, c], so 'b' has not run when run_forever returns,
    and runs first thing on the next run_forever.
    """
    order = []

    def a():
        order.append("a")
        loop.call_soon(order.append, "b")

    def c():
        order.append("c")
        loop.stop()

    loop.call_soon(a)
    loop.call_soon(c)
    loop.run_forever()
    assert order == ["a", "c"]
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert order == ["a", "c", "b"]


def test_each_link_of_a_callback_chain_takes_one_iteration(loop, socketpair):
    """Without stop(): I/O is polled between batches, so it interleaves with a chain.

    'a' makes a socket readable and schedules 'b'; 'b' schedules 'c'.  Each
    iteration polls, then runs the batch that was ready when it started:
    iteration 1 runs [a]; iteration 2 polls (reader queued) and runs
    [b, reader]; iteration 3 runs [c].  A loop that drained the ready queue
    in one go would give a, b, c, reader; one that polled after the
    callbacks carried into an iteration (uvloop; zuvloop for a transport's
    data_received()) a, reader, b, c.
    """
    r, w = socketpair
    order = []

    def a():
        order.append("a")
        w.send(b"x")
        loop.call_soon(b)

    def b():
        order.append("b")
        loop.call_soon(c)

    def c():
        order.append("c")

    def reader():
        order.append("reader")
        r.recv(10)

    loop.add_reader(r, reader)
    loop.call_soon(a)
    loop.call_later(0.05, loop.stop)
    loop.run_forever()
    loop.remove_reader(r)
    assert order == ["a", "b", "reader", "c"]


def test_data_waiting_before_an_iteration_is_read_after_its_carried_callbacks(
        loop, socketpair):
    """What was readable before an iteration began is read in it after the
    callbacks carried into it, and before those they schedule."""
    r, w = socketpair
    order = []

    def carried():
        order.append("carried")
        loop.call_soon(order.append, "scheduled")

    def reader():
        order.append("reader")
        r.recv(10)

    w.send(b"x")
    loop.add_reader(r, reader)
    loop.call_soon(carried)
    loop.call_later(0.05, loop.stop)
    loop.run_forever()
    loop.remove_reader(r)
    assert order == ["carried", "reader", "scheduled"]


def test_an_iteration_with_callbacks_to_run_does_not_block(loop):
    """_run_once() with a callback queued returns without waiting, though it
    polls and nothing is registered, due or queued after the callback runs:
    a program stepping the loop relies on it."""
    ran = []
    loop.call_soon(ran.append, 1)
    loop.call_later(3600, ran.append, "never")
    loop._run_once()
    assert ran == [1]


def test_a_batch_cut_short_by_an_exception_runs_its_rest_on_the_next_run(
        loop, socketpair):
    """The poll's handles and the due timers after the callback that raised
    (SystemExit and KeyboardInterrupt leave run_forever()) are still queued:
    the next run runs them, once, in their order."""
    r, w = socketpair
    order = []

    def carried():
        order.append("carried")
        raise SystemExit

    def reader():
        order.append("reader")
        # asyncio polls again before it runs: the fd is reported twice.
        loop.remove_reader(r)

    w.send(b"x")
    loop.add_reader(r, reader)
    loop.call_soon(carried)
    loop.call_at(loop.time() - 1, order.append, "timer")
    with pytest.raises(SystemExit):
        loop.run_forever()
    loop.call_soon(loop.stop)
    loop.run_forever()
    loop.remove_reader(r)
    assert order == ["carried", "reader", "timer"]


def test_the_handles_after_one_that_raised_run_on_the_next_run(loop, socketpair):
    """The same for an exception out of a poll's handler: the due timer
    queued behind it runs on the next run, not before and not twice."""
    r, w = socketpair
    order = []

    def reader():
        order.append("reader")
        r.recv(10)
        raise SystemExit

    w.send(b"x")
    loop.add_reader(r, reader)
    loop.call_at(loop.time() - 1, order.append, "timer")
    with pytest.raises(SystemExit):
        loop.run_forever()
    assert order == ["reader"]
    loop.call_soon(loop.stop)
    loop.run_forever()
    loop.remove_reader(r)
    assert order == ["reader", "timer"]


def test_stop_inside_callback_lets_the_rest_of_the_batch_run(loop):
    """stop() only informs run_forever to stop after the current batch."""
    order = []
    loop.call_soon(order.append, 1)
    loop.call_soon(loop.stop)
    loop.call_soon(order.append, 2)
    loop.call_soon(order.append, 3)
    loop.run_forever()
    assert order == [1, 2, 3]


def test_self_rescheduling_callback_runs_once_per_iteration(loop):
    """A callback that re-schedules itself runs exactly once per iteration."""
    count = [0]

    def tick():
        count[0] += 1
        loop.call_soon(tick)

    loop.call_soon(tick)
    loop.stop()
    loop.run_forever()
    assert count[0] == 1
    for expected in (2, 3, 4):
        loop.stop()
        loop.run_forever()
        assert count[0] == expected


def test_stop_before_run_forever_runs_one_iteration(loop):
    """stop() before run_forever: run_forever runs one iteration and returns."""
    order = []

    def first():
        order.append(1)
        loop.call_soon(order.append, 2)

    loop.call_soon(first)
    loop.stop()
    loop.run_forever()
    assert order == [1]
    assert not loop.is_running()
    # The stop request was consumed: the next run_forever runs until told.
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert order == [1, 2]


def test_stop_with_nothing_scheduled_returns(loop):
    """stop() then run_forever on an idle loop returns without blocking."""
    loop.stop()
    t0 = loop.time()
    loop.run_forever()
    assert loop.time() - t0 < 1.0


def test_stop_called_twice_only_stops_once(loop):
    """Two stop() calls in one iteration do not leak into the next run_forever."""
    order = []
    loop.call_soon(loop.stop)
    loop.call_soon(loop.stop)
    loop.run_forever()
    loop.call_soon(order.append, "x")
    loop.call_later(0.01, order.append, "timer")
    loop.call_later(0.02, loop.stop)
    loop.run_forever()
    assert order == ["x", "timer"]


def test_run_forever_from_timer_stop(loop):
    """run_forever blocks on an empty ready queue until a timer calls stop()."""
    # The deadline counts from the call: read the clock before it.
    t0 = loop.time()
    loop.call_later(0.02, loop.stop)
    loop.run_forever()
    assert loop.time() - t0 >= 0.02


def test_is_running_inside_and_outside(loop):
    """is_running() is True inside a callback, False before and after."""
    seen = []
    assert loop.is_running() is False
    loop.call_soon(lambda: seen.append(loop.is_running()))
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert seen == [True]
    assert loop.is_running() is False


def test_running_loop_is_registered_during_run(loop):
    """asyncio.get_running_loop() in a callback returns this loop; none after."""
    seen = []
    loop.call_soon(lambda: seen.append(asyncio.get_running_loop()))
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert seen == [loop]
    with pytest.raises(RuntimeError, match="no running event loop"):
        asyncio.get_running_loop()


def test_run_until_complete_future(loop):
    """run_until_complete(future) returns its result once set."""
    fut = loop.create_future()
    loop.call_soon(fut.set_result, 42)
    assert loop.run_until_complete(fut) == 42


def test_run_until_complete_coroutine(loop):
    """run_until_complete(coro) wraps it in a task and returns its value."""
    async def main():
        await asyncio.sleep(0)
        return "done", asyncio.current_task() is not None
    assert loop.run_until_complete(main()) == ("done", True)


def test_run_until_complete_task(loop):
    """run_until_complete(task) returns the task's result."""
    async def main(x):
        await asyncio.sleep(0)
        return x * 2
    task = loop.create_task(main(21))
    assert loop.run_until_complete(task) == 42
    assert task.done()


def test_run_until_complete_awaitable(loop):
    """run_until_complete accepts any awaitable (an object with __await__)."""
    class Awaitable:
        def __await__(self):
            yield from asyncio.sleep(0).__await__()
            return "awaited"
    assert loop.run_until_complete(Awaitable()) == "awaited"


def test_run_until_complete_raises_coroutine_exception(loop):
    """The coroutine's exception comes out of run_until_complete unchanged."""
    class Boom(Exception):
        pass

    async def main():
        await asyncio.sleep(0)
        raise Boom("x")

    with pytest.raises(Boom, match="x"):
        loop.run_until_complete(main())
    assert not loop.is_running()


def test_run_until_complete_returns_when_done_and_leaves_rest(loop):
    """run_until_complete returns soon after the future is done; other work stays queued."""
    fut = loop.create_future()
    order = []

    def chain(n):
        order.append(n)
        loop.call_soon(chain, n + 1)

    loop.call_soon(chain, 0)
    loop.call_soon(fut.set_result, None)
    loop.run_until_complete(fut)
    # The done callback stops the loop one iteration later, so the chain
    # advanced by only a few steps, not forever.
    assert 1 <= len(order) <= 4
    n = len(order)
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert len(order) == n + 1


def test_run_until_complete_stopped_before_done(loop):
    """stop() before the future completes -> RuntimeError with asyncio's message."""
    fut = loop.create_future()
    loop.call_soon(loop.stop)
    with pytest.raises(RuntimeError) as ei:
        loop.run_until_complete(fut)
    assert str(ei.value) == "Event loop stopped before Future completed."
    assert not fut.done()
    # The loop is still usable and the future can still complete.
    loop.call_soon(fut.set_result, 7)
    assert loop.run_until_complete(fut) == 7


def test_run_until_complete_while_running_raises(loop):
    """run_until_complete inside a callback of the same loop -> 'already running'."""
    errors = []
    other = loop.create_future()

    def cb():
        try:
            loop.run_until_complete(other)
        except RuntimeError as exc:
            errors.append(str(exc))

    loop.call_soon(cb)
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert errors == ["This event loop is already running"]


def test_run_forever_while_running_raises(loop):
    """run_forever inside a callback of the same loop -> 'already running'."""
    errors = []

    def cb():
        try:
            loop.run_forever()
        except RuntimeError as exc:
            errors.append(str(exc))

    loop.call_soon(cb)
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert errors == ["This event loop is already running"]
    # The failed nested call did not unregister the running loop.
    assert not loop.is_running()


def test_nested_failure_keeps_outer_run_intact(loop, loop_kind):
    """A rejected nested run_forever leaves the outer run registered and running."""
    if loop_kind == "asyncio" and (3, 13, 0) <= sys.version_info < (3, 13, 3):
        pytest.skip("CPython bug gh-130145: a failed run_forever unregisters the "
                    "running loop (3.13.0-3.13.2)")
    seen = []

    def cb():
        with pytest.raises(RuntimeError):
            loop.run_forever()
        seen.append((loop.is_running(), asyncio.get_running_loop() is loop))

    loop.call_soon(cb)
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert seen == [(True, True)]


def test_is_closed_and_close_twice(loop):
    """is_closed() flips on close(); closing twice is a no-op."""
    assert loop.is_closed() is False
    loop.close()
    assert loop.is_closed() is True
    loop.close()
    assert loop.is_closed() is True


def test_close_while_running_raises(loop):
    """close() from inside a callback -> RuntimeError; the loop stays open."""
    errors = []

    def cb():
        try:
            loop.close()
        except RuntimeError as exc:
            errors.append(str(exc))

    loop.call_soon(cb)
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert errors == ["Cannot close a running event loop"]
    assert loop.is_closed() is False
    # Still fully usable.
    assert loop.run_until_complete(asyncio.sleep(0, "ok")) == "ok"


def test_close_drops_pending_callbacks(loop):
    """Callbacks still queued at close() never run."""
    called = []
    loop.call_soon(called.append, 1)
    loop.call_later(0, called.append, 2)
    loop.close()
    assert called == []


def test_get_debug_set_debug(loop):
    """set_debug/get_debug round-trip."""
    assert loop.get_debug() in (False, True)
    loop.set_debug(True)
    assert loop.get_debug() is True
    loop.set_debug(False)
    assert loop.get_debug() is False


def test_run_until_complete_consumes_base_exception_of_own_task(loop):
    """A BaseException (not Exception) from the wrapped coroutine propagates as is."""
    class MyBase(BaseException):
        pass

    async def main():
        raise MyBase()

    with pytest.raises(MyBase):
        loop.run_until_complete(main())
    # The loop is usable afterwards.
    assert loop.run_until_complete(asyncio.sleep(0, 1)) == 1


def test_run_until_complete_already_done_future(loop):
    """run_until_complete on an already-done future returns its result at once."""
    fut = loop.create_future()
    fut.set_result("ready")
    assert loop.run_until_complete(fut) == "ready"


def test_run_until_complete_removes_its_done_callback(loop):
    """After 'stopped before Future completed', the future finishing later does not stop the loop."""
    fut = loop.create_future()
    loop.call_soon(loop.stop)
    with pytest.raises(RuntimeError):
        loop.run_until_complete(fut)
    order = []
    loop.call_soon(fut.set_result, None)
    loop.call_later(0.01, order.append, "timer")
    loop.call_later(0.02, loop.stop)
    loop.run_forever()
    assert order == ["timer"]


def test_handle_repr(loop):
    """repr(Handle) is asyncio's: '<Handle cb(args) at file:line>', '<Handle cancelled>'."""
    from asyncio import format_helpers

    def cb(x):
        pass

    h = loop.call_soon(cb, 1)
    assert repr(h) == f"<Handle {format_helpers._format_callback_source(cb, (1,))}>"
    h.cancel()
    assert repr(h) == "<Handle cancelled>"


def test_timer_handle_repr(loop):
    """repr(TimerHandle) is asyncio's: '<TimerHandle when=W cb() at file:line>'."""
    from asyncio import format_helpers

    def cb():
        pass

    when = loop.time() + 100
    h = loop.call_at(when, cb)
    assert repr(h) == (f"<TimerHandle when={when} "
                       f"{format_helpers._format_callback_source(cb, ())}>")
    h.cancel()
    assert repr(h) == f"<TimerHandle cancelled when={when}>"


def test_debug_handle_repr_shows_creation_site(loop):
    """In debug mode repr(Handle) ends with 'created at file:line' of the call_soon."""
    import inspect
    loop.set_debug(True)
    line = inspect.currentframe().f_lineno + 1
    h = loop.call_soon(print)
    assert repr(h).endswith(f"created at {__file__}:{line}>")
    h.cancel()
    # A cancelled handle in debug mode keeps its full representation.
    assert repr(h).startswith("<Handle cancelled print() created at ")
