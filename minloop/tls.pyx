# cython: freethreading_compatible=True
"""TLS over minloop's transports: asyncio's SSL protocol, compiled.

asyncio (3.11+) does TLS as a protocol that sits between the socket
transport and the application's protocol (asyncio/sslproto.py): ciphertext
from the socket goes into an ssl.MemoryBIO, an ssl.SSLObject turns it into
plaintext for the application, and the application's writes go the other
way.  SSLProtocol and SSLProtocolTransport here are that layer with the same states,
the same order of callbacks, the same flow control and the same errors and
messages; what differs is how the work is done:

* the state machine is C: states are small integers, the object's fields
  are typed, and calls between its parts are C calls;
* plaintext is decrypted straight into the one bytes object data_received
  gets, where asyncio allocates 256 KiB per record and then joins them;
* a read is made only when there is something to read, not until
  SSLWantReadError is raised;
* a plain ssl.SSLObject is driven through the C object underneath it (the
  SSLObject methods are one-line Python wrappers around it).  An
  SSLContext.sslobject_class subclass keeps its own methods and is called
  exactly as asyncio calls it: read(max_size) until SSLWantReadError for a
  data_received() app, so a subclass's read() never sees our buffers.

Where asyncio's versions differ, this follows 3.13 (abort passes its
exception to the transport's _force_close; 3.11's _SSLProtocolTransport
called _abort with an argument it did not take), except that an abort
with no exception ends the socket transport with abort() where the running
asyncio's does (before 3.13), _force_close(None) where it does not: the
same end for a real transport.  On Python 3.10, whose
asyncio has the older TLS layer (no shutdown timeout; it can hang in a
TLS 1.3 shutdown), minloop runs this one too, with 3.11's defaults.
"""

import collections
import ssl
import warnings

from asyncio import constants as _aio_constants
from asyncio import exceptions as _aio_exceptions
from asyncio import protocols as _aio_protocols
from asyncio.log import logger as _logger

from . import _asyncio_compat

cimport cython
from cpython.buffer cimport PyBUF_WRITE
from cpython.bytes cimport PyBytes_AS_STRING, _PyBytes_Resize
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.ref cimport PyObject, Py_XDECREF

from .flow_control cimport water_marks
from .includes cimport PyBytes_FromStringAndSize_raw
from .loop cimport check_loop_thread
from .transport_bases cimport BufferedProtocolBase, TLSTransportBase


cdef object _SSLAgainErrors = (ssl.SSLWantReadError, ssl.SSLSyscallError)
cdef object _SSLError = ssl.SSLError
cdef object _CertificateError = ssl.CertificateError
cdef object _SSLObject = ssl.SSLObject
cdef object _MemoryBIO = ssl.MemoryBIO
cdef object _BufferedProtocol = _aio_protocols.BufferedProtocol
cdef object _CancelledError = _aio_exceptions.CancelledError
cdef object _TimeoutError = _aio_exceptions.TimeoutError
cdef bint _CLOSING_FOLLOWS_TRANSPORT = _asyncio_compat.TLS_CLOSING_FOLLOWS_TRANSPORT
cdef bint _ABORT_PASSES_EXC = _asyncio_compat.TLS_ABORT_PASSES_EXC
cdef bint _SHUTDOWN_TIMEOUT_COVERS_CLOSE = _asyncio_compat.TLS_SHUTDOWN_TIMEOUT_COVERS_CLOSE
cdef object _deque = collections.deque
cdef object _warn = warnings.warn
cdef int _LOG_THRESHOLD_FOR_CONNLOST_WRITES = _aio_constants.LOG_THRESHOLD_FOR_CONNLOST_WRITES
# asyncio 3.11's constants (3.10 lacks them): seconds, and KiB of buffer.
cdef object _SSL_SHUTDOWN_TIMEOUT = _asyncio_compat.SSL_SHUTDOWN_TIMEOUT
cdef int _HIGH_WATER_SSL_READ = _asyncio_compat.FLOW_CONTROL_HIGH_WATER_SSL_READ
cdef int _HIGH_WATER_SSL_WRITE = _asyncio_compat.FLOW_CONTROL_HIGH_WATER_SSL_WRITE

