# cython: freethreading_compatible=True
"""Pipe transports: connect_read_pipe, connect_write_pipe, subprocess pipes.

asyncio's counterparts are _UnixReadPipeTransport and _UnixWritePipeTransport
(unix_events.py): the fd kinds accepted, the order of callbacks, the error
messages and what reaches the protocol are theirs.  What differs is only how
the work is done:

* reads go from read(2) into the loop's 256 KiB read buffer and out as a
  bytes object of the size read (os.read allocates 256 KiB per read and
  shrinks it); while reads bring more than COPY_MAX, that copy would cost
  more than an allocation, and reads go into a bytes object of 127 KiB
  shrunk to fit (as the stream transport's do);
* a write is made at once when nothing is queued, and only the unwritten
  rest is queued: bytes objects by reference (a large write is never
  copied), other buffers as a bytes copy, since the caller may change them
  after write() returns.  asyncio appends everything to one bytearray;
* queued data leaves with one writev() for up to IOV_MAX buffers.

Where asyncio's write pipe would fail once its connection_lost() was
scheduled (abort() after close(), a second abort()), ours does nothing.
(The read pipe has no abort(), as asyncio's has none.)
And data that resume_writing() writes just before it calls close() is
written before the pipe closes (asyncio closes the pipe with it queued).
"""

import os
import stat
import sys

from asyncio import constants as _aio_constants
from asyncio import futures as _aio_futures
from asyncio.log import logger as _logger

from . import _asyncio_compat

cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport (PyBytes_FromStringAndSize, PyBytes_AS_STRING,
                            PyBytes_GET_SIZE, PyBytes_Check)
from libc.errno cimport errno, EIO

from .includes cimport (POLLER_READ, POLLER_WRITE, MINLOOP_IOV_MAX, iovec,
                        c_read, c_write, c_writev)
from .flow_control cimport (water_marks, maybe_pause_protocol,
                            maybe_resume_protocol)
from .loop cimport LoopCore, check_loop_thread, fd_watched
from .oserrors cimport os_error, blocked_or_interrupted
from .fatal_error cimport report_fatal_error
from .lifecycle cimport (READ_SIZE, COPY_MAX, LARGE_READ_SIZE, read_buffer,
                         read_new_bytes, begin_closing, drop_writer,
                         schedule_connection_lost, release_fd, warn_unclosed,
                         pause_reading_on, resume_reading_begins, log_reading)
from .write_queue cimport queue_unsent, fill_iovecs, drop_sent


cdef object _fstat = os.fstat
cdef object _set_blocking = os.set_blocking
cdef object _S_ISFIFO = stat.S_ISFIFO
cdef object _S_ISSOCK = stat.S_ISSOCK
cdef object _S_ISCHR = stat.S_ISCHR
cdef object _set_result_unless_cancelled = _aio_futures._set_result_unless_cancelled
cdef int _LOG_THRESHOLD_FOR_CONNLOST_WRITES = _aio_constants.LOG_THRESHOLD_FOR_CONNLOST_WRITES
# On AIX, polling the write end of a pipe for reading tells nothing about
# the read end (asyncio's comment: the trick works only for sockets there).
cdef bint _READER_TRICK_ON_FIFOS = not sys.platform.startswith('aix')
cdef bint _READING_API = _asyncio_compat.PIPE_READING_API

cdef int _check_loop_open(LoopCore core) except -1:
    # Checked before the pipe is touched (made non-blocking, owned): asyncio
    # fails later, at call_soon(), and its half-made transport then closes
    # the caller's pipe from __del__.
    if core._closed:
        raise RuntimeError('Event loop is closed')
    return 0


cdef str _repr(transport, object pipe, bint closing, int fd, LoopCore core,
               int which, object bufsize):
    # asyncio shows the selector's state while the loop is open, 'open'
    # once it is closed, and 'closed' (twice) after connection_lost().
    info = [type(transport).__name__]
    if pipe is None:
        info.append('closed')
    elif closing:
        info.append('closing')
    info.append(f'fd={fd}')
    if pipe is not None and not core._closed:
        info.append('polling' if fd_watched(core, fd, which) else 'idle')
        if bufsize is not None:
            info.append(f'bufsize={bufsize}')
    elif pipe is not None:
        info.append('open')
    else:
        info.append('closed')
    return '<{}>'.format(' '.join(info))


