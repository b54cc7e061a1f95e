import asyncio
import contextvars
import socket
from typing import Any, Callable

class SocketTransport(asyncio.Transport):
    max_size: int
    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 protocol: asyncio.BaseProtocol, waiter: asyncio.Future[None] | None = None,
                 extra: dict[str, Any] | None = None, server: asyncio.AbstractServer | None = None,
                 context: contextvars.Context | None = None) -> None: ...

def accept_connections(loop: asyncio.AbstractEventLoop, protocol_factory: Callable[[], asyncio.BaseProtocol],
                       sock: socket.socket, sslcontext: Any, server: asyncio.AbstractServer | None,
                       backlog: int, ssl_handshake_timeout: float | None,
                       ssl_shutdown_timeout: float | None,
                       context: contextvars.Context | None) -> None: ...
