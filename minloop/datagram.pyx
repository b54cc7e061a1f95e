# cython: freethreading_compatible=True
"""DatagramTransport: minloop's compiled UDP (and Unix datagram) transport.

It is asyncio's _SelectorDatagramTransport (selector_events.py) for the
running Python version -- same constructor, callbacks, checks, messages and
flow control -- with its hot paths in C:

* Receiving: recvfrom() into the loop's read buffer, shared by its
  transports (the bytes are copied out before any Python code runs), then
  datagram_received(data, addr).  Several
  datagrams may be read per wake-up, only while that cannot be told apart
  from asyncio's one per wake-up (see _read_ready).
* Sending: sendto() at once; only on EAGAIN is the datagram copied and the
  writer armed, as asyncio does.
* Addresses of AF_INET and AF_INET6 sockets are converted in C, the way the
  socket module converts them (inet_ntop/inet_pton, ports in host order);
  anything the socket module would resolve or reject (host names, '',
  '<broadcast>', scope suffixes, out-of-range numbers, odd types) is passed
  to the socket object's own method, so its errors are the socket module's.
  Other families (AF_UNIX, ...) always use the socket object's methods.
"""

import collections
import socket as _socket_mod

from asyncio import constants as _aio_constants
from asyncio import futures as _aio_futures
from asyncio import trsock as _aio_trsock
from asyncio.log import logger as _logger

from . import _asyncio_compat

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_CheckExact
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.exc cimport PyErr_CheckSignals
from cpython.long cimport PyLong_CheckExact, PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.unicode cimport PyUnicode_CheckExact
from libc.errno cimport errno, EINTR
from libc.string cimport memcmp, memcpy, memset, strlen

from .includes cimport (POLLER_READ, POLLER_WRITE, send, c_recvfrom, c_sendto,
                        MSG_DONTWAIT, AF_INET, AF_INET6, sockaddr,
                        sockaddr_in, sockaddr_in6, ntohs, htons, ntohl, htonl,
                        inet_ntop, inet_pton,
                        PyObject_VectorcallMethod, PyUnicode_AsUTF8AndSize)
from .flow_control cimport (water_marks, maybe_pause_protocol,
                            maybe_resume_protocol)
from .loop cimport (LoopCore, check_loop_thread, timers_scheduled,
                    nothing_runs_before_next_read)
from .fatal_error cimport report_fatal_error
from .lifecycle cimport (READ_SIZE, read_buffer,
                         begin_closing, drop_writer, lose_connection,
                         release_fd, selector_transport_repr, sock_name,
                         sock_peer, warn_unclosed, pause_reading_on,
                         resume_reading_begins, log_reading)
from .oserrors cimport os_error, would_block


cdef enum:
    # Datagrams read per wake-up at most, so one busy socket cannot starve
    # the loop's other fds and timers for long.
    MAX_BATCH = 32
    # Reading on after the first datagram costs a recvfrom() that fails with
    # EAGAIN when nothing else waits -- as much as the read itself.  A
    # transport whose attempt found nothing tries again only after this many
    # wake-ups (a request-response peer rarely has a second datagram waiting).
    PROBE_INTERVAL = 16

cdef bint _SEND_EMPTY = _asyncio_compat.DATAGRAM_SENDS_EMPTY
cdef Py_ssize_t _HEADER_SIZE = _asyncio_compat.DATAGRAM_HEADER_SIZE
cdef bint _SIZE_COUNTED = _asyncio_compat.DATAGRAM_SIZE_COUNTED
cdef bint _FORCE_CLOSE_ZEROES_SIZE = _asyncio_compat.FORCE_CLOSE_ZEROES_SIZE
# Without the reading API, asyncio's _add_reader only looked at _closing,
# which is what the checks below come to, as _paused stays False.
cdef bint _READING_API = _asyncio_compat.DATAGRAM_READING_API

cdef object _deque = collections.deque
cdef object _TransportSocket = _aio_trsock.TransportSocket
cdef object _set_result_unless_cancelled = _aio_futures._set_result_unless_cancelled
cdef Py_ssize_t _LOG_THRESHOLD = _aio_constants.LOG_THRESHOLD_FOR_CONNLOST_WRITES
cdef str _DATAGRAM_RECEIVED = 'datagram_received'
cdef tuple _BYTES_LIKE = (bytes, bytearray, memoryview)