cdef class ReadPipeTransport(ReadPipeTransportBase):
    """The read end of a pipe, a FIFO, a socket or a character device (a
    pty), as asyncio's _UnixReadPipeTransport."""

    max_size = READ_SIZE

    def __cinit__(self, loop, *args, **kwargs):
        # Every method relies on _core: no instance without a loop.
        self._core = <LoopCore?>loop
        self._fileno = -1

    def __init__(self, loop, pipe, protocol, waiter=None, extra=None):
        if extra is None:
            extra = {}
        self._extra = extra
        extra['pipe'] = pipe
        self._loop = loop
        self._core = <LoopCore?>loop
        self._fileno = -1
        fileno = pipe.fileno()
        self._protocol = protocol
        mode = _fstat(fileno).st_mode
        if not (_S_ISFIFO(mode) or _S_ISSOCK(mode) or _S_ISCHR(mode)):
            self._protocol = None
            raise ValueError("Pipe transport is for pipes/sockets only.")
        _check_loop_open(self._core)
        _set_blocking(fileno, False)
        self._fileno = fileno
        self._pipe = pipe
        loop.call_soon(protocol.connection_made, self)
        # Reading starts only once connection_made() has run, and the
        # waiter is woken after that.
        loop.call_soon(self._start_reading, waiter)

    def __repr__(self):
        return _repr(self, self._pipe, self._closing, self._fileno,
                     self._core, POLLER_READ, None)

    def __del__(self):
        if self._pipe is not None:
            warn_unclosed(self, self._pipe)

    # ------------------------------------------------------------------
    # BaseTransport

    def get_extra_info(self, name, default=None):
        return self._extra.get(name, default)

    def set_protocol(self, protocol):
        check_loop_thread(self._core)
        self._protocol = protocol

    def get_protocol(self):
        return self._protocol

    def is_closing(self):
        return self._closing

    # ------------------------------------------------------------------
    # ReadTransport

    def is_reading(self):
        if not _READING_API:
            raise NotImplementedError
        return not self._paused and not self._closing

    def pause_reading(self):
        pause_reading_on(self, self._core, self._fileno, self._closing, &self._paused)

    def resume_reading(self):
        if resume_reading_begins(self._core, self._closing, &self._paused):
            self._core._add_fd_handle(self._fileno, POLLER_READ,
                                      self._read_ready, (), None)
            log_reading(self, self._core, "%r resumes reading")

    def _start_reading(self, waiter):
        """The first _add_reader(), after connection_made(); then the
        waiter.  If the pipe cannot be watched (epoll_ctl() ENOMEM), the
        transport ends with that error and the waiter raises it, so
        connect_read_pipe() does: asyncio reports it to the exception handler
        and leaves the pipe open and never read, a hang for its reader
        (docs/faults.md).  (Woken as usual, connect_read_pipe() would read
        the closed pipe's fileno() for its debug log.)"""
        try:
            self._add_reader(self._fileno, self._read_ready)
        except OSError as exc:
            self._fatal_error(exc, 'Fatal error: the pipe cannot be watched for reading')
            if waiter is not None and not waiter.cancelled():
                waiter.set_exception(exc)
            return
        if waiter is not None:
            _set_result_unless_cancelled(waiter, None)

    def _add_reader(self, fd, callback):
        # Scheduled by __init__: pause_reading() or close() may have come
        # first.  (3.10's asyncio started reading regardless.)
        if self._paused or self._closing:
            return
        self._core._add_fd_handle(fd, POLLER_READ, callback, (), None)

    def _read_ready(self):
        if self._closing:
            return
        self._read_data()

    cdef _read_data(self):
        cdef ssize_t n
        cdef char *buf
        if self._read_large:
            data = read_new_bytes(self._fileno, LARGE_READ_SIZE, &n, False)
        else:
            buf = read_buffer(self._core)
            n = c_read(self._fileno, buf, READ_SIZE)
            # Out of the loop's buffer before any Python code runs (the
            # lookup of data_received may run some).
            try:
                data = PyBytes_FromStringAndSize(buf, n) if n > 0 else None
            except MemoryError as exc:
                # Read, but not delivered: the stream cannot go on without
                # it.  (asyncio's os.read() fails before reading; its
                # MemoryError goes to the exception handler.)
                self._fatal_error(exc, 'Fatal read error on pipe transport')
                return
        cdef int err = errno
        if n > 0:
            # The next read: no copy while reads are large (lifecycle.pxd).
            self._read_large = n > COPY_MAX
            # Looked up on every read, as asyncio does; what it raises goes
            # to the loop's exception handler, as asyncio's does.
            self._protocol.data_received(data)
        elif n == 0:
            if self._core._debug:
                _logger.info("%r was closed by peer", self)
            begin_closing(self._core, self._fileno, &self._closing)
            self._loop.call_soon(self._protocol.eof_received)
            self._loop.call_soon(self._call_connection_lost, None)
        elif not blocked_or_interrupted(err):
            self._fatal_error(os_error(err), 'Fatal read error on pipe transport')

    # ------------------------------------------------------------------
    # The end: asyncio's methods in asyncio's order, over the helpers of
    # lifecycle.pxd (asyncio's read pipe has no abort())

    def close(self):
        check_loop_thread(self._core)
        if not self._closing:
            self._close(None)

    def _fatal_error(self, exc, message='Fatal error on pipe transport'):
        # EIO is how a pty master reads once its slave is closed: the end of
        # the stream, not an error worth reporting.
        report_fatal_error(self._loop, self._core._debug, self, self._protocol,
                           exc, message,
                           isinstance(exc, OSError) and exc.errno == EIO)
        self._close(exc)

    cdef _close(self, exc):
        # asyncio's _close(): its closing half is the socket transports'.
        begin_closing(self._core, self._fileno, &self._closing)
        self._loop.call_soon(self._call_connection_lost, exc)

    def _call_connection_lost(self, exc):
        if self._loop is None:
            return   # already run
        try:
            self._protocol.connection_lost(exc)
        finally:
            if self._pipe is not None:
                self._pipe.close()
            self._pipe = None
            self._protocol = None
            self._loop = None


