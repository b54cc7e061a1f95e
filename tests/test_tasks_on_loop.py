"""Futures and tasks (asyncio's own) driven by the loop: creation, factories, gather, cancel."""

import asyncio
import contextvars
import gc
import sys

import pytest

var = contextvars.ContextVar("var", default="unset")


def test_create_future_is_asyncio_future_bound_to_loop(loop):
    """create_future() returns a pending asyncio.Future whose loop is this loop."""
    fut = loop.create_future()
    assert isinstance(fut, asyncio.Future)
    assert fut.get_loop() is loop
    assert not fut.done()
    fut.cancel()


def test_create_future_in_the_running_loop_is_bound_to_it(loop):
    """Inside the running loop too, and when the running loop this thread
    has set is another one, or none, create_future()'s future is this
    loop's: asyncio's own Future, with its debug traceback when asked."""
    from asyncio import events
    other = asyncio.new_event_loop()
    seen = []

    def made(label):
        fut = loop.create_future()
        seen.append((label, type(fut), fut.get_loop() is loop,
                     bool(fut._source_traceback)))
        fut.cancel()

    async def main():
        made("running")
        events._set_running_loop(other)
        try:
            made("another running")
        finally:
            events._set_running_loop(loop)
        events._set_running_loop(None)
        try:
            made("none running")
        finally:
            events._set_running_loop(loop)
        loop.set_debug(True)
        made("debug")
        loop.set_debug(False)

    try:
        loop.run_until_complete(main())
    finally:
        other.close()
    assert seen == [("running", asyncio.Future, True, False),
                    ("another running", asyncio.Future, True, False),
                    ("none running", asyncio.Future, True, False),
                    ("debug", asyncio.Future, True, True)]


def test_create_task_in_the_running_loop_is_bound_to_it(loop):
    """Inside the running loop, and when the running loop this thread has
    set is another one, create_task()'s task is this loop's, named as
    asked, and runs there."""
    from asyncio import events
    other = asyncio.new_event_loop()
    seen = []

    async def child():
        return asyncio.get_running_loop()

    async def main():
        plain = loop.create_task(child())
        named = loop.create_task(child(), name="named")
        events._set_running_loop(other)
        try:
            away = loop.create_task(child(), name="away")
        finally:
            events._set_running_loop(loop)
        for task in (plain, named, away):
            seen.append((type(task) is asyncio.Task, task.get_loop() is loop,
                         task.get_name(), await task is loop))

    try:
        loop.run_until_complete(main())
    finally:
        other.close()
    assert [s[:2] + s[3:] for s in seen] == [(True, True, True)] * 3
    assert seen[0][2].startswith("Task-")
    assert [s[2] for s in seen[1:]] == ["named", "away"]


def test_create_future_takes_the_future_class_asyncio_has_then(loop, monkeypatch):
    """A program that puts another Future class in asyncio.futures gets it,
    with loop= as asyncio's loop passes it."""
    from asyncio import futures
    made = []

    class Mine(futures._PyFuture):
        def __init__(self, *, loop=None):
            made.append(loop)
            super().__init__(loop=loop)

    monkeypatch.setattr(futures, "Future", Mine)

    async def main():
        return loop.create_future()

    fut = loop.run_until_complete(main())
    assert type(fut) is Mine and fut.get_loop() is loop
    assert made == [loop]
    fut.cancel()


def test_future_done_callbacks_run_via_loop(loop, run_briefly):
    """Future done-callbacks are scheduled on the loop, not called synchronously."""
    fut = loop.create_future()
    seen = []
    fut.add_done_callback(lambda f: seen.append(f.result()))
    fut.set_result(5)
    assert seen == []
    run_briefly(loop)
    assert seen == [5]


def test_create_task_returns_task_with_name(loop):
    """create_task(coro, name=) returns an asyncio.Task with that name."""
    async def main():
        return asyncio.current_task().get_name()
    task = loop.create_task(main(), name="my-task")
    assert isinstance(task, asyncio.Task)
    assert task.get_loop() is loop
    assert task.get_name() == "my-task"
    assert loop.run_until_complete(task) == "my-task"


def test_create_task_default_name(loop):
    """Without name=, a task gets asyncio's default 'Task-<n>' name."""
    async def main():
        pass
    task = loop.create_task(main())
    assert task.get_name().startswith("Task-")
    loop.run_until_complete(task)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="create_task(context=) is new in Python 3.11")
