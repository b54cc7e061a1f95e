# How a compiled transport reports its fatal error: the reporting half of
# asyncio's _SelectorTransport._fatal_error (the closing half differs per
# transport), shared by the stream, datagram and pipe transports.

from asyncio.log import logger as _logger

from .lifecycle cimport check_loop


cdef inline report_fatal_error(object loop, bint debug, object transport,
                               object protocol, object exc, object message,
                               bint expected):
    """`expected` errors (an OSError of the connection, for asyncio) are
    logged in debug mode only; any other goes to the loop's exception
    handler.  Called from an exception handler only (exc_info).  Once
    connection_lost() has cleared `loop`, it fails as asyncio's call on its
    cleared loop does."""
    if expected:
        check_loop(loop, 'get_debug')
        if debug:
            _logger.debug("%r: %s", transport, message, exc_info=True)
    else:
        loop.call_exception_handler({
            'message': message,
            'exception': exc,
            'transport': transport,
            'protocol': protocol,
        })
