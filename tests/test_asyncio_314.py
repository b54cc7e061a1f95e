"""What Python 3.14 added to asyncio that involves the loop, on both loops.

Each test runs a scenario on the loop under test and checks it against what
the running asyncio documents and does, written out (each switch below asked
of asyncio itself), so it holds on every Python: where the running asyncio
lacks the feature, the expectation is its refusal, or the test skips.
- loop.create_task(coro, **kwargs): every keyword goes to the task factory
  (3.14, gh-128307), eager_start= among them;
- eager tasks: asyncio.eager_task_factory, create_eager_task_factory();
- asyncio.Runner.run() takes any awaitable (3.14);
- the call graph: asyncio.capture_call_graph(), format_call_graph();
- `python -m asyncio ps PID` and `pstree PID`, which read another process's
  tasks from its thread states (3.14's per-thread task registry): minloop's
  tasks are asyncio's own, so they are there as asyncio's are.
"""

import asyncio
import contextvars
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import textwrap

import pytest


# What the running asyncio does, asked of asyncio itself (not of minloop's
# _asyncio_compat, which minloop's own code reads): each test states the
# behaviour as a literal and checks the loop under test against it, so the
# [asyncio] run checks the statement and the [minloop] run the loop.
_create_task_parameters = inspect.signature(asyncio.BaseEventLoop.create_task).parameters
# create_task(coro, **kwargs) hands every keyword to the factory, which names
# the task (3.14, gh-128307): no name= of its own.
CREATE_TASK_PASSES_KWARGS = "name" not in _create_task_parameters
# create_task() takes keywords besides name= and context= (3.13.4, gh-133745).
CREATE_TASK_TAKES_KWARGS = any(p.kind is inspect.Parameter.VAR_KEYWORD
                               for p in _create_task_parameters.values())
# create_task() takes context= (3.11).
CREATE_TASK_TAKES_CONTEXT = CREATE_TASK_TAKES_KWARGS or "context" in _create_task_parameters
# The eager factories take eager_start=False (3.14).
EAGER_FACTORY_TAKES_EAGER_START = hasattr(asyncio, "create_eager_task_factory") and (
    "eager_start" in inspect.signature(asyncio.create_eager_task_factory(asyncio.Task)).parameters)
def _asyncio_names_factory_tasks_none():
    """3.13.0's create_task() called set_name(name) on a task factory's task
    even without name=, naming it 'None' (later releases leave the factory's
    name); minloop's loop keeps the Task-N name there."""
    lp = asyncio.new_event_loop()
    try:
        lp.set_task_factory(lambda loop, coro, **kw: asyncio.Task(coro, loop=loop, **kw))

        async def nothing():
            pass

        task = lp.create_task(nothing())
        lp.run_until_complete(task)
        return task.get_name() == "None"
    finally:
        lp.close()


ASYNCIO_NAMES_FACTORY_TASKS_NONE = _asyncio_names_factory_tasks_none()
# Runner.run() takes any awaitable (3.14); before, a ValueError.
RUNNER_RUNS_AWAITABLES = sys.version_info >= (3, 14)


def run_on(loop_factory, scenario):
    """What scenario(loop) returns on a new loop (an exception propagates:
    a scenario catches only the refusal it expects)."""
    lp = loop_factory()
    lp.set_debug(False)
    try:
        return scenario(lp)
    finally:
        lp.close()
        asyncio.set_event_loop(None)


# --- create_task's keywords and the task factory ---------------------------

def recording_factory(seen):
    def factory(loop, coro, **kwargs):
        seen.append(sorted(kwargs))
        kwargs.pop("custom", None)
        return asyncio.Task(coro, loop=loop, **kwargs)
    return factory


def keywords_the_factory_sees(kwargs):
    """asyncio's create_task(): from 3.14 the factory gets every keyword; before,
    create_task() kept name= (set_name() on the task), passed context= and,
    from 3.13.4, the other keywords; before 3.13.4 those were a TypeError,
    and before 3.11 context= too."""
    if CREATE_TASK_PASSES_KWARGS:
        return sorted(kwargs)
    if not CREATE_TASK_TAKES_CONTEXT and "context" in kwargs:
        return "TypeError"
    if not CREATE_TASK_TAKES_KWARGS and set(kwargs) - {"name", "context"}:
        return "TypeError"
    return sorted(k for k in kwargs if k != "name")