# The most plaintext one read returns, and the size of the ciphertext buffer
# handed to the socket transport: asyncio's SSLProtocol.max_size.
cdef enum:
    MAX_SIZE = 256 * 1024


# asyncio's SSLProtocolState, in the order of its life.
cdef enum TLSState:
    UNWRAPPED
    DO_HANDSHAKE
    WRAPPED
    FLUSHING
    SHUTDOWN

# Names as asyncio's enum prints them, for the same error messages.
cdef tuple _STATE_NAMES = (
    'SSLProtocolState.UNWRAPPED', 'SSLProtocolState.DO_HANDSHAKE',
    'SSLProtocolState.WRAPPED', 'SSLProtocolState.FLUSHING',
    'SSLProtocolState.SHUTDOWN')

# asyncio's AppProtocolState: INIT -connection_made-> CON_MADE
# [-eof_received-> EOF] -connection_lost-> CON_LOST.
cdef enum AppState:
    APP_INIT
    APP_CON_MADE
    APP_EOF
    APP_CON_LOST


cdef object _default_client_context(bint server_side, server_hostname):
    if server_side:
        raise ValueError('Server side SSL needs a valid SSLContext')
    # ssl=True on the client side: the default context, which verifies.
    context = ssl.create_default_context()
    if not server_hostname:
        context.check_hostname = False
    return context


# ----------------------------------------------------------------------
# The protocol between the socket transport and the application


