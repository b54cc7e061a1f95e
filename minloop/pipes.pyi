import asyncio
from typing import Any

from ._transport_bases import ReadTransportBase, WriteTransportBase

class ReadPipeTransport(ReadTransportBase):
    max_size: int
    def __init__(self, loop: asyncio.AbstractEventLoop, pipe: Any,
                 protocol: asyncio.BaseProtocol, waiter: asyncio.Future[None] | None = None,
                 extra: dict[str, Any] | None = None) -> None: ...

class WritePipeTransport(WriteTransportBase):
    def __init__(self, loop: asyncio.AbstractEventLoop, pipe: Any,
                 protocol: asyncio.BaseProtocol, waiter: asyncio.Future[None] | None = None,
                 extra: dict[str, Any] | None = None) -> None: ...
