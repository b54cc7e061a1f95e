"""Typed use of minloop's public API; tests/test_typing.py runs mypy on it."""

import asyncio
import sys

import minloop


async def answer() -> int:
    await asyncio.sleep(0)
    return 42


def use() -> None:
    result: int = minloop.run(answer())
    loop: asyncio.AbstractEventLoop = minloop.new_event_loop()
    handle: asyncio.Handle | minloop.handles.Handle = loop.call_soon(print, "x")
    handle.cancel()
    when: float = minloop.new_event_loop().call_later(1.0, print).when()
    backend: str = minloop.poller_backend_name()
    if sys.version_info >= (3, 12):
        asyncio.run(answer(), loop_factory=minloop.new_event_loop)
    print(result, when, backend)
    loop.close()