@cython.final
cdef class SSLProtocol(BufferedProtocolBase):
    """asyncio's SSLProtocol: a BufferedProtocol for the socket transport."""

    cdef:
        object __weakref__
        object _loop
        readonly object _transport             # the socket transport below
        readonly object _app_protocol
        readonly object _app_transport  # a SSLProtocolTransport, or None
        bint _app_transport_created
        bint _app_protocol_is_buffer
        object _app_protocol_get_buffer
        object _app_protocol_buffer_updated
        object _waiter

        object _sslcontext
        object _ssl_obj               # the SSLObject (property _sslobj)
        bint _sslobj_is_raw           # a plain SSLObject: _sslobj_* are its
        object _sslobj_read           # C object's methods, else its own
        object _sslobj_write
        object _sslobj_pending
        object _incoming              # ciphertext from the peer
        object _outgoing              # ciphertext for the peer
        object _incoming_write
        object _outgoing_read
        bint _server_side
        object _server_hostname
        dict _extra

        # Ciphertext from the socket transport lands here (get_buffer), and
        # is copied into _incoming at once (buffer_updated).
        object _ssl_buffer_view

        object _write_backlog         # app data not yet taken by SSL
        Py_ssize_t _write_buffer_size

        TLSState _state
        AppState _app_state
        Py_ssize_t _conn_lost
        bint _eof_received

        object _ssl_handshake_timeout
        object _ssl_shutdown_timeout
        object _handshake_start_time
        object _handshake_timeout_handle
        object _shutdown_timeout_handle

        bint _ssl_writing_paused      # the socket transport's buffer is full
        # The application paused reading (readable, as asyncio's: code
        # waits for it, CPython's test_server_context among them).
        readonly bint _app_reading_paused
        bint _ssl_reading_paused      # we paused the socket transport
        bint _app_writing_paused      # we paused the application
        Py_ssize_t _incoming_high_water
        Py_ssize_t _incoming_low_water
        Py_ssize_t _outgoing_high_water
        Py_ssize_t _outgoing_low_water

    max_size = MAX_SIZE

    def __init__(self, loop, app_protocol, sslcontext, waiter,
                 server_side=False, server_hostname=None,
                 call_connection_made=True,
                 ssl_handshake_timeout=None,
                 ssl_shutdown_timeout=None):
        if ssl_handshake_timeout is None:
            ssl_handshake_timeout = _aio_constants.SSL_HANDSHAKE_TIMEOUT
        elif ssl_handshake_timeout <= 0:
            raise ValueError(
                f"ssl_handshake_timeout should be a positive number, "
                f"got {ssl_handshake_timeout}")
        if ssl_shutdown_timeout is None:
            ssl_shutdown_timeout = _SSL_SHUTDOWN_TIMEOUT
        elif ssl_shutdown_timeout <= 0:
            raise ValueError(
                f"ssl_shutdown_timeout should be a positive number, "
                f"got {ssl_shutdown_timeout}")
        if not sslcontext:
            sslcontext = _default_client_context(server_side, server_hostname)

        self._ssl_buffer_view = memoryview(bytearray(MAX_SIZE))

        self._server_side = server_side
        if server_hostname and not server_side:
            self._server_hostname = server_hostname
        else:
            self._server_hostname = None
        self._sslcontext = sslcontext
        # More is added when the handshake completes.
        self._extra = {'sslcontext': sslcontext}

        self._write_backlog = _deque()
        self._write_buffer_size = 0

        self._waiter = waiter
        self._loop = loop
        self._set_app_protocol(app_protocol)
        self._app_transport = None
        self._app_transport_created = False
        self._transport = None
        self._ssl_handshake_timeout = ssl_handshake_timeout
        self._ssl_shutdown_timeout = ssl_shutdown_timeout

        self._incoming = _MemoryBIO()
        self._outgoing = _MemoryBIO()
        self._incoming_write = self._incoming.write
        self._outgoing_read = self._outgoing.read
        self._state = UNWRAPPED
        self._conn_lost = 0
        self._app_state = APP_INIT if call_connection_made else APP_CON_MADE
        self._use_sslobj(sslcontext.wrap_bio(
            self._incoming, self._outgoing,
            server_side=self._server_side,
            server_hostname=self._server_hostname))

        self._ssl_writing_paused = False
        self._app_reading_paused = False
        self._ssl_reading_paused = False
        self._set_read_buffer_limits()
        self._eof_received = False
        self._app_writing_paused = False
        self._set_write_buffer_limits()
        self._get_app_transport()

    # ------------------------------------------------------------------
    # What asyncio's SSLProtocol offers its callers

    cdef _set_app_protocol(self, app_protocol):
        self._app_protocol = app_protocol
        if (hasattr(app_protocol, 'get_buffer') and
                isinstance(app_protocol, _BufferedProtocol)):
            self._app_protocol_get_buffer = app_protocol.get_buffer
            self._app_protocol_buffer_updated = app_protocol.buffer_updated
            self._app_protocol_is_buffer = True
        else:
            self._app_protocol_get_buffer = None
            self._app_protocol_buffer_updated = None
            self._app_protocol_is_buffer = False

    cdef _wakeup_waiter(self, exc=None):
        if self._waiter is None:
            return
        if not self._waiter.cancelled():
            if exc is not None:
                self._waiter.set_exception(exc)
            else:
                self._waiter.set_result(None)
        self._waiter = None

    cdef _get_app_transport(self):
        if self._app_transport is None:
            if self._app_transport_created:
                raise RuntimeError('Creating _SSLProtocolTransport twice')
            self._app_transport = SSLProtocolTransport(self._loop, self)
            self._app_transport_created = True
        return self._app_transport

    # ------------------------------------------------------------------
    # BufferedProtocol, as the socket transport calls it

    def connection_made(self, transport):
        self._transport = transport
        self._start_handshake()

    def connection_lost(self, exc):
        self._write_backlog.clear()
        self._outgoing_read()
        self._conn_lost += 1

        # So that the app transport does not warn when it is collected.
        if self._app_transport is not None:
            self._app_transport._closed = True

        if self._state != DO_HANDSHAKE:
            if self._app_state == APP_CON_MADE or self._app_state == APP_EOF:
                self._app_state = APP_CON_LOST
                self._loop.call_soon(self._app_protocol.connection_lost, exc)
        self._set_state(UNWRAPPED)
        self._transport = None
        self._app_transport = None
        self._app_protocol = None
        self._app_protocol_get_buffer = None
        self._app_protocol_buffer_updated = None
        self._wakeup_waiter(exc)

        if self._shutdown_timeout_handle:
            self._shutdown_timeout_handle.cancel()
            self._shutdown_timeout_handle = None
        if self._handshake_timeout_handle:
            self._handshake_timeout_handle.cancel()
            self._handshake_timeout_handle = None

    def get_buffer(self, Py_ssize_t n):
        # The whole buffer for any hint, as asyncio's does.
        return self._ssl_buffer_view

    def buffer_updated(self, Py_ssize_t nbytes):
        self._incoming_write(self._ssl_buffer_view[:nbytes])
        self._incoming_received()

    def data_received(self, data):
        """Ciphertext from a transport that calls data_received(), as
        asyncio's transports did for its TLS layer before 3.11 (a plain
        Protocol then): the same as get_buffer() and buffer_updated()."""
        self._incoming_write(data)
        self._incoming_received()

    cdef _incoming_received(self):
        if self._state == WRAPPED:
            self._do_read()
        elif self._state == DO_HANDSHAKE:
            self._do_handshake()
        elif self._state == FLUSHING:
            self._do_flush()
        elif self._state == SHUTDOWN:
            self._do_shutdown()

    def eof_received(self):
        self._eof_received = True
        try:
            if self._loop.get_debug():
                _logger.debug("%r received EOF", self)

            if self._state == DO_HANDSHAKE:
                self._on_handshake_complete(ConnectionResetError)
            elif self._state == WRAPPED:
                self._set_state(FLUSHING)
                if self._app_reading_paused:
                    return True
                self._do_flush()
            elif self._state == FLUSHING:
                self._do_write()
                self._set_state(SHUTDOWN)
                self._do_shutdown()
            elif self._state == SHUTDOWN:
                self._do_shutdown()
        except Exception:
            self._transport.close()
            raise

    # The socket transport's write flow control.

    def pause_writing(self):
        assert not self._ssl_writing_paused
        self._ssl_writing_paused = True

    def resume_writing(self):
        assert self._ssl_writing_paused
        self._ssl_writing_paused = False
        self._process_outgoing()

    # ------------------------------------------------------------------
    # State

    cdef _use_sslobj(self, sslobj):
        self._ssl_obj = sslobj
        self._sslobj_is_raw = type(sslobj) is _SSLObject
        raw = sslobj._sslobj if self._sslobj_is_raw else sslobj
        self._sslobj_read = raw.read
        self._sslobj_write = raw.write
        self._sslobj_pending = raw.pending

    @property
    def _sslobj(self):
        return self._ssl_obj

    @_sslobj.setter
    def _sslobj(self, sslobj):
        # CPython's tests put a mock in its place.
        self._use_sslobj(sslobj)

    # asyncio's MemoryBIOs, by its names: its start_tls() feeds data a
    # StreamReader buffered before the upgrade into _incoming (3.14), and
    # CPython's tests put a mock in _outgoing's place (3.14).  The setters
    # keep the bound methods the protocol calls in step.
    @property
    def _incoming(self):
        return self._incoming

    @_incoming.setter
    def _incoming(self, bio):
        self._incoming = bio
        self._incoming_write = bio.write

    @property
    def _outgoing(self):
        return self._outgoing

    @_outgoing.setter
    def _outgoing(self, bio):
        self._outgoing = bio
        self._outgoing_read = bio.read

    # cpdef: asyncio's tests and tools call these on the protocol.
    cpdef _get_extra_info(self, name, default=None):
        if name in self._extra:
            return self._extra[name]
        if self._transport is not None:
            return self._transport.get_extra_info(name, default)
        return default

    cpdef bint _is_transport_closing(self):
        return self._transport is not None and self._transport.is_closing()

    cdef int _set_state(self, TLSState new_state) except -1:
        cdef bint allowed = (
            new_state == UNWRAPPED
            or (self._state == UNWRAPPED and new_state == DO_HANDSHAKE)
            or (self._state == DO_HANDSHAKE and new_state == WRAPPED)
            or (self._state == WRAPPED and new_state == FLUSHING)
            or (self._state == FLUSHING and new_state == SHUTDOWN))
        if not allowed:
            raise RuntimeError('cannot switch state from {} to {}'.format(
                _STATE_NAMES[self._state], _STATE_NAMES[new_state]))
        self._state = new_state
        return 0

    # ------------------------------------------------------------------
    # Handshake

    cdef _start_handshake(self):
        if self._loop.get_debug():
            _logger.debug("%r starts SSL handshake", self)
            self._handshake_start_time = self._loop.time()
        else:
            self._handshake_start_time = None
        self._set_state(DO_HANDSHAKE)
        self._handshake_timeout_handle = self._loop.call_later(
            self._ssl_handshake_timeout, self._check_handshake_timeout)
        self._do_handshake()

    def _check_handshake_timeout(self):
        if self._state == DO_HANDSHAKE:
            msg = (f"SSL handshake is taking longer than "
                   f"{self._ssl_handshake_timeout} seconds: "
                   f"aborting the connection")
            self._fatal_error(ConnectionAbortedError(msg))

    cdef _do_handshake(self):
        try:
            self._ssl_obj.do_handshake()
        except _SSLAgainErrors:
            self._process_outgoing()
        except _SSLError as exc:
            self._on_handshake_complete(exc)
        else:
            self._on_handshake_complete(None)

    cdef _on_handshake_complete(self, handshake_exc):
        if self._handshake_timeout_handle is not None:
            self._handshake_timeout_handle.cancel()
            self._handshake_timeout_handle = None

        sslobj = self._ssl_obj
        try:
            if handshake_exc is None:
                self._set_state(WRAPPED)
            else:
                raise handshake_exc
            peercert = sslobj.getpeercert()
        except Exception as exc:
            handshake_exc = None
            self._set_state(UNWRAPPED)
            if isinstance(exc, _CertificateError):
                msg = 'SSL handshake failed on verifying the certificate'
            else:
                msg = 'SSL handshake failed'
            self._fatal_error(exc, msg)
            self._wakeup_waiter(exc)
            return

        if self._loop.get_debug():
            dt = self._loop.time() - self._handshake_start_time
            _logger.debug("%r: SSL handshake took %.1f ms", self, dt * 1e3)

        self._extra.update(peercert=peercert,
                           cipher=sslobj.cipher(),
                           compression=sslobj.compression(),
                           ssl_object=sslobj)
        if self._app_state == APP_INIT:
            self._app_state = APP_CON_MADE
            self._app_protocol.connection_made(self._get_app_transport())
        self._wakeup_waiter()
        self._do_read()

    # ------------------------------------------------------------------
    # Shutdown

    cdef _start_shutdown(self):
        if self._state in (FLUSHING, SHUTDOWN, UNWRAPPED):
            return
        if self._app_transport is not None:
            self._app_transport._closed = True
        if self._state == DO_HANDSHAKE:
            self._abort(None)
        else:
            self._set_state(FLUSHING)
            self._shutdown_timeout_handle = self._loop.call_later(
                self._ssl_shutdown_timeout, self._check_shutdown_timeout)
            self._do_flush()

    def _check_shutdown_timeout(self):
        if self._state in (FLUSHING, SHUTDOWN):
            self._transport._force_close(
                _TimeoutError('SSL shutdown timed out'))

    cdef _do_flush(self):
        self._do_read()
        self._set_state(SHUTDOWN)
        self._do_shutdown()

    cdef _do_shutdown(self):
        try:
            if not self._eof_received:
                self._ssl_obj.unwrap()
        except _SSLAgainErrors:
            self._process_outgoing()
        except _SSLError as exc:
            self._on_shutdown_complete(exc)
        else:
            self._process_outgoing()
            self._call_eof_received()
            self._on_shutdown_complete(None)

    cdef _on_shutdown_complete(self, shutdown_exc):
        if shutdown_exc or not _SHUTDOWN_TIMEOUT_COVERS_CLOSE:
            if self._shutdown_timeout_handle is not None:
                self._shutdown_timeout_handle.cancel()
                self._shutdown_timeout_handle = None
        if shutdown_exc:
            self._fatal_error(shutdown_exc)
        else:
            if (_SHUTDOWN_TIMEOUT_COVERS_CLOSE
                    and self._shutdown_timeout_handle is None):
                # The socket transport's close() flushes its queue first,
                # which a peer that does not read delays forever: the timeout
                # runs on until connection_lost(), started here if the peer
                # began the shutdown.
                self._shutdown_timeout_handle = self._loop.call_later(
                    self._ssl_shutdown_timeout, self._check_shutdown_timeout)
            self._loop.call_soon(self._transport.close)

    cdef _abort(self, exc):
        self._set_state(UNWRAPPED)
        if self._transport is not None:
            if exc is None and not _ABORT_PASSES_EXC:
                # asyncio before 3.13 (the same end on a real transport).
                self._transport.abort()
            else:
                self._transport._force_close(exc)

    # ------------------------------------------------------------------
    # Application data out: app -> SSL -> socket transport

    cdef _write_appdata(self, list_of_data):
        if self._state == FLUSHING or self._state == SHUTDOWN or self._state == UNWRAPPED:
            if self._conn_lost >= _LOG_THRESHOLD_FOR_CONNLOST_WRITES:
                _logger.warning('SSL connection is closed')
            self._conn_lost += 1
            return

        for data in list_of_data:
            self._write_backlog.append(data)
            self._write_buffer_size += len(data)

        try:
            if self._state == WRAPPED:
                self._do_write()
        except Exception as ex:
            self._fatal_error(ex, 'Fatal error on SSL protocol')

    cdef _do_write(self):
        cdef Py_ssize_t count, data_len
        backlog = self._write_backlog
        try:
            while backlog:
                data = backlog[0]
                count = self._sslobj_write(data)
                data_len = len(data)
                if count < data_len:
                    backlog[0] = data[count:]
                    self._write_buffer_size -= count
                else:
                    backlog.popleft()
                    self._write_buffer_size -= data_len
        except _SSLAgainErrors:
            pass
        self._process_outgoing()

    cdef _process_outgoing(self):
        if not self._ssl_writing_paused:
            data = self._outgoing_read()
            if len(<bytes>data):
                self._transport.write(data)
        self._control_app_writing()

    # ------------------------------------------------------------------
    # Application data in: socket transport -> SSL -> app

    def _do_read(self):
        # A def method: the buffered path schedules it with call_soon.
        if self._state != WRAPPED and self._state != FLUSHING:
            return
        try:
            if not self._app_reading_paused:
                if self._app_protocol_is_buffer:
                    self._do_read_buffered()
                elif self._sslobj_is_raw:
                    self._do_read_copied()
                else:
                    self._do_read_chunks()
                if self._write_backlog:
                    self._do_write()
                else:
                    self._process_outgoing()
            self._control_ssl_reading()
        except Exception as ex:
            self._fatal_error(ex, 'Fatal error on SSL protocol')

    cdef inline bint _may_read(self) except -1:
        # A read can give something only with ciphertext waiting in
        # _incoming or plaintext decrypted and not yet taken; otherwise it
        # raises SSLWantReadError, which costs more than asking first.  A
        # subclass is read as asyncio reads it: until that error.
        if not self._sslobj_is_raw:
            return True
        return self._incoming.pending > 0 or self._sslobj_pending() > 0

    cdef _do_read_buffered(self):
        cdef Py_ssize_t offset = 0, count = 1, wants
        buf = self._app_protocol_get_buffer(self._incoming.pending)
        wants = len(buf)
        try:
            if self._may_read():
                count = self._sslobj_read(wants, buf)
                if count > 0:
                    offset = count
                    # Slices of a view: asyncio slices buf itself, and a
                    # bytearray's slice is a copy, so what it reads after a
                    # short read is lost.  The view is released before
                    # buffer_updated(), which may resize a bytearray.
                    with memoryview(buf) as view:
                        while offset < wants:
                            if not self._may_read():
                                break
                            count = self._sslobj_read(wants - offset, view[offset:])
                            if count > 0:
                                offset += count
                            else:
                                break
                        else:
                            self._loop.call_soon(self._do_read)
        except _SSLAgainErrors:
            pass
        if offset > 0:
            self._app_protocol_buffer_updated(offset)
        if not count:
            # close_notify
            self._call_eof_received()
            self._start_shutdown()

    cdef _do_read_copied(self):
        # Everything readable now reaches data_received in one call, as in
        # asyncio.  Records are decrypted straight into the bytes object
        # data_received gets, sized for the ciphertext waiting (plaintext is
        # never longer) and cut to what was read; should a record that
        # OpenSSL had already begun not fit, the next goes into another.
        cdef Py_ssize_t total = 0, count = 1, cap = 0
        cdef PyObject *data = NULL    # ours alone until it is cut to size
        cdef list chunks = None       # filled objects, when one was not enough
        try:
            while self._may_read():
                if data == NULL:
                    cap = self._incoming.pending + self._sslobj_pending()
                    data = PyBytes_FromStringAndSize_raw(NULL, cap)
                    total = 0
                count = self._sslobj_read(cap - total, PyMemoryView_FromMemory(
                    PyBytes_AS_STRING(<object>data) + total, cap - total,
                    PyBUF_WRITE))
                if not count:
                    break
                total += count
                if total == cap:
                    if chunks is None:
                        chunks = []
                    chunks.append(<object>data)
                    Py_XDECREF(data)
                    data = NULL
        except _SSLAgainErrors:
            pass
        except BaseException:
            Py_XDECREF(data)
            raise
        if data != NULL:
            if total:
                # Frees the object and sets data to NULL if it fails.
                _PyBytes_Resize(&data, total)
                if chunks is None:
                    chunks = []
                chunks.append(<object>data)
            Py_XDECREF(data)
        if chunks is not None:
            self._app_protocol.data_received(
                chunks[0] if len(chunks) == 1 else b''.join(chunks))
        if not count:
            # close_notify
            self._call_eof_received()
            self._start_shutdown()

    cdef _do_read_chunks(self):
        # asyncio's copied read, for an sslobject_class subclass: chunks of
        # bytes from its read(max_size), joined if there are several.
        cdef list chunks = []
        chunk = b'1'
        try:
            while True:
                chunk = self._sslobj_read(MAX_SIZE)
                if not chunk:
                    break
                chunks.append(chunk)
        except _SSLAgainErrors:
            pass
        if chunks:
            self._app_protocol.data_received(
                chunks[0] if len(chunks) == 1 else b''.join(chunks))
        if not chunk:
            # close_notify
            self._call_eof_received()
            self._start_shutdown()

    cdef _call_eof_received(self):
        try:
            if self._app_state == APP_CON_MADE:
                self._app_state = APP_EOF
                keep_open = self._app_protocol.eof_received()
                if keep_open:
                    _logger.warning('returning true from eof_received() '
                                    'has no effect when using ssl')
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as ex:
            self._fatal_error(ex, 'Error calling eof_received()')

    # ------------------------------------------------------------------
    # Flow control

    cdef _control_app_writing(self):
        cdef Py_ssize_t size = self._get_write_buffer_size()
        if size >= self._outgoing_high_water and not self._app_writing_paused:
            self._app_writing_paused = True
            self._tell_app('pause_writing')
        elif size <= self._outgoing_low_water and self._app_writing_paused:
            self._app_writing_paused = False
            self._tell_app('resume_writing')

    cdef _tell_app(self, str method):
        try:
            getattr(self._app_protocol, method)()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            self._loop.call_exception_handler({
                'message': f'protocol.{method}() failed',
                'exception': exc,
                'transport': self._app_transport,
                'protocol': self,
            })

    cdef Py_ssize_t _get_write_buffer_size(self) except -1:
        return self._outgoing.pending + self._write_buffer_size

    cdef _set_write_buffer_limits(self, high=None, low=None):
        self._outgoing_high_water, self._outgoing_low_water = water_marks(
            high, low, _HIGH_WATER_SSL_WRITE * 1024, pause_at_high=True)

    cdef _resume_reading(self):
        if self._app_reading_paused:
            self._app_reading_paused = False
            self._loop.call_soon(self._resume_read)

    def _resume_read(self):
        if self._state == WRAPPED:
            self._do_read()
        elif self._state == FLUSHING:
            self._do_flush()
        elif self._state == SHUTDOWN:
            self._do_shutdown()

    cdef _control_ssl_reading(self):
        cdef Py_ssize_t size = self._incoming.pending
        if size >= self._incoming_high_water and not self._ssl_reading_paused:
            self._ssl_reading_paused = True
            self._transport.pause_reading()
        elif size <= self._incoming_low_water and self._ssl_reading_paused:
            self._ssl_reading_paused = False
            self._transport.resume_reading()

    cdef _set_read_buffer_limits(self, high=None, low=None):
        self._incoming_high_water, self._incoming_low_water = water_marks(
            high, low, _HIGH_WATER_SSL_READ * 1024, pause_at_high=True)

    # ------------------------------------------------------------------
    # Errors

    cpdef _fatal_error(self, exc, message='Fatal error on transport'):
        if self._transport:
            self._transport._force_close(exc)
        if isinstance(exc, OSError):
            if self._loop.get_debug():
                _logger.debug("%r: %s", self, message, exc_info=True)
        elif not isinstance(exc, _CancelledError):
            self._loop.call_exception_handler({
                'message': message,
                'exception': exc,
                'transport': self._transport,
                'protocol': self,
            })