def test_create_task_context_kwarg(loop):
    """create_task(coro, context=ctx) runs the coroutine inside ctx."""
    ctx = contextvars.copy_context()
    ctx.run(var.set, "task-ctx")

    async def main():
        await asyncio.sleep(0)
        before = var.get()
        var.set("changed")
        return before

    task = loop.create_task(main(), context=ctx)
    assert loop.run_until_complete(task) == "task-ctx"
    assert ctx[var] == "changed"
    assert var.get() == "unset"


def test_create_task_default_context_is_copied(loop):
    """Without context=, a task runs in a copy of the caller's context."""
    async def main():
        seen = var.get()
        var.set("inner")
        return seen

    token = var.set("outer")
    try:
        assert loop.run_until_complete(loop.create_task(main())) == "outer"
        assert var.get() == "outer"
    finally:
        var.reset(token)


def test_task_factory_set_get_and_used(loop):
    """set_task_factory installs a factory that create_task calls; get returns it."""
    calls = []

    def factory(lp, coro, **kwargs):
        calls.append(lp)
        return asyncio.Task(coro, loop=lp, **kwargs)

    assert loop.get_task_factory() is None
    loop.set_task_factory(factory)
    assert loop.get_task_factory() is factory

    async def main():
        return 3

    task = loop.create_task(main(), name="via-factory")
    assert calls == [loop]
    assert task.get_name() == "via-factory"
    assert loop.run_until_complete(task) == 3
    # run_until_complete(coro) goes through the factory too (ensure_future).
    assert loop.run_until_complete(main()) == 3
    assert len(calls) == 2
    loop.set_task_factory(None)
    assert loop.get_task_factory() is None
    loop.run_until_complete(main())
    assert len(calls) == 2


@pytest.mark.skipif(sys.version_info < (3, 11), reason="create_task(context=) is new in Python 3.11")
def test_task_factory_receives_context(loop):
    """create_task(context=) passes context= on to the task factory."""
    got = []

    def factory(lp, coro, **kwargs):
        got.append(kwargs.get("context"))
        return asyncio.Task(coro, loop=lp, **kwargs)

    loop.set_task_factory(factory)
    ctx = contextvars.copy_context()

    async def main():
        pass

    loop.run_until_complete(loop.create_task(main(), context=ctx))
    assert got == [ctx]


def test_task_factory_non_callable_raises(loop):
    """set_task_factory(non-callable) -> TypeError with asyncio's message."""
    with pytest.raises(TypeError, match="task factory must be a callable or None"):
        loop.set_task_factory(1)
    assert loop.get_task_factory() is None


@pytest.mark.skipif(sys.version_info < (3, 12),
                    reason="asyncio.eager_task_factory is new in Python 3.12")
def test_eager_task_factory(loop):
    """With eager_task_factory a task runs synchronously up to its first suspension."""
    loop.set_task_factory(asyncio.eager_task_factory)
    steps = []

    async def child():
        steps.append("child-start")
        await asyncio.sleep(0)
        steps.append("child-end")
        return 1

    async def main():
        t = asyncio.create_task(child())
        steps.append("after-create")
        return await t

    assert loop.run_until_complete(main()) == 1
    assert steps == ["child-start", "after-create", "child-end"]


def test_gather_10k_tasks(loop):
    """gather over 10,000 tasks returns every result in order."""
    async def work(i):
        await asyncio.sleep(0)
        return i * i

    async def main():
        return await asyncio.gather(*(work(i) for i in range(10_000)))

    assert loop.run_until_complete(main()) == [i * i for i in range(10_000)]


def test_many_tasks_with_timers(loop):
    """2,000 tasks sleeping small random amounts all complete."""
    async def work(i):
        await asyncio.sleep((i % 7) / 1000)
        return i

    async def main():
        return await asyncio.gather(*(work(i) for i in range(2000)))

    assert loop.run_until_complete(main()) == list(range(2000))


def test_task_exception_is_stored_and_raised(loop):
    """An exception in a task is stored on it and raised by await / run_until_complete."""
    class Boom(Exception):
        pass

    async def bad():
        await asyncio.sleep(0)
        raise Boom("bad")

    task = loop.create_task(bad())
    with pytest.raises(Boom):
        loop.run_until_complete(task)
    assert isinstance(task.exception(), Boom)

    async def main():
        results = await asyncio.gather(bad(), asyncio.sleep(0, "ok"),
                                       return_exceptions=True)
        return [type(r).__name__ if isinstance(r, Exception) else r for r in results]

    assert loop.run_until_complete(main()) == ["Boom", "ok"]


