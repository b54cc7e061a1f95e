# The life of a compiled transport, from its first read to connection_lost():
# the halves asyncio's _SelectorTransport (selector_events.py) and its unix
# pipe transports (unix_events.py) share, as functions the stream, datagram
# and pipe transports inline over their own fields.
#
# Each transport extends its own asyncio class through the C base types
# (transport_bases.c), so they cannot share a cdef base.  They share a shape
# instead -- the same fields, with the same types, in this order:
#
#   readonly object _loop      asyncio's: None once connection_lost() has run,
#                              so that what asyncio calls on it then fails
#                              as asyncio's does (AttributeError), never as
#                              a C call on None
#   LoopCore _core             the same loop, kept for good: the fd table
#                              and the debug flag (C-level, never a call
#                              asyncio makes on its loop)
#   the fd                     readonly int: _sock_fd (sockets), _fileno
#                              (pipes), asyncio's names
#   the file                   _sock / _pipe: None once connection_lost()
#                              has run
#   readonly object _protocol
#   readonly bint _protocol_connected      (sockets, as asyncio's; the
#                                          stream transport's is a byte
#                                          behind a property, see there)
#   readonly object _server                (sockets)
#   the write queue, its size (Py_ssize_t) and _protocol_paused, _high_water,
#   _low_water (Py_ssize_t)                (writers)
#   readonly Py_ssize_t _conn_lost         (writers)
#   readonly bint _closing
#   readonly bint _paused                  (readers)
#
# and the lifecycle methods under asyncio's names, in asyncio's order:
# close(), abort(), _fatal_error(), _force_close() (the pipes': _close()),
# _call_connection_lost().

from cpython.bytes cimport PyBytes_AS_STRING, _PyBytes_Resize
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF
from libc cimport errno as libc_errno
from posix.stdlib cimport posix_memalign
from posix.unistd cimport sysconf, _SC_PAGESIZE

from .includes cimport (POLLER_READ, POLLER_WRITE, recv, c_read,
                        PyBytes_FromStringAndSize_raw, af_fails, AF_READ_BUFFER)
from .loop cimport LoopCore, check_loop_thread, fd_watched


cdef enum:
    # asyncio's max_size: the most one read of any transport returns.
    READ_SIZE = 256 * 1024
    # Above this many bytes a read's copy out of read_buffer() costs more
    # than receiving into a new bytes object (read_new_bytes()): at 64 KiB
    # the copy was nearly all of a round trip's server instructions
    # (benchmarks/RESULTS.md, "Figures moved out of code comments (issue
    # 44)", for this figure and the next).
    COPY_MAX = 16 * 1024
    # What a read of more than COPY_MAX bytes is received into, the next
    # time: less than glibc's threshold for mmap() (128 KiB until a program
    # changes it), so it comes from the heap and shrinks in place.  asyncio's
    # 256 KiB allocation is an mmap(), page faults on every large read and a
    # munmap(): several times the copy's server CPU per round trip, which
    # valgrind's own malloc() does not show.  A larger message takes one
    # read more.
    LARGE_READ_SIZE = 127 * 1024



cdef inline char *read_buffer(LoopCore core) except NULL:
    """The loop's buffer for one read (READ_SIZE bytes), made on first use.

    Every transport of the loop reads into it, so each must copy what it
    read out of it before any Python code runs: Python code (a protocol's
    __getattr__, a __del__ run by the collector) could make another
    transport of the loop read into it.

    Page-aligned: malloc() gives a buffer this size 16 bytes into a page,
    and the kernel's copy of a read into memory 1 to 31 bytes past where
    its data sits in a page (page-aligned on loopback) took 2-3x as long
    on AMD EPYC (rep movsb): 40-60 us against 18-23 per 64 KiB recv().
    """
    cdef void *buf = NULL
    cdef long page
    if core._read_buffer == NULL:
        page = sysconf(_SC_PAGESIZE)
        if posix_memalign(&buf, <size_t>page if page > 0 else 4096, READ_SIZE) != 0:
            raise MemoryError()
        core._read_buffer = <char *>buf
    return core._read_buffer


cdef inline object read_new_bytes(int fd, Py_ssize_t n, ssize_t *got, bint from_socket):
    """One recv(n) (from_socket) or read(n) on fd into a new bytes object of
    n bytes, shrunk to what came, as the socket module's recv(n) and
    os.read(n) do (no copy out of read_buffer()).  The bytes; or None where
    the call returned 0 or failed: *got says which, errno why."""
    cdef int err
    if af_fails(AF_READ_BUFFER):
        raise MemoryError()
    cdef PyObject *raw = PyBytes_FromStringAndSize_raw(NULL, n)
    if from_socket:
        got[0] = recv(fd, PyBytes_AS_STRING(<object>raw), <size_t>n, 0)
    else:
        got[0] = c_read(fd, PyBytes_AS_STRING(<object>raw), <size_t>n)
    if got[0] <= 0:
        err = libc_errno.errno
        Py_DECREF(<object>raw)   # free() may change errno
        libc_errno.errno = err
        return None
    if got[0] != n:
        _PyBytes_Resize(&raw, got[0])   # on failure: raw freed, set to NULL
    data = <object>raw     # takes a reference of its own
    Py_DECREF(data)        # drop the one raw held
    return data


