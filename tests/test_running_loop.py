"""The running-loop registration goes through asyncio.events, as asyncio's does.

asyncio's run_forever() calls events._set_running_loop (and _check_running
events._get_running_loop) through the module on every run, so whatever is
installed there takes effect: CPython's TestPyGetEventLoop installs the
pure-Python functions, which keep the running loop in a threading.local that
the C functions never see.
"""

import asyncio
import threading
from asyncio import events

import pytest

# (_get_running_loop, _set_running_loop, get_running_loop, get_event_loop,
# Task, Future), as CPython's GetEventLoopTestsMixin installs them: the
# functions with the tasks and futures of the same implementation, which
# from 3.14 look for the running loop where their own functions keep it
# (the C Task in the thread state, the pure-Python one through events).
IMPLEMENTATIONS = {
    "py": (events._py__get_running_loop, events._py__set_running_loop,
           events._py_get_running_loop, events._py_get_event_loop,
           asyncio.tasks._PyTask, asyncio.futures._PyFuture),
}
if hasattr(events, "_c__get_running_loop"):
    IMPLEMENTATIONS["c"] = (events._c__get_running_loop, events._c__set_running_loop,
                            events._c_get_running_loop, events._c_get_event_loop,
                            asyncio.tasks._CTask, asyncio.futures._CFuture)

_NAMES = ("_get_running_loop", "_set_running_loop", "get_running_loop", "get_event_loop")


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def installed(request, monkeypatch):
    """Install one implementation in asyncio.events and asyncio, as CPython's
    test does; return the functions."""
    *functions, task, future = IMPLEMENTATIONS[request.param]
    for name, function in zip(_NAMES, functions):
        monkeypatch.setattr(events, name, function)
        monkeypatch.setattr(asyncio, name, function)
    for module in (asyncio, asyncio.tasks):
        monkeypatch.setattr(module, "Task", task)
    for module in (asyncio, asyncio.futures):
        monkeypatch.setattr(module, "Future", future)
    return dict(zip(_NAMES, functions), Task=task, Future=future)


def test_tasks_and_futures_are_of_the_installed_kind(loop, installed):
    """The loop makes them from what asyncio.tasks and asyncio.futures hold
    when asked, as asyncio's loop does (minloop read them once, at import)."""
    async def main():
        return type(loop.create_future())

    task = loop.create_task(main())
    assert type(task) is installed["Task"]
    assert loop.run_until_complete(task) is installed["Future"]


def test_running_loop_is_found_by_the_installed_functions(loop, installed):
    seen = {}

    def callback():
        seen.update({name: installed[name]() for name in
                     ("_get_running_loop", "get_running_loop", "get_event_loop")})
        loop.stop()

    assert installed["_get_running_loop"]() is None
    loop.call_soon(callback)
    loop.run_forever()
    assert seen == {"_get_running_loop": loop, "get_running_loop": loop,
                    "get_event_loop": loop}
    # Unregistered when run_forever() returns.
    assert installed["_get_running_loop"]() is None


def test_run_until_complete_sees_loop_through_installed_functions(loop, installed):
    async def main():
        return installed["get_event_loop"](), installed["get_running_loop"]()

    assert loop.run_until_complete(main()) == (loop, loop)
    assert installed["_get_running_loop"]() is None


def test_unregistered_after_a_callback_raises_out(loop, installed):
    def boom():
        raise KeyboardInterrupt

    loop.call_soon(boom)
    with pytest.raises(KeyboardInterrupt):
        loop.run_forever()
    assert installed["_get_running_loop"]() is None
    assert not loop.is_running()


def test_another_loop_registered_through_installed_functions_is_seen(
        loop_factory, installed):
    """_check_running asks the installed _get_running_loop: a loop that
    another registered there blocks run_forever/run_until_complete."""
    outer = asyncio.SelectorEventLoop()
    inner = loop_factory()
    try:
        async def nested():
            coro = asyncio.sleep(0)
            try:
                with pytest.raises(RuntimeError, match="another loop is running"):
                    inner.run_until_complete(coro)
            finally:
                coro.close()
            with pytest.raises(RuntimeError, match="another loop is running"):
                inner.run_forever()

        outer.run_until_complete(nested())
    finally:
        outer.close()
        inner.close()


def test_registration_is_per_thread(loop_factory, installed):
    """Each thread's running loop is its own, whichever functions are installed."""
    results = {}

    def run_in_thread():
        lp = loop_factory()
        try:
            async def main():
                return installed["get_running_loop"]()
            results["thread"] = (lp.run_until_complete(main()) is lp)
        finally:
            lp.close()

    lp = loop_factory()
    try:
        async def main():
            t = threading.Thread(target=run_in_thread)
            t.start()
            await lp.run_in_executor(None, t.join)
            return installed["get_running_loop"]()
        assert lp.run_until_complete(main()) is lp
    finally:
        lp.close()
    assert results == {"thread": True}
