"""minloop.run(): asyncio.run() with a minloop loop, on every Python."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Coroutine, TypeVar

from .base_events import new_event_loop

_T = TypeVar("_T")


def run(main: Coroutine[Any, Any, _T], *, debug: bool | None = None) -> _T:
    """Run the coroutine `main` in a new minloop loop and return its result.

    The semantics are asyncio.run()'s: the loop is closed afterwards, with
    remaining tasks cancelled, async generators finalised and the default
    executor shut down.
    """
    if sys.version_info >= (3, 12):
        return asyncio.run(main, debug=debug, loop_factory=new_event_loop)
    if sys.version_info >= (3, 11):
        # asyncio.run() checks this before entering its Runner, whose exit
        # would otherwise fail too and hide the message.
        if asyncio.events._get_running_loop() is not None:
            raise RuntimeError(
                "asyncio.run() cannot be called from a running event loop")
        with asyncio.Runner(debug=debug, loop_factory=new_event_loop) as runner:
            return runner.run(main)
    return _run_310(main, debug=debug)


def _run_310(main, *, debug=None):
    """asyncio.run() of Python 3.10, which has no loop factory."""
    from asyncio import coroutines, events
    from asyncio.runners import _cancel_all_tasks

    if events._get_running_loop() is not None:
        raise RuntimeError(
            "asyncio.run() cannot be called from a running event loop")
    if not coroutines.iscoroutine(main):
        raise ValueError(f"a coroutine was expected, got {main!r}")

    loop = new_event_loop()
    try:
        events.set_event_loop(loop)
        if debug is not None:
            loop.set_debug(debug)
        return loop.run_until_complete(main)
    finally:
        try:
            _cancel_all_tasks(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            events.set_event_loop(None)
            loop.close()