@pytest.mark.parametrize("kwargs", [
    {}, {"name": "named"}, {"context": "copy"}, {"name": "named", "context": "copy"},
    {"custom": 1}, {"eager_start": False},
], ids=repr)
def test_create_task_hands_its_keywords_to_the_factory_as_asyncio_does(loop_factory, loop_kind,
                                                                       kwargs):
    def scenario(lp):
        seen = []
        lp.set_task_factory(recording_factory(seen))
        given = dict(kwargs)
        if given.get("context") == "copy":
            given["context"] = contextvars.copy_context()

        async def main():
            return 1

        coro = main()
        try:
            task = lp.create_task(coro, **given)
        except TypeError:
            # A keyword the running asyncio does not take, refused by
            # create_task() itself.
            coro.close()
            return "TypeError"
        assert lp.run_until_complete(task) == 1
        return seen, task.get_name()

    expected = keywords_the_factory_sees(kwargs)
    got = run_on(loop_factory, scenario)
    if expected == "TypeError":
        assert got == "TypeError"
    else:
        seen, name = got
        assert seen == [expected]           # the factory called once, with these
        if "name" in kwargs:
            assert name == "named"
        elif loop_kind == "asyncio" and ASYNCIO_NAMES_FACTORY_TASKS_NONE:
            assert name == "None"
        else:
            assert re.fullmatch(r"Task-\d+", name)


@pytest.mark.parametrize("eager_start", [None, True, False])
def test_create_task_eager_start_as_asyncio(loop_factory, eager_start):
    """Without a factory, eager_start= goes to the Task (3.13.4; before, a
    TypeError): True runs the coroutine to its first suspension inside
    create_task()."""
    def scenario(lp):
        steps = []

        async def child():
            steps.append("child starts")
            await asyncio.sleep(0)
            steps.append("child ends")

        async def main():
            kwargs = {} if eager_start is None else {"eager_start": eager_start}
            coro = child()
            try:
                task = lp.create_task(coro, **kwargs)
            except TypeError:   # where create_task() takes no such keyword
                coro.close()
                return "TypeError"
            steps.append("created")
            await task
            return steps

        return lp.run_until_complete(main())

    if eager_start is not None and not CREATE_TASK_TAKES_KWARGS:
        expected = "TypeError"
    elif eager_start:
        expected = ["child starts", "created", "child ends"]
    else:
        expected = ["created", "child starts", "child ends"]
    assert run_on(loop_factory, scenario) == expected


@pytest.mark.skipif(not hasattr(asyncio, "create_eager_task_factory"),
                    reason="eager task factories are new in Python 3.12")
@pytest.mark.parametrize("factory", ["eager_task_factory", "custom"])
@pytest.mark.parametrize("eager_start", [None, False])
def test_eager_task_factories_as_asyncio(loop_factory, factory, eager_start):
    """The factories run tasks eagerly; 3.14's take eager_start=False to
    start one lazily (3.12/3.13's refuse the keyword)."""
    class CustomTask(asyncio.Task):
        pass

    def scenario(lp):
        steps = []
        lp.set_task_factory(asyncio.eager_task_factory if factory == "eager_task_factory"
                            else asyncio.create_eager_task_factory(CustomTask))

        async def child():
            steps.append("child starts")
            await asyncio.sleep(0)
            return "done"

        async def main():
            kwargs = {} if eager_start is None else {"eager_start": eager_start}
            coro = child()
            try:
                task = asyncio.create_task(coro, name="child", **kwargs)
            except TypeError:
                coro.close()
                return "TypeError"
            steps.append("created")
            return steps, await task, type(task).__name__, task.get_name()

        return lp.run_until_complete(main())

    task_type = "Task" if factory == "eager_task_factory" else "CustomTask"
    if eager_start is None:
        expected = (["child starts", "created"], "done", task_type, "child")
    elif EAGER_FACTORY_TAKES_EAGER_START:
        expected = (["created", "child starts"], "done", task_type, "child")
    else:
        expected = "TypeError"
    assert run_on(loop_factory, scenario) == expected


# --- asyncio.Runner ---------------------------------------------------------

@pytest.mark.skipif(not hasattr(asyncio, "Runner"), reason="asyncio.Runner is new in 3.11")
def test_runner_runs_what_it_runs_on_asyncio(loop_factory):
    """3.14's Runner.run() takes any awaitable, a Future among them; before,
    a ValueError."""
    class Awaitable:
        def __await__(self):
            return (yield from asyncio.sleep(0, result="awaited").__await__())

    awaitable = Awaitable()
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        if RUNNER_RUNS_AWAITABLES:
            assert runner.run(awaitable) == "awaited"
        else:
            with pytest.raises(ValueError, match=r"^a coroutine was expected, got <"):
                runner.run(awaitable)


# --- the call graph (3.14) --------------------------------------------------

needs_call_graph = pytest.mark.skipif(not hasattr(asyncio, "capture_call_graph"),
                                      reason="asyncio's call graph is new in Python 3.14")


def call_graph_scenario(lp):
    graphs = {}

    async def leaf(ready, release):
        # From inside: the graph of the running task.
        graphs["inside"] = asyncio.format_call_graph()
        ready.set_result(None)
        await release

    async def worker(ready, release):
        async with asyncio.TaskGroup() as tg:
            tg.create_task(leaf(ready, release), name="leaf")

    async def main():
        ready, release = lp.create_future(), lp.create_future()
        task = asyncio.create_task(worker(ready, release), name="worker")
        await ready
        await asyncio.sleep(0)
        # From outside: the graph of a waiting task, and its structure.
        graphs["outside"] = asyncio.format_call_graph(task)
        graph = asyncio.capture_call_graph(task)
        graphs["shape"] = (graph.future.get_name(),
                           [f.frame.f_code.co_qualname for f in graph.call_stack],
                           [a.future.get_name() for a in graph.awaited_by])
        release.set_result(None)
        await task
        # Ids, and where each frame's file and line are, left out.
        return {key: re.sub(r"File '[^']*', line \d+, in ", "",
                            re.sub(r"id=0x[0-9a-f]+", "id=…", graph))
                if isinstance(graph, str) else graph
                for key, graph in graphs.items()}

    return lp.run_until_complete(lp.create_task(main(), name="main"))