cdef class WritePipeTransport(WritePipeTransportBase):
    """The write end of a pipe, a FIFO, a socket or a character device (a
    pty), as asyncio's _UnixWritePipeTransport."""

    def __cinit__(self, loop, *args, **kwargs):
        # Every method relies on _core and _buffer: no instance without them.
        self._core = <LoopCore?>loop
        self._buffer = []
        self._fileno = -1

    def __init__(self, loop, pipe, protocol, waiter=None, extra=None):
        if extra is None:
            extra = {}
        self._extra = extra
        extra['pipe'] = pipe
        self._loop = loop
        self._core = <LoopCore?>loop
        self._high_water, self._low_water = water_marks(None, None)
        self._buffer = []
        self._fileno = -1
        fileno = pipe.fileno()
        self._protocol = protocol
        mode = _fstat(fileno).st_mode
        is_char = _S_ISCHR(mode)
        is_fifo = _S_ISFIFO(mode)
        is_socket = _S_ISSOCK(mode)
        if not (is_char or is_fifo or is_socket):
            self._protocol = None
            raise ValueError("Pipe transport is only for "
                             "pipes, sockets and character devices")
        _check_loop_open(self._core)
        _set_blocking(fileno, False)
        self._fileno = fileno
        self._pipe = pipe
        loop.call_soon(protocol.connection_made, self)
        # The write end of a pipe or a socket polls readable (or in error)
        # once the read end is closed: that is how the transport learns of
        # it without writing.  Watching starts after connection_made().
        if is_socket or (is_fifo and _READER_TRICK_ON_FIFOS):
            loop.call_soon(self._add_reader, fileno, self._read_ready)
        if waiter is not None:
            loop.call_soon(_set_result_unless_cancelled, waiter, None)

    def __repr__(self):
        return _repr(self, self._pipe, self._closing, self._fileno,
                     self._core, POLLER_WRITE, self._buffer_size)

    def __del__(self):
        if self._pipe is not None:
            warn_unclosed(self, self._pipe)

    # ------------------------------------------------------------------
    # BaseTransport

    def get_extra_info(self, name, default=None):
        return self._extra.get(name, default)

    def set_protocol(self, protocol):
        check_loop_thread(self._core)
        self._protocol = protocol

    def get_protocol(self):
        return self._protocol

    def is_closing(self):
        return self._closing

    # ------------------------------------------------------------------
    # The read end's closing

    def _add_reader(self, fd, callback):
        # Scheduled by __init__; the connection may be over by now (asyncio
        # would then watch a closed fd).
        if self._lost:
            return
        self._core._add_fd_handle(fd, POLLER_READ, callback, (), None)

    def _read_ready(self):
        # The read end was closed.
        if self._lost:
            return
        if self._core._debug:
            _logger.info("%r was closed by peer", self)
        if self._buffer_size:
            self._close(BrokenPipeError())
        else:
            self._close(None)

    # ------------------------------------------------------------------
    # WriteTransport

    def write(self, data):
        check_loop_thread(self._core)
        cdef Py_ssize_t written
        if not PyBytes_Check(data) and not isinstance(data, (bytearray, memoryview)):
            # asyncio's check is an assert, with this message.
            raise AssertionError(repr(data))
        if not data:
            return
        if self._conn_lost or self._closing:
            if self._conn_lost >= _LOG_THRESHOLD_FOR_CONNLOST_WRITES:
                _logger.warning('pipe closed by peer or '
                                'os.write(pipe, data) raised exception.')
            self._conn_lost += 1
            return
        if not self._buffer_size:
            written = self._write_now(data)
            if written < 0:
                return
            if not self._queue(data, written):
                return   # all of it went out
            try:
                self._core._add_fd_handle(self._fileno, POLLER_WRITE,
                                          self._write_ready, (), None)
            except BaseException:
                # A closed loop: asyncio fails before it queues anything.
                self._clear_buffer()
                raise
        else:
            self._queue(data, 0)
        self._maybe_pause_protocol()

    cdef Py_ssize_t _write_now(self, data) except -2:
        """write() data at once; the bytes written (0 on EAGAIN), -1 on a
        fatal error."""
        cdef Py_buffer view
        cdef ssize_t n
        cdef int err
        if PyBytes_Check(data):
            n = c_write(self._fileno, PyBytes_AS_STRING(data),
                        <size_t>PyBytes_GET_SIZE(data))
            err = errno
        else:
            try:
                PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                # Not contiguous: os.write() would have failed so.
                self._conn_lost += 1
                self._fatal_error(exc, 'Fatal write error on pipe transport')
                return -1
            n = c_write(self._fileno, view.buf, <size_t>view.len)
            err = errno
            PyBuffer_Release(&view)
        if n >= 0:
            return n
        if blocked_or_interrupted(err):
            return 0
        self._conn_lost += 1
        self._fatal_error(os_error(err), 'Fatal write error on pipe transport')
        return -1

    cdef bint _queue(self, data, Py_ssize_t offset) except -1:
        """Queue data[offset:]; False if there is nothing left to queue."""
        return queue_unsent(self._buffer, &self._buffer_head,
                            &self._buffer_size, data, offset)

    cdef int _flush(self) except -2:
        """writev() what is queued; -1 after a fatal error, else 0."""
        cdef iovec iov[MINLOOP_IOV_MAX]
        cdef Py_ssize_t count
        cdef ssize_t written
        cdef int err
        count = fill_iovecs(self._buffer, self._buffer_head, iov)
        written = c_writev(self._fileno, iov, <int>count)
        err = errno
        if written < 0:
            if blocked_or_interrupted(err):
                return 0
            self._clear_buffer()
            self._conn_lost += 1
            self._core._remove_fd_handle(self._fileno, POLLER_WRITE)
            self._fatal_error(os_error(err), 'Fatal write error on pipe transport')
            return -1
        drop_sent(self._buffer, &self._buffer_head, &self._buffer_size,
                  written, count)
        return 0

    cdef void _clear_buffer(self):
        self._buffer.clear()
        self._buffer_head = 0
        self._buffer_size = 0

    def _write_ready(self):
        if self._lost or not self._buffer_size:
            return
        if self._flush() < 0 or self._buffer_size:
            return
        self._core._remove_fd_handle(self._fileno, POLLER_WRITE)
        # asyncio resumes the protocol only once everything is written,
        # whatever the low-water mark.
        self._maybe_resume_protocol()   # may write more, and close()
        # What resume_writing() wrote and then closed is written first
        # (asyncio closes the pipe at once here, dropping it).
        if self._closing and not self._buffer_size:
            self._core._remove_fd_handle(self._fileno, POLLER_READ)
            self._lost = True
            self._call_connection_lost(None)

    def can_write_eof(self):
        return True

    def write_eof(self):
        check_loop_thread(self._core)
        if self._closing:
            return
        if self._pipe is None:
            raise AssertionError   # asyncio's `assert self._pipe`
        self._closing = True
        if not self._buffer_size:
            self._core._remove_fd_handle(self._fileno, POLLER_READ)
            self._lost = True
            self._loop.call_soon(self._call_connection_lost, None)

    def get_write_buffer_size(self):
        return self._buffer_size

    def get_write_buffer_limits(self):
        return (self._low_water, self._high_water)

    def set_write_buffer_limits(self, high=None, low=None):
        check_loop_thread(self._core)
        self._high_water, self._low_water = water_marks(high, low)
        self._maybe_pause_protocol()

    cdef _maybe_pause_protocol(self):
        maybe_pause_protocol(self._loop, self, self._protocol,
                             self._buffer_size, self._high_water,
                             &self._protocol_paused)

    cdef _maybe_resume_protocol(self):
        maybe_resume_protocol(self._loop, self, self._protocol,
                              self._buffer_size, self._low_water,
                              &self._protocol_paused)

    # ------------------------------------------------------------------
    # The end: asyncio's methods in asyncio's order, over the helpers of
    # lifecycle.pxd

    def close(self):
        check_loop_thread(self._core)
        # What is queued is written first; then connection_lost(None).
        if self._pipe is not None and not self._closing:
            self.write_eof()

    def abort(self):
        check_loop_thread(self._core)
        self._close(None)

    def _fatal_error(self, exc, message='Fatal error on pipe transport'):
        # Called from an exception handler only.
        report_fatal_error(self._loop, self._core._debug, self, self._protocol,
                           exc, message, isinstance(exc, OSError))
        self._close(exc)

    cdef _close(self, exc):
        # asyncio's _close(), the write pipe's _force_close(): closing may
        # be set already (write_eof() keeps the reader while it flushes).
        if self._lost:
            return   # connection_lost() is on its way, or has run
        self._closing = True
        if self._buffer_size:
            self._clear_buffer()
            drop_writer(self._loop, self._core, self._fileno)
        self._core._remove_fd_handle(self._fileno, POLLER_READ)
        self._lost = True
        schedule_connection_lost(self._loop, self._core, self._fileno,
                                 self._call_connection_lost, exc, None)

    def _call_connection_lost(self, exc):
        if self._loop is None:
            return   # already run
        try:
            self._protocol.connection_lost(exc)
        finally:
            release_fd(self._core, self._fileno, self._buffer_size != 0)
            if self._pipe is not None:
                self._pipe.close()
            self._pipe = None
            self._protocol = None
            self._loop = None