cdef inline object sock_name(object sock):
    """sock.getsockname(), or None where it fails: what asyncio's
    _SelectorTransport.__init__ records as 'sockname'."""
    try:
        return sock.getsockname()
    except OSError:
        return None


cdef inline object sock_peer(object sock):
    """sock.getpeername(), or None where it fails ('peername', likewise)."""
    try:
        return sock.getpeername()
    except OSError:
        return None


cdef inline int check_loop(object loop, str attribute) except -1:
    """Fail as asyncio's call of `attribute` on its loop fails once
    connection_lost() has cleared it (for calls we make on _core)."""
    if loop is None:
        raise AttributeError(f"'NoneType' object has no attribute '{attribute}'")
    return 0


cdef inline bint begin_closing(LoopCore core, int fd, bint *closing) except -1:
    """`self._closing = True; self._loop._remove_reader(fd)`, unless closing
    already: then False, and nothing is done."""
    if closing[0]:
        return False
    closing[0] = True
    core._remove_fd_handle(fd, POLLER_READ)
    return True


# pause_reading() and resume_reading(), asyncio's, for every reading
# transport: refused in another thread (check_loop_thread()), nothing done
# while closing or in the state asked for already, a debug-mode log line.

cdef inline int pause_reading_on(object transport, LoopCore core, int fd,
                                 bint closing, bint *paused) except -1:
    """`pause_reading()`: stop watching `fd` for reads."""
    check_loop_thread(core)
    if closing or paused[0]:
        return 0
    paused[0] = True
    core._remove_fd_handle(fd, POLLER_READ)
    log_reading(transport, core, "%r pauses reading")
    return 0


cdef inline bint resume_reading_begins(LoopCore core, bint closing,
                                       bint *paused) except -1:
    """`resume_reading()`'s first half: True if the caller is to watch its
    fd for reads again (each transport has its own way), then to call
    log_reading(..., "%r resumes reading"); False, nothing done, otherwise."""
    check_loop_thread(core)
    if closing or not paused[0]:
        return False
    paused[0] = False
    return True


cdef inline int log_reading(object transport, LoopCore core, str message) except -1:
    """asyncio's debug-mode line: `message` % transport."""
    if core._debug:
        from asyncio.log import logger   # debug mode only
        logger.debug(message, transport)
    return 0


cdef inline int drop_writer(object loop, LoopCore core, int fd) except -1:
    """`self._loop._remove_writer(fd)` as _force_close() calls it: on the
    cleared loop it fails as asyncio's."""
    check_loop(loop, '_remove_writer')
    core._remove_fd_handle(fd, POLLER_WRITE)
    return 0


cdef inline int schedule_connection_lost(object loop, LoopCore core, int fd,
                                         object call_connection_lost,
                                         object exc, object context) except -1:
    """The end of close() and _force_close(): nothing more is written (no
    writer), and connection_lost(exc) comes in the next iteration, in the
    transport's context if it has one (asyncio 3.15's socket transports),
    else in a copy of the current one.  On the cleared loop, call_soon fails
    as asyncio's."""
    core._remove_fd_handle(fd, POLLER_WRITE)
    if context is None:
        loop.call_soon(call_connection_lost, exc)
    else:
        loop.call_soon(call_connection_lost, exc, context=context)
    return 0


cdef inline int lose_connection(object loop, LoopCore core, int fd,
                                 bint *closing, Py_ssize_t *conn_lost,
                                 object call_connection_lost,
                                 object exc, object context) except -1:
    """The end of close() (nothing queued) and of _force_close(): nothing
    more is read or written, _conn_lost counts from 1, and connection_lost(exc)
    comes in the next iteration (in `context`, as schedule_connection_lost)."""
    begin_closing(core, fd, closing)
    conn_lost[0] += 1
    schedule_connection_lost(loop, core, fd, call_connection_lost, exc, context)
    return 0


cdef inline int release_fd(LoopCore core, int fd, bint writing) except -1:
    """In _call_connection_lost(), before the file is closed, when something
    is still queued (connection_lost() wrote what could not go out at once):
    the writer may not outlive the file, whose number will be another
    file's.  What is queued stays counted, as in asyncio."""
    if writing:
        core._remove_fd_handle(fd, POLLER_WRITE)
    return 0


cdef inline str selector_transport_repr(object transport, object sock,
                                        bint closing, int fd, object loop,
                                        LoopCore core, Py_ssize_t bufsize):
    """asyncio's _SelectorTransport.__repr__ (the socket transports')."""
    info = [type(transport).__name__]
    if sock is None:
        info.append('closed')
    elif closing:
        info.append('closing')
    info.append(f'fd={fd}')
    # test if the transport was closed
    if loop is not None and not core._closed:
        info.append('read=polling' if fd_watched(core, fd, POLLER_READ)
                    else 'read=idle')
        state = 'polling' if fd_watched(core, fd, POLLER_WRITE) else 'idle'
        info.append(f'write=<{state}, bufsize={bufsize}>')
    return '<{}>'.format(' '.join(info))


cdef inline int warn_unclosed(object transport, object resource) except -1:
    """__del__ of a transport whose file is still open (asyncio's)."""
    # Imported here: a .pxd's module-level imports do not run in the
    # modules that cimport it.
    from warnings import warn
    warn(f"unclosed transport {transport!r}", ResourceWarning, source=transport)
    resource.close()
    return 0