# The worker waits in its task group's __aexit__ for the leaf; main awaits
# a future, not the worker, so nothing awaits the worker.
WORKER_STACK = ["TaskGroup._aexit", "TaskGroup.__aexit__", "call_graph_scenario.<locals>.worker"]
LEAF_GRAPH = """\
* Task(name='leaf', id=…)
  + Call stack:
  |   async call_graph_scenario.<locals>.leaf()
  + Awaited by:
    * Task(name='worker', id=…)
      + Call stack:
      |   async TaskGroup._aexit()
      |   async TaskGroup.__aexit__()
      |   async call_graph_scenario.<locals>.worker()"""
WORKER_GRAPH = """\
* Task(name='worker', id=…)
  + Call stack:
  |   async TaskGroup._aexit()
  |   async TaskGroup.__aexit__()
  |   async call_graph_scenario.<locals>.worker()"""


@needs_call_graph
def test_call_graph_has_the_shape_it_has_on_asyncio(loop_factory):
    graphs = run_on(loop_factory, call_graph_scenario)
    assert graphs == {"inside": LEAF_GRAPH, "outside": WORKER_GRAPH,
                      "shape": ("worker", WORKER_STACK, [])}


# --- python -m asyncio ps / pstree (3.14) ------------------------------------

PROGRAM = textwrap.dedent("""\
    import asyncio, os, sys

    async def leaf(ev):
        await ev.wait()

    async def worker(ev):
        async with asyncio.TaskGroup() as tg:
            tg.create_task(leaf(ev), name="leaf-a")
            tg.create_task(leaf(ev), name="leaf-b")

    async def main():
        ev = asyncio.Event()
        task = asyncio.create_task(worker(ev), name="worker")
        await asyncio.sleep(0)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        ev.set()
        await task

    if sys.argv[1] == "minloop":
        import minloop
        minloop.run(main())
    else:
        asyncio.run(main())
""")


def normalise(text, pid):
    text = text.replace(str(pid), "PID")
    text = re.sub(r"0x[0-9a-f]+", "0x…", text)
    return re.sub(r"[ \t]+", " ", text)


def tools_output(kind, tmp_path, minloop_module):
    script = tmp_path / "tasks_program.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(minloop_module.__file__)))
    proc = subprocess.Popen([sys.executable, str(script), kind], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        assert proc.stdout.readline() == "ready\n"
        shown = {}
        for command in ("ps", "pstree"):
            tool = subprocess.run([sys.executable, "-m", "asyncio", command, str(proc.pid)],
                                  capture_output=True, text=True, timeout=60)
            if tool.returncode != 0:
                return None, tool.stderr
            shown[command] = normalise(tool.stdout, proc.pid)
        return shown, None
    finally:
        proc.communicate("", timeout=30)


@pytest.mark.skipif(importlib.util.find_spec("asyncio.tools") is None,
                    reason="python -m asyncio ps/pstree are new in Python 3.14")
def test_asyncio_ps_and_pstree_show_the_tasks_as_on_asyncio(loop_kind, tmp_path, minloop_module):
    want, error = tools_output("asyncio", tmp_path, minloop_module)
    if want is None:
        # Reading another process's memory needs ptrace rights over it
        # (kernel.yama.ptrace_scope, a container's capabilities).
        pytest.skip(f"python -m asyncio ps cannot read a sibling process here: {error}")
    got, error = tools_output(loop_kind, tmp_path, minloop_module)
    assert error is None, error
    assert got == want
    for name in ("worker", "leaf-a", "leaf-b"):
        assert name in got["ps"] and f"(T) {name}" in got["pstree"]


# --- deprecations: none that asyncio does not give --------------------------

@pytest.mark.main_interpreter("signals")
def test_debug_checks_of_callbacks_warn_as_asyncio_does(loop_factory):
    """Debug mode checks each callback for a coroutine function, as does
    add_signal_handler(); 3.14 deprecates asyncio.iscoroutinefunction(), and
    asyncio's own checks use its private one, which does not warn: neither
    may minloop's."""
    import signal
    import warnings

    def scenario(lp):
        lp.set_debug(True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lp.call_soon(len, "")
            lp.call_later(0, len, "")
            lp.add_signal_handler(signal.SIGUSR1, print)
            lp.remove_signal_handler(signal.SIGUSR1)
            lp.run_until_complete(asyncio.sleep(0))
        return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]

    assert run_on(loop_factory, scenario) == []
