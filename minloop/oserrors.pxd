# errno -> Python, as the socket module reports it; shared by the modules
# that make socket calls directly (stream, datagram, sock_ops, loop).

from libc.errno cimport EAGAIN, EINTR
from libc.string cimport strerror

from .includes cimport EWOULDBLOCK, PyUnicode_DecodeLocale


cdef inline bint would_block(int err) noexcept:
    """The call found nothing to do now (BlockingIOError)."""
    return err == EAGAIN or err == EWOULDBLOCK


cdef inline bint blocked_or_interrupted(int err) noexcept:
    """Try again later: asyncio's transports treat InterruptedError as
    BlockingIOError (the level-triggered poller calls again)."""
    return would_block(err) or err == EINTR


cdef inline object os_error(int err):
    """What PyErr_SetFromErrno raises: OSError(errno, strerror), which
    OSError's constructor turns into the subclass for errno
    (ConnectionResetError, ...); the message is os.strerror(err)'s."""
    return OSError(err, PyUnicode_DecodeLocale(strerror(err), "surrogateescape"))
