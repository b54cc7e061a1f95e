import asyncio
import ssl
from typing import Any

from ._transport_bases import BufferedProtocolBase, TLSTransportBase

class SSLProtocol(BufferedProtocolBase):
    max_size: int
    def __init__(self, loop: asyncio.AbstractEventLoop, app_protocol: asyncio.BaseProtocol,
                 sslcontext: ssl.SSLContext | None, waiter: asyncio.Future[None] | None,
                 server_side: bool = False, server_hostname: str | None = None,
                 call_connection_made: bool = True,
                 ssl_handshake_timeout: float | None = None,
                 ssl_shutdown_timeout: float | None = None) -> None: ...
    @property
    def _app_transport(self) -> SSLProtocolTransport | None: ...
    def _get_extra_info(self, name: str, default: Any = None) -> Any: ...
    def _is_transport_closing(self) -> bool: ...
    def _fatal_error(self, exc: BaseException,
                     message: str = 'Fatal error on transport') -> None: ...

class SSLProtocolTransport(TLSTransportBase):
    @property
    def _ssl_protocol(self) -> SSLProtocol | None: ...
