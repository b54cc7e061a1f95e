import asyncio
import socket
from typing import Any

from ._transport_bases import DatagramTransportBase

class DatagramTransport(DatagramTransportBase):
    max_size: int
    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 protocol: asyncio.BaseProtocol, address: Any = None,
                 waiter: asyncio.Future[None] | None = None,
                 extra: dict[str, Any] | None = None) -> None: ...
