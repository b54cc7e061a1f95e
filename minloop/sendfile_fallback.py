"""loop.sendfile()'s fallback: read the file and write it to the transport.

asyncio's loop.sendfile() takes this path where sendfile(2) cannot serve: a
TLS transport, or a file that sendfile() cannot read (no fd, not mmap-able).
It swaps in a protocol of its own (_SendfileFallbackProtocol) that turns
the transport's pause_writing()/resume_writing() into waits and fails them
when the connection is lost; reading is paused meanwhile, and write()
still works (unlike during the native path).

asyncio's protocol accepts only transports._FlowControlMixin instances, and
minloop's compiled SocketTransport is not one (it is a heap type over
asyncio.Transport; see src/transport_bases.c), although it has the same
flow-control surface.  So transports of that kind (TLS included) keep
asyncio's own coroutine, and ours run the same steps here with a protocol
that differs only in its constructor.
"""

from asyncio import base_events as _aio_base
from asyncio import transports as _aio_transports

_aio_sendfile_fallback = _aio_base.BaseEventLoop._sendfile_fallback

# The chunk asyncio's transport fallback reads and writes at a time.
_BLOCK_SIZE = 16384


class _FallbackProtocol(_aio_base._SendfileFallbackProtocol):
    """asyncio's _SendfileFallbackProtocol, for a transport with asyncio's
    flow-control attributes (_protocol_paused, _loop) but not its mixin."""

    def __init__(self, transp):
        # Everything asyncio's constructor does, except its isinstance check.
        self._transport = transp
        self._proto = transp.get_protocol()
        self._should_resume_reading = transp.is_reading()
        self._should_resume_writing = transp._protocol_paused
        transp.pause_reading()
        transp.set_protocol(self)
        if self._should_resume_writing:
            self._write_ready_fut = transp._loop.create_future()
        else:
            self._write_ready_fut = None


async def sendfile_fallback(self, transp, file, offset, count):
    """Loop._sendfile_fallback: send file[offset:offset+count] with write()."""
    if isinstance(transp, _aio_transports._FlowControlMixin):
        return await _aio_sendfile_fallback(self, transp, file, offset, count)
    if offset:
        file.seek(offset)
    blocksize = min(count, _BLOCK_SIZE) if count else _BLOCK_SIZE
    buf = bytearray(blocksize)
    total_sent = 0
    proto = _FallbackProtocol(transp)
    try:
        while True:
            if count:
                blocksize = min(count - total_sent, blocksize)
                if blocksize <= 0:
                    return total_sent
            view = memoryview(buf)[:blocksize]
            read = await self.run_in_executor(None, file.readinto, view)
            if not read:
                return total_sent   # the end of the file
            # Wait while the transport's buffer is above its high-water
            # mark; write() copies what it cannot send at once, so the
            # buffer can be reused for the next read.
            await proto.drain()
            transp.write(view[:read])
            total_sent += read
    finally:
        # As asyncio: the position after what was written, even on error.
        if total_sent > 0 and hasattr(file, 'seek'):
            file.seek(offset + total_sent)
        await proto.restore()