cdef inline long long _small_int(object o):
    # A non-negative exact int's value, or -1 (negative or too large: the
    # socket module is left to reject it with its own error).
    cdef int overflow = 0
    cdef long long v = PyLong_AsLongLongAndOverflow(o, &overflow)
    if overflow:
        return -1
    return v


cdef inline unsigned int _hash_raw(const unsigned char *raw, socklen_t length) noexcept:
    # FNV-1a: cheap, and spreads the port and low address bytes that differ
    # between the peers of one socket.
    cdef unsigned int h = 2166136261u
    cdef socklen_t i
    for i in range(length):
        h = (h ^ raw[i]) * 16777619u
    return h


cdef class DatagramTransport(DatagramTransportBase):
    """asyncio.DatagramTransport over a non-blocking datagram socket."""

    max_size = READ_SIZE

    def __cinit__(self, loop, *args, **kwargs):
        # Every method relies on _core: no instance without it
        # (DatagramTransport.__new__(DatagramTransport) would crash later).
        self._core = <LoopCore?>loop
        self._sock_fd = -1
        self._buffer = _deque()
        memset(self._addr_cache, 0, sizeof(self._addr_cache))
        memset(&self._last_dest, 0, sizeof(self._last_dest))

    def __init__(self, loop, sock, protocol, address=None, waiter=None,
                 extra=None):
        cdef LoopCore core = loop
        # BaseTransport.__init__ and _FlowControlMixin.__init__
        if extra is None:
            extra = {}
        self._extra = extra
        self._loop = loop
        self._core = core
        self._protocol_paused = False
        self._set_write_buffer_limits()
        # _SelectorTransport.__init__
        extra['socket'] = _TransportSocket(sock)
        extra['sockname'] = sock_name(sock)
        if 'peername' not in extra:
            extra['peername'] = sock_peer(sock)
        self._sock = sock
        self._sock_fd = sock.fileno()
        self._family = sock.family
        self._inet = self._family == AF_INET or self._family == AF_INET6
        self._connected = bool(extra['peername'])
        self._protocol_connected = False
        self.set_protocol(protocol)
        self._server = None
        self._buffer = _deque()
        self._conn_lost = 0
        self._closing = False
        self._paused = False
        loop._transports[self._sock_fd] = self
        # _SelectorDatagramTransport.__init__
        self._address = address
        self._buffer_size = 0
        core.call_soon(self._protocol.connection_made, self)
        # only start reading when connection_made() has been called
        core.call_soon(self._begin_reading)
        if waiter is not None:
            # only wake up the waiter when connection_made() has been called
            core.call_soon(_set_result_unless_cancelled, waiter, None)

    def __dealloc__(self):
        self._clear_addr_cache()

    def __del__(self):
        if self._sock is not None:
            warn_unclosed(self, self._sock)

    def __repr__(self):
        return selector_transport_repr(self, self._sock, self._closing,
                                       self._sock_fd, self._loop, self._core,
                                       self._buffer_size)

    # ------------------------------------------------------------------
    # BaseTransport / _SelectorTransport

    def get_protocol(self):
        return self._protocol

    def set_protocol(self, protocol):
        check_loop_thread(self._core)
        self._protocol = protocol
        self._protocol_connected = True

    def is_closing(self):
        return self._closing

    def is_reading(self):
        if not _READING_API:
            raise NotImplementedError
        return not self._closing and not self._paused

    # Without asyncio's reading API, NotImplementedError before the thread
    # check, as asyncio's base class raises it.
    def pause_reading(self):
        if not _READING_API:
            raise NotImplementedError
        pause_reading_on(self, self._core, self._sock_fd, self._closing, &self._paused)

    def resume_reading(self):
        if not _READING_API:
            raise NotImplementedError
        if resume_reading_begins(self._core, self._closing, &self._paused):
            self._start_reading()
            log_reading(self, self._core, "%r resumes reading")

    def _add_reader(self, fd, callback, *args):
        # asyncio's name, scheduled by __init__: start reading unless the
        # transport was paused or closed meanwhile.
        if self._closing or self._paused:
            return
        self._core._add_fd_handle(fd, POLLER_READ, callback, args, None)

    cdef int _start_reading(self) except -1:
        self._add_reader(self._sock_fd, self._read_ready)
        return 0

    def _begin_reading(self):
        """The first _add_reader(), after connection_made().  If the socket
        cannot be watched (epoll_ctl() ENOMEM), the endpoint ends with that
        error: asyncio reports it to the exception handler and leaves the
        endpoint open and deaf, a hang for whoever waits on it
        (docs/faults.md)."""
        try:
            self._start_reading()
        except OSError as exc:
            self._fatal_error(exc, 'Fatal error: the socket cannot be watched for reading')

    # ------------------------------------------------------------------
    # Write flow control (asyncio's _FlowControlMixin)

    def get_write_buffer_size(self):
        return self._buffer_size

    def get_write_buffer_limits(self):
        return (self._low_water, self._high_water)

    def _set_write_buffer_limits(self, high=None, low=None):
        self._high_water, self._low_water = water_marks(high, low)

    def set_write_buffer_limits(self, high=None, low=None):
        check_loop_thread(self._core)
        self._set_write_buffer_limits(high=high, low=low)
        self._maybe_pause_protocol_c()

    def _maybe_pause_protocol(self):
        self._maybe_pause_protocol_c()

    def _maybe_resume_protocol(self):
        self._maybe_resume_protocol_c()

    cdef int _maybe_pause_protocol_c(self) except -1:
        return maybe_pause_protocol(self._loop, self, self._protocol,
                                    self._buffer_size, self._high_water,
                                    &self._protocol_paused)

    cdef int _maybe_resume_protocol_c(self) except -1:
        return maybe_resume_protocol(self._loop, self, self._protocol,
                                     self._buffer_size, self._low_water,
                                     &self._protocol_paused)

    # ------------------------------------------------------------------
    # Receiving

    def _read_ready(self):
        """The reader: deliver what the socket has, as asyncio would.

        asyncio reads one datagram per wake-up.  Reading on after the first
        is indistinguishable from that, for this socket, only while nothing
        could have run in between in asyncio: so we stop as soon as a
        callback is waiting in the ready queue (one queued by
        datagram_received() -- a future's result, call_soon -- or one of
        this iteration still to run: in asyncio both run before the next
        datagram), datagram_received() scheduled a timer (call_later(0)
        would be due before it), paused or closed the transport, stopped the
        loop, or took our reader away; and never read on in debug mode,
        where asyncio times each wake-up as a callback of its own.  Between
        sockets it shows: with datagrams waiting on two, asyncio alternates
        them, we may take several from one first (README).
        """
        cdef LoopCore loop
        cdef char *buf
        cdef sockaddr_storage ss
        cdef socklen_t addrlen
        cdef ssize_t n
        cdef int err, fd, count = 0
        cdef unsigned long long timers_seen
        cdef PyObject *argv[3]

        if self._conn_lost or self._loop is None:
            return
        if not self._inet:
            self._read_ready_py()
            return
        loop = self._core
        buf = read_buffer(loop)
        fd = self._sock_fd
        while True:
            addrlen = sizeof(ss)
            n = c_recvfrom(fd, buf, READ_SIZE, MSG_DONTWAIT,
                           <sockaddr *>&ss, &addrlen)
            if n < 0:
                err = errno
                if err == EINTR:
                    # The socket module runs signal handlers, then retries.
                    PyErr_CheckSignals()
                    continue
                if would_block(err):
                    return
                self._protocol.error_received(os_error(err))
                return
            try:
                # Out of the loop's buffer before any Python code runs.
                data = PyBytes_FromStringAndSize(buf, n)
                addr = self._addr_for(&ss, addrlen)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._fatal_error(exc, 'Fatal read error on datagram transport')
                return
            timers_seen = timers_scheduled(loop)
            # self._protocol.datagram_received(data, addr), looked up on every
            # call as asyncio does, without creating a bound method.
            protocol = self._protocol
            argv[0] = <PyObject *>protocol
            argv[1] = <PyObject *>data
            argv[2] = <PyObject *>addr
            PyObject_VectorcallMethod(_DATAGRAM_RECEIVED, argv, 3, NULL)
            count += 1
            if (count >= MAX_BATCH or self._conn_lost or self._closing
                    or self._paused
                    or not nothing_runs_before_next_read(loop, fd, timers_seen)):
                return
            if count == 1:
                if self._probe_skips:
                    self._probe_skips -= 1
                    return
                # Assume nothing more waits unless the read below finds it.
                self._probe_skips = PROBE_INTERVAL
            elif count == 2:
                self._probe_skips = 0

    cdef int _read_ready_py(self) except -1:
        # asyncio's _read_ready, for families converted by the socket module.
        try:
            data, addr = self._sock.recvfrom(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            self._protocol.error_received(exc)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._fatal_error(exc, 'Fatal read error on datagram transport')
        else:
            self._protocol.datagram_received(data, addr)
        return 0

    cdef object _addr_for(self, const sockaddr_storage *ss, socklen_t length):
        """The socket module's address tuple for a received sockaddr.

        The tuple of each recent peer is kept (tuples of str and int are
        immutable), so a peer that sends again gets the same tuple without
        formatting, and sending to it needs no parsing (_dest_for).
        """
        cdef char host[64]
        cdef const sockaddr_in *sin
        cdef const sockaddr_in6 *sin6
        cdef addr_entry *entry
        cdef unsigned int flowinfo
        if length == 0:
            return None     # as the socket module: no address
        if length > sizeof(entry.raw):
            raise OSError(f'unexpected address length {length}')
        entry = &self._addr_cache[
            _hash_raw(<const unsigned char *>ss, length) % ADDR_CACHE_SIZE]
        if (entry.pyaddr != NULL and entry.len == length
                and memcmp(entry.raw, ss, length) == 0):
            return <object>entry.pyaddr
        if ss.ss_family == AF_INET:
            sin = <const sockaddr_in *>ss
            inet_ntop(AF_INET, &sin.sin_addr, host, sizeof(host))
            addr = (host.decode('ascii'), ntohs(sin.sin_port))
        elif ss.ss_family == AF_INET6:
            sin6 = <const sockaddr_in6 *>ss
            inet_ntop(AF_INET6, &sin6.sin6_addr, host, sizeof(host))
            flowinfo = ntohl(sin6.sin6_flowinfo)
            addr = (host.decode('ascii'), ntohs(sin6.sin6_port), flowinfo,
                    sin6.sin6_scope_id)
            if flowinfo > 0xfffff:
                # The socket module would refuse to send to it: do not
                # remember it as a destination (see _dest_for).
                return addr
        else:
            raise OSError(f'unexpected address family {ss.ss_family}')
        Py_XDECREF(<PyObject *>entry.pyaddr)
        Py_INCREF(addr)
        entry.pyaddr = <void *>addr
        entry.len = length
        memcpy(entry.raw, ss, length)
        return addr

    cdef void _clear_addr_cache(self) noexcept:
        cdef int i
        cdef void *p
        for i in range(ADDR_CACHE_SIZE):
            p = self._addr_cache[i].pyaddr
            self._addr_cache[i].pyaddr = NULL
            Py_XDECREF(<PyObject *>p)
        p = self._last_dest.pyaddr
        self._last_dest.pyaddr = NULL
        Py_XDECREF(<PyObject *>p)

    # ------------------------------------------------------------------
    # Sending

    def sendto(self, data, addr=None):
        check_loop_thread(self._core)
        if not isinstance(data, _BYTES_LIKE):
            raise TypeError(f'data argument must be a bytes-like object, '
                            f'not {type(data).__name__!r}')
        if not _SEND_EMPTY and not data:
            return

        if self._address:
            if addr not in (None, self._address):
                raise ValueError(
                    f'Invalid address: must be None or {self._address}')
            addr = self._address

        if self._conn_lost and self._address:
            if self._conn_lost >= _LOG_THRESHOLD:
                _logger.warning('socket.send() raised exception.')
            self._conn_lost += 1
            return

        if not self._buffer:
            # Attempt to send it right away first.
            try:
                if self._send_now(data, addr):
                    return
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as exc:
                self._protocol.error_received(exc)
                return
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._fatal_error(
                    exc, 'Fatal write error on datagram transport')
                return
            self._core._add_fd_handle(self._sock_fd, POLLER_WRITE,
                                      self._sendto_ready, (), None)

        # Ensure that what we buffer is immutable.
        self._buffer.append((bytes(data), addr))
        self._buffer_size += len(data) + _HEADER_SIZE
        self._maybe_pause_protocol_c()

    def _sendto_ready(self):
        cdef Py_ssize_t size
        if self._loop is None:
            return      # connection_lost() has run
        while self._buffer:
            data, addr = self._buffer.popleft()
            size = len(data) + _HEADER_SIZE
            self._buffer_size -= size
            try:
                if not self._send_now(data, addr):
                    # Try again later.
                    self._buffer.appendleft((data, addr))
                    self._buffer_size += size
                    break
            except (BlockingIOError, InterruptedError):
                self._buffer.appendleft((data, addr))  # Try again later.
                self._buffer_size += size
                break
            except OSError as exc:
                self._protocol.error_received(exc)
                return
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._fatal_error(
                    exc, 'Fatal write error on datagram transport')
                return

        self._maybe_resume_protocol_c()  # May append to buffer.
        if not self._buffer:
            self._core._remove_fd_handle(self._sock_fd, POLLER_WRITE)
            if self._closing:
                self._call_connection_lost(None)

    cdef int _send_now(self, object data, object addr) except -1:
        """Send one datagram: 1 if sent, 0 if the socket would block.

        Errors are raised as the socket module raises them: what asyncio's
        self._sock.send(data) / self._sock.sendto(data, addr) would do.
        """
        cdef const addr_entry *dest = NULL
        cdef Py_buffer view
        cdef int rc
        if self._sock is None:
            # Closed: asyncio's call on the None socket fails so.
            raise AttributeError(
                f"'NoneType' object has no attribute "
                f"'{'send' if self._connected else 'sendto'}'")
        if not self._connected:
            if not self._inet:
                self._sock.sendto(data, addr)
                return 1
            dest = self._dest_for(addr)
            if dest == NULL:
                self._sock.sendto(data, addr)
                return 1
        if PyBytes_CheckExact(data):
            return self._send_raw(PyBytes_AS_STRING(data),
                                  PyBytes_GET_SIZE(data), dest)
        try:
            PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        except BufferError:
            # Not contiguous: let the socket module raise its error.
            if dest == NULL:
                self._sock.send(data)
            else:
                self._sock.sendto(data, addr)
            return 1
        try:
            rc = self._send_raw(<const char *>view.buf, view.len, dest)
        finally:
            PyBuffer_Release(&view)
        return rc

    cdef int _send_raw(self, const char *buf, Py_ssize_t size,
                       const addr_entry *dest) except -1:
        cdef ssize_t n
        cdef int err
        while True:
            # MSG_DONTWAIT: never block the loop, even on a socket someone
            # made blocking.
            if dest == NULL:
                n = send(self._sock_fd, buf, size, MSG_DONTWAIT)
            else:
                n = c_sendto(self._sock_fd, buf, size, MSG_DONTWAIT,
                             <const sockaddr *>dest.raw, dest.len)
            if n >= 0:
                return 1
            err = errno
            if err == EINTR:
                PyErr_CheckSignals()
                continue
            if would_block(err):
                return 0
            raise os_error(err)

    cdef const addr_entry *_dest_for(self, object addr) except? NULL:
        """The sockaddr for a destination, or NULL to let the socket module
        convert it (anything but a numeric address in canonical types).

        A tuple made by _addr_for (the peer a server answers) is found by
        identity; it is what the socket module would parse it back to.
        """
        cdef addr_entry scratch
        cdef int i
        cdef Py_ssize_t n, hlen
        cdef const char *host
        cdef long long port, flowinfo = 0, scope_id = 0
        cdef sockaddr_in *sin
        cdef sockaddr_in6 *sin6
        for i in range(ADDR_CACHE_SIZE):
            if self._addr_cache[i].pyaddr == <void *>addr:
                return &self._addr_cache[i]
        if self._last_dest.pyaddr == <void *>addr:
            return &self._last_dest
        # Parse: exact types only (the socket module converts subclasses
        # and __index__ objects its own way, and reports the errors).
        if not PyTuple_CheckExact(addr):
            return NULL
        n = PyTuple_GET_SIZE(addr)
        if self._family == AF_INET:
            if n != 2:
                return NULL
        elif n < 2 or n > 4:
            return NULL
        h = <object>PyTuple_GET_ITEM(addr, 0)
        p = <object>PyTuple_GET_ITEM(addr, 1)
        if not PyUnicode_CheckExact(h) or not PyLong_CheckExact(p):
            return NULL
        port = _small_int(p)
        if port < 0 or port > 0xffff:
            return NULL
        if n > 2:
            f = <object>PyTuple_GET_ITEM(addr, 2)
            if not PyLong_CheckExact(f):
                return NULL
            flowinfo = _small_int(f)
            if flowinfo < 0 or flowinfo > 0xfffff:
                return NULL
        if n > 3:
            s = <object>PyTuple_GET_ITEM(addr, 3)
            if not PyLong_CheckExact(s):
                return NULL
            scope_id = _small_int(s)
            if scope_id < 0 or scope_id > 0xffffffff:
                return NULL
        host = PyUnicode_AsUTF8AndSize(h, &hlen)
        if <size_t>hlen != strlen(host):
            return NULL     # an embedded NUL: the socket module refuses it
        # Parse into a scratch entry: _last_dest must stay whole (its tuple
        # and its bytes agree) if this fails.
        memset(&scratch, 0, sizeof(scratch))
        if self._family == AF_INET:
            sin = <sockaddr_in *>scratch.raw
            if inet_pton(AF_INET, host, &sin.sin_addr) != 1:
                return NULL
            sin.sin_family = AF_INET
            sin.sin_port = htons(<unsigned short>port)
            scratch.len = sizeof(sockaddr_in)
        else:
            sin6 = <sockaddr_in6 *>scratch.raw
            if inet_pton(AF_INET6, host, &sin6.sin6_addr) != 1:
                return NULL
            sin6.sin6_family = AF_INET6
            sin6.sin6_port = htons(<unsigned short>port)
            sin6.sin6_flowinfo = htonl(<unsigned int>flowinfo)
            sin6.sin6_scope_id = <unsigned int>scope_id
            scratch.len = sizeof(sockaddr_in6)
        # Remember the caller's tuple: sending to the same object again
        # (a constant destination) skips the parsing.
        Py_XDECREF(<PyObject *>self._last_dest.pyaddr)
        Py_INCREF(addr)
        scratch.pyaddr = <void *>addr
        self._last_dest = scratch
        return &self._last_dest

    # ------------------------------------------------------------------
    # The end: asyncio's methods in asyncio's order, over the helpers of
    # lifecycle.pxd

    def close(self):
        check_loop_thread(self._core)
        if not begin_closing(self._core, self._sock_fd, &self._closing):
            return
        if not self._buffer:
            # Else _sendto_ready() calls connection_lost() once all is sent.
            lose_connection(self._loop, self._core, self._sock_fd,
                            &self._closing, &self._conn_lost,
                            self._call_connection_lost, None, None)

    def abort(self):
        check_loop_thread(self._core)
        self._force_close(None)

    def _fatal_error(self, exc, message='Fatal error on transport'):
        # Should be called from exception handler only.  (sendto() after
        # connection_lost() gets here: its send on the None socket failed,
        # and the report fails on the None loop, as asyncio's.)
        report_fatal_error(self._loop, self._core._debug, self, self._protocol,
                           exc, message, isinstance(exc, OSError))
        self._force_close(exc)

    def _force_close(self, exc):
        if self._conn_lost:
            return
        if self._buffer:
            self._buffer.clear()
            if not _SIZE_COUNTED or _FORCE_CLOSE_ZEROES_SIZE:
                self._buffer_size = 0
            drop_writer(self._loop, self._core, self._sock_fd)
        lose_connection(self._loop, self._core, self._sock_fd,
                        &self._closing, &self._conn_lost,
                        self._call_connection_lost, exc, None)

    def _call_connection_lost(self, exc):
        try:
            if self._protocol_connected:
                self._protocol.connection_lost(exc)
        finally:
            release_fd(self._core, self._sock_fd, bool(self._buffer))
            self._sock.close()
            self._sock = None
            self._protocol = None
            self._loop = None
            self._clear_addr_cache()