def test_unretrieved_task_exception_reported(loop):
    """A failed task that is dropped unretrieved is reported to the exception handler."""
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    async def bad():
        raise ValueError("never retrieved")

    task = loop.create_task(bad())
    loop.run_until_complete(asyncio.sleep(0))
    loop.run_until_complete(asyncio.sleep(0))
    assert task.done()
    del task
    gc.collect()
    assert len(contexts) == 1
    assert contexts[0]["message"] == "Task exception was never retrieved"
    assert isinstance(contexts[0]["exception"], ValueError)


def test_cancel_task(loop):
    """task.cancel() makes a sleeping task raise CancelledError promptly."""
    async def sleeper():
        await asyncio.sleep(30)

    task = loop.create_task(sleeper())
    loop.call_later(0.01, task.cancel)
    t0 = loop.time()
    with pytest.raises(asyncio.CancelledError):
        loop.run_until_complete(task)
    assert loop.time() - t0 < 2.0
    assert task.cancelled()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="before 3.11 the cancel message does not reach the awaiting task")
def test_cancel_with_message_and_cleanup(loop):
    """Cancellation carries its message and runs the task's finally blocks."""
    log = []

    async def sleeper():
        try:
            await asyncio.sleep(30)
        finally:
            log.append("finally")

    async def main():
        t = asyncio.create_task(sleeper())
        await asyncio.sleep(0)
        t.cancel("stop it")
        try:
            await t
        except asyncio.CancelledError as exc:
            return exc.args

    assert loop.run_until_complete(main()) == ("stop it",)
    assert log == ["finally"]


def test_task_can_catch_cancellation(loop):
    """A task that swallows CancelledError completes normally."""
    async def stubborn():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "swallowed"

    async def main():
        t = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        t.cancel()
        return await t

    assert loop.run_until_complete(main()) == "swallowed"


def test_current_task_and_all_tasks(loop):
    """current_task() and all_tasks() see tasks running on this loop."""
    async def child():
        await asyncio.sleep(0.01)

    async def main():
        me = asyncio.current_task()
        c = asyncio.create_task(child())
        tasks = asyncio.all_tasks()
        await c
        return me, c, tasks

    me, c, tasks = loop.run_until_complete(main())
    assert me in tasks and c in tasks
    assert asyncio.all_tasks(loop) == set()


def test_timeout_context_manager(loop):
    """asyncio.timeout() cancels the body when the deadline passes."""
    if not hasattr(asyncio, "timeout"):
        pytest.skip("asyncio.timeout is new in Python 3.11")

    async def main():
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(10)
        except TimeoutError:
            return "timed out"

    assert loop.run_until_complete(main()) == "timed out"


def test_task_group(loop):
    """TaskGroup runs children and propagates a child's failure as an ExceptionGroup."""
    if not hasattr(asyncio, "TaskGroup"):
        pytest.skip("asyncio.TaskGroup is new in Python 3.11")

    async def ok(i):
        await asyncio.sleep(0)
        return i

    async def bad():
        await asyncio.sleep(0.001)
        raise KeyError("x")

    async def main():
        async with asyncio.TaskGroup() as tg:
            ts = [tg.create_task(ok(i)) for i in range(5)]
        results = [t.result() for t in ts]
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(bad())
                tg.create_task(asyncio.sleep(10))
        except BaseException as exc:  # ExceptionGroup
            return results, [type(e) for e in exc.exceptions]

    assert loop.run_until_complete(main()) == ([0, 1, 2, 3, 4], [KeyError])


def test_future_set_from_callback_wakes_awaiting_task(loop):
    """A task awaiting a future resumes once a plain callback sets it."""
    async def main():
        fut = loop.create_future()
        loop.call_later(0.005, fut.set_result, "value")
        return await fut

    assert loop.run_until_complete(main()) == "value"


def test_queue_producer_consumer(loop):
    """asyncio.Queue moves 10,000 items between two tasks in order."""
    async def main():
        q = asyncio.Queue(maxsize=10)
        out = []

        async def producer():
            for i in range(10_000):
                await q.put(i)
            await q.put(None)

        async def consumer():
            while (item := await q.get()) is not None:
                out.append(item)

        await asyncio.gather(producer(), consumer())
        return out

    assert loop.run_until_complete(main()) == list(range(10_000))
