import asyncio
import sys

# Each extends what its asyncio counterpart is an instance of (see
# src/transport_bases.c), on the running Python.
class StreamTransportBase(asyncio.Transport): ...      # _SelectorSocketTransport
class TLSTransportBase(asyncio.Transport): ...         # sslproto._SSLProtocolTransport
if sys.version_info >= (3, 12):
    class DatagramTransportBase(asyncio.Transport, asyncio.DatagramTransport): ...
else:
    class DatagramTransportBase(asyncio.Transport): ...  # _SelectorDatagramTransport
class ReadPipeTransportBase(asyncio.ReadTransport): ...   # _UnixReadPipeTransport
class WritePipeTransportBase(asyncio.Transport): ...      # _UnixWritePipeTransport
class BufferedProtocolBase(asyncio.BufferedProtocol): ...
