"""Which Task/Future class the loop builds, and what a task factory is given.

asyncio's loop looks up tasks.Task and futures.Future at each call, so a
program (or CPython's own TestPyGetEventLoop, from 3.14) can put other
classes there; from 3.14, loop.create_task() hands name= to the task factory
instead of naming the task afterwards, so an eager task starts with its name.
"""

import asyncio
from asyncio import futures, tasks

import pytest

from minloop import _asyncio_compat


class RecordedTask(asyncio.Task):
    pass


class RecordedFuture(asyncio.Future):
    pass


def test_create_task_builds_the_class_in_asyncio_tasks(loop, monkeypatch):
    """create_task() without a factory builds whatever asyncio.tasks.Task is now."""
    monkeypatch.setattr(tasks, "Task", RecordedTask)

    async def main():
        return 1

    task = loop.create_task(main())
    assert type(task) is RecordedTask
    named = loop.create_task(main(), name="n")
    assert type(named) is RecordedTask and named.get_name() == "n"
    assert loop.run_until_complete(asyncio.gather(task, named)) == [1, 1]


def test_create_future_builds_the_class_in_asyncio_futures(loop, monkeypatch):
    """create_future() builds whatever asyncio.futures.Future is now."""
    monkeypatch.setattr(futures, "Future", RecordedFuture)
    fut = loop.create_future()
    assert type(fut) is RecordedFuture and fut.get_loop() is loop
    fut.cancel()


def test_pure_python_task_sees_the_loop_the_python_functions_set(loop, monkeypatch):
    """With asyncio's pure-Python running-loop functions and Task in place (as
    TestPyGetEventLoop installs them), run_until_complete() runs a pure-Python
    task that finds the loop running."""
    monkeypatch.setattr(asyncio.events, "_get_running_loop", asyncio.events._py__get_running_loop)
    monkeypatch.setattr(asyncio.events, "_set_running_loop", asyncio.events._py__set_running_loop)
    monkeypatch.setattr(asyncio.events, "get_running_loop", asyncio.events._py_get_running_loop)
    monkeypatch.setattr(tasks, "Task", tasks._PyTask)
    monkeypatch.setattr(futures, "Future", futures._PyFuture)

    async def main():
        return asyncio.events.get_running_loop()

    task = loop.create_task(main())
    assert type(task) is tasks._PyTask
    assert loop.run_until_complete(task) is loop
    assert loop.run_until_complete(main()) is loop


@pytest.mark.skipif(not hasattr(asyncio, "eager_task_factory"),
                    reason="asyncio.eager_task_factory is new in Python 3.12")
def test_eager_task_runs_its_first_step_with_the_name_where_asyncio_passes_it(loop):
    """With the eager task factory, the task's first step sees name= where the
    running asyncio passes it to the factory (3.14), else the default name,
    which create_task() replaces after."""
    loop.set_task_factory(asyncio.eager_task_factory)
    seen = []

    async def step():
        seen.append(asyncio.current_task().get_name())

    async def main():
        task = loop.create_task(step(), name="given")
        await task
        return task.get_name()

    assert loop.run_until_complete(main()) == "given"
    if _asyncio_compat.TASK_FACTORY_TAKES_NAME:
        assert seen == ["given"]
    else:
        assert seen[0].startswith("Task-")