# ----------------------------------------------------------------------
# The application's transport


@cython.final
@cython.nonecheck(True)   # _ssl_protocol is None after a second close()
cdef class SSLProtocolTransport(TLSTransportBase):
    """The transport the application sees: asyncio's _SSLProtocolTransport."""

    cdef readonly object _loop
    cdef readonly SSLProtocol _ssl_protocol
    cdef public bint _closed
    cdef object __weakref__

    _start_tls_compatible = True
    _sendfile_compatible = _aio_constants._SendfileMode.FALLBACK

    def __cinit__(self, loop, SSLProtocol ssl_protocol):
        self._loop = loop
        self._ssl_protocol = ssl_protocol
        self._closed = False

    def __init__(self, loop, ssl_protocol):
        # Set up in __cinit__; this keeps asyncio's BaseTransport.__init__,
        # which takes other arguments, from running.
        pass

    def get_extra_info(self, name, default=None):
        return self._ssl_protocol._get_extra_info(name, default)

    def set_protocol(self, protocol):
        check_loop_thread(self._loop)
        self._ssl_protocol._set_app_protocol(protocol)

    def get_protocol(self):
        return self._ssl_protocol._app_protocol

    def is_closing(self):
        if _CLOSING_FOLLOWS_TRANSPORT:
            return self._closed or self._ssl_protocol._is_transport_closing()
        return self._closed

    def close(self):
        check_loop_thread(self._loop)
        if not self._closed:
            self._closed = True
            self._ssl_protocol._start_shutdown()
        else:
            self._ssl_protocol = None

    def __del__(self):
        if not self._closed:
            self._closed = True
            _warn(f"unclosed transport {self!r}", ResourceWarning)

    def is_reading(self):
        return not self._ssl_protocol._app_reading_paused

    def pause_reading(self):
        check_loop_thread(self._loop)
        self._ssl_protocol._app_reading_paused = True

    def resume_reading(self):
        check_loop_thread(self._loop)
        self._ssl_protocol._resume_reading()

    def set_write_buffer_limits(self, high=None, low=None):
        check_loop_thread(self._loop)
        self._ssl_protocol._set_write_buffer_limits(high, low)
        self._ssl_protocol._control_app_writing()

    def get_write_buffer_limits(self):
        return (self._ssl_protocol._outgoing_low_water,
                self._ssl_protocol._outgoing_high_water)

    def get_write_buffer_size(self):
        return self._ssl_protocol._get_write_buffer_size()

    def set_read_buffer_limits(self, high=None, low=None):
        check_loop_thread(self._loop)
        self._ssl_protocol._set_read_buffer_limits(high, low)
        self._ssl_protocol._control_ssl_reading()

    def get_read_buffer_limits(self):
        return (self._ssl_protocol._incoming_low_water,
                self._ssl_protocol._incoming_high_water)

    def get_read_buffer_size(self):
        return self._ssl_protocol._incoming.pending

    @property
    def _protocol_paused(self):
        # Read by asyncio's sendfile fallback.
        return self._ssl_protocol._app_writing_paused

    def write(self, data):
        check_loop_thread(self._loop)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data: expecting a bytes-like instance, "
                            f"got {type(data).__name__}")
        if not data:
            return
        self._ssl_protocol._write_appdata((data,))

    def writelines(self, list_of_data):
        check_loop_thread(self._loop)
        self._ssl_protocol._write_appdata(list_of_data)

    def write_eof(self):
        raise NotImplementedError

    def can_write_eof(self):
        return False

    def abort(self):
        check_loop_thread(self._loop)
        self._force_close(None)

    def _force_close(self, exc):
        self._closed = True
        if self._ssl_protocol is not None:
            self._ssl_protocol._abort(exc)

    def _test__append_write_backlog(self, data):
        # CPython's test_ssl fills the backlog through this hook.
        self._ssl_protocol._write_backlog.append(data)
        self._ssl_protocol._write_buffer_size += len(data)
