"""Misuse that the stubs must reject (each line is one mypy error)."""

import minloop


async def answer() -> int:
    return 42


text: str = minloop.run(answer())                           # int is not str
minloop.new_event_loop().call_later("soon", print)          # delay must be a number
backend: int = minloop.poller_backend_name()                # returns str
