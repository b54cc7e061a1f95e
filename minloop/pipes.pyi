import asyncio
from typing import Any

from ._transport_bases import ReadPipeTransportBase, WritePipeTransportBase

class ReadPipeTransport(ReadPipeTransportBase):
    max_size: int
    def __init__(self, loop: asyncio.AbstractEventLoop, pipe: Any,
                 protocol: asyncio.BaseProtocol, waiter: asyncio.Future[None] | None = None,
                 extra: dict[str, Any] | None = None) -> None: ...

class WritePipeTransport(WritePipeTransportBase):
    def __init__(self, loop: asyncio.AbstractEventLoop, pipe: Any,
                 protocol: asyncio.BaseProtocol, waiter: asyncio.Future[None] | None = None,
                 extra: dict[str, Any] | None = None) -> None: ...
