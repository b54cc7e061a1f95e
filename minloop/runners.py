"""minloop.run(): asyncio.run() with a minloop loop, on every Python."""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Any, Coroutine, TypeVar

from . import _asyncio_compat
from .base_events import new_event_loop

_T = TypeVar("_T")


def run(main: Coroutine[Any, Any, _T], *, debug: bool | None = None) -> _T:
    """Run the coroutine `main` in a new minloop loop and return its result.

    The semantics are asyncio.run()'s: the loop is closed afterwards, with
    remaining tasks cancelled, async generators finalised and the default
    executor shut down.
    """
    # asyncio.run()'s first check, in minloop.run()'s name (as Runner.run()
    # names itself); before asyncio's Runner is entered, whose exit would
    # otherwise fail too and hide the message.
    if asyncio.events._get_running_loop() is not None:
        raise RuntimeError(
            "minloop.run() cannot be called from a running event loop")
    if _asyncio_compat.RUN_TAKES_LOOP_FACTORY:
        return asyncio.run(main, debug=debug, loop_factory=new_event_loop)
    if _asyncio_compat.HAS_RUNNER:
        with asyncio.Runner(debug=debug, loop_factory=new_event_loop) as runner:
            return runner.run(main)
    return _run_310(main, debug=debug)


def _run_310(main, *, debug=None):
    """asyncio.run() of Python 3.10, with the SIGINT handling of 3.11's Runner.

    3.10 has no loop factory, and its asyncio.run() lets Ctrl-C raise
    KeyboardInterrupt wherever the loop happens to be.  minloop.run() behaves
    as asyncio.run() does from 3.11 on, on every Python: the first Ctrl-C
    cancels the main task (which may clean up) and run() then raises
    KeyboardInterrupt; a second Ctrl-C raises KeyboardInterrupt at once.
    """
    from asyncio import coroutines, events, exceptions
    from asyncio.runners import _cancel_all_tasks

    if not coroutines.iscoroutine(main):
        raise ValueError(f"a coroutine was expected, got {main!r}")

    loop = new_event_loop()
    try:
        events.set_event_loop(loop)
        if debug is not None:
            loop.set_debug(debug)
        task = loop.create_task(main)
        interrupts = 0

        def on_sigint(signum, frame):
            nonlocal interrupts
            interrupts += 1
            if interrupts == 1 and not task.done():
                task.cancel()
                # Wake the loop should it be blocked in a long poll.
                loop.call_soon_threadsafe(lambda: None)
                return
            raise KeyboardInterrupt()

        # Only where Ctrl-C would raise KeyboardInterrupt anyway: a program
        # that set its own SIGINT handler keeps it.
        take_sigint = (threading.current_thread() is threading.main_thread()
                       and signal.getsignal(signal.SIGINT)
                       is signal.default_int_handler)
        if take_sigint:
            signal.signal(signal.SIGINT, on_sigint)
        try:
            return loop.run_until_complete(task)
        except exceptions.CancelledError:
            # 3.10's tasks cannot tell a Ctrl-C cancel from others (no
            # uncancel()); a Ctrl-C was seen, so it is what ends run().
            if interrupts > 0:
                raise KeyboardInterrupt()
            raise
        finally:
            if take_sigint and signal.getsignal(signal.SIGINT) is on_sigint:
                signal.signal(signal.SIGINT, signal.default_int_handler)
    finally:
        try:
            _cancel_all_tasks(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            events.set_event_loop(None)
            loop.close()
