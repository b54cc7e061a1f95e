# cython: freethreading_compatible=True
"""The socket transport for TCP and Unix streams, and the accept loop.

asyncio's counterparts are _SelectorSocketTransport and
BaseSelectorEventLoop._accept_connection (selector_events.py): the order of
callbacks, the error messages and what reaches the protocol are theirs.
What differs is only how the work is done:

* reads go from recv() into the loop's 256 KiB read buffer and out as a
  bytes object of the size read (asyncio allocates 256 KiB per read and
  shrinks it); while reads bring more than COPY_MAX, that copy would cost
  more than an allocation, and reads go into a bytes object of 127 KiB
  shrunk to fit (_READ_LARGE);
* the writes the callbacks of one batch make go out together as the
  batch ends (a bytes write into an empty buffer is held until then;
  "Write coalescing" below), other writes at once; only the unsent rest
  is queued: bytes objects by reference (large writes are never copied),
  other buffers as a bytes copy, since the caller may change them after
  write() returns;
* queued data leaves with one sendmsg() (writev) for up to IOV_MAX buffers;
* an accepted connection gets its transport at once, not through a task.
"""

import contextvars
import socket as _socket

from asyncio import base_events as _aio_base_events
from asyncio import constants as _aio_constants
from asyncio import futures as _aio_futures
from asyncio import protocols as _aio_protocols
from asyncio import trsock as _aio_trsock
from asyncio.log import logger as _logger

from . import _asyncio_compat

cimport cython
from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyObject_CheckBuffer,
                             PyBUF_SIMPLE, PyBUF_WRITABLE)
from cpython.object cimport PyObject, PyTypeObject
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_Check
from libc.errno cimport errno, EMFILE, ENFILE, ENOBUFS, ENOMEM
from libc.string cimport memset

from .includes cimport (POLLER_READ, POLLER_WRITE, MSG_NOSIGNAL, MINLOOP_IOV_MAX,
                        iovec, msghdr, recv, send, sendmsg, af_fails, AF_READ_BUFFER,
                        AF_WRITE_QUEUE, arm_alloc_faults)
from .flow_control cimport (water_marks, maybe_pause_protocol,
                            maybe_resume_protocol)
from .loop cimport (LoopCore, check_loop_thread, writes_can_wait, running_callback,
                   callback_ran_since, schedule_flush, flush_after_callback,
                   set_write_flusher)
from .fd_owners cimport own_fd, owns_fd, disown_fd
from .oserrors cimport os_error, blocked_or_interrupted
from .fatal_error cimport report_fatal_error
from .lifecycle cimport (READ_SIZE, COPY_MAX, LARGE_READ_SIZE, read_buffer, read_new_bytes,
                         begin_closing, drop_writer, lose_connection, release_fd,
                         selector_transport_repr, sock_name, sock_peer,
                         warn_unclosed, pause_reading_on, resume_reading_begins,
                         log_reading)
from .write_queue cimport queue_unsent, fill_iovecs, drop_sent
from .stream_reader cimport (is_stream_reader_protocol, feed_stream_reader, adopt_stream_reader,
                             use_steps_class)
from .stream_reader_class import StreamReader as _StepsStreamReader
# For the loop's _start_serving(): start_server()'s readers made as the
# subclass (stream_reader_class.py says why).
from .stream_reader_class import made_as_steps_readers
from .transport_bases cimport StreamTransportBase


cdef object _TransportSocket = _aio_trsock.TransportSocket
cdef object _BufferedProtocol = _aio_protocols.BufferedProtocol
cdef object _set_nodelay = _aio_base_events._set_nodelay
cdef object _set_result_unless_cancelled = _aio_futures._set_result_unless_cancelled
cdef object _copy_context = contextvars.copy_context
cdef int _LOG_THRESHOLD_FOR_CONNLOST_WRITES = _aio_constants.LOG_THRESHOLD_FOR_CONNLOST_WRITES
cdef object _SHUT_WR = _socket.SHUT_WR
# What set_protocol() gives the reader of asyncio's StreamReaderProtocol.
use_steps_class(_StepsStreamReader)

cdef bint _SERVER_TRACKS_TRANSPORTS = _asyncio_compat.SERVER_TRACKS_TRANSPORTS
cdef bint _WRITELINES_JOINS = _asyncio_compat.WRITELINES_JOINS
cdef str _WRITE_REFUSAL = _asyncio_compat.STREAM_WRITE_REFUSAL
cdef bint _ACCEPT_SKIPS_ABORTED = _asyncio_compat.ACCEPT_SKIPS_ABORTED
cdef bint _FLUSHED_CLOSE_COUNTS_LOST = _asyncio_compat.FLUSHED_CLOSE_COUNTS_LOST
# What writelines()'s errors call it (write() where it joins and writes).
cdef str _WRITELINES = 'write' if _WRITELINES_JOINS else 'writelines'
cdef bint _HAS_SSL_SHUTDOWN_TIMEOUT = _asyncio_compat.HAS_SSL_SHUTDOWN_TIMEOUT


cdef list _joinable(list_of_data):
    """list(list_of_data), each item one b''.join() takes (any contiguous
    buffer), or join()'s TypeError."""
    cdef Py_ssize_t i
    chunks = list(list_of_data)
    for i in range(len(chunks)):
        data = chunks[i]
        if not PyBytes_Check(data) and not _contiguous(data):
            raise TypeError(f'sequence item {i}: expected a bytes-like '
                            f'object, {_type_name(data)} found')
    return chunks


cdef list _viewable(list_of_data, bint *contiguous):
    """list(list_of_data), each item one memoryview() takes (any object with
    the buffer protocol), or memoryview()'s TypeError.  *contiguous is set
    False if one of them is not contiguous."""
    cdef Py_ssize_t i
    chunks = list(list_of_data)
    for i in range(len(chunks)):
        data = chunks[i]
        if PyBytes_Check(data):
            continue
        if not PyObject_CheckBuffer(data):
            raise TypeError(f"memoryview: a bytes-like object is required, "
                            f"not '{_type_name(data)}'")
        if not _contiguous(data):
            contiguous[0] = False
    return chunks


cdef bint _contiguous(data) except -1:
    """Whether data lends its bytes as one contiguous buffer."""
    cdef Py_buffer view
    try:
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    except Exception:
        return False
    PyBuffer_Release(&view)
    return True


cdef int _lend_buffers(list chunks) except -1:
    """Ask each item for its contiguous bytes: raises what the first that
    cannot lend them raises."""
    cdef Py_buffer view
    for data in chunks:
        if not PyBytes_Check(data):
            PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
            PyBuffer_Release(&view)
    return 0


cdef str _type_name(obj):
    # The C type's tp_name, as CPython's own messages print it.
    cdef type cls = type(obj)
    return (<bytes>(<PyTypeObject *>cls).tp_name).decode()


cdef bint _any_bytes(list chunks) except -1:
    """Whether the contiguous buffers in chunks hold a byte in all."""
    cdef Py_buffer view
    cdef Py_ssize_t size
    for data in chunks:
        if PyBytes_Check(data):
            size = PyBytes_GET_SIZE(data)
        else:
            PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
            size = view.len
            PyBuffer_Release(&view)
        if size:
            return True
    return False


# Every connection keeps its two addresses for get_extra_info(), and the
# socket module makes a new host string for each ('127.0.0.1': 58 bytes), yet
# a server's own address is the same for all its connections and its clients
# mostly come from a few hosts.  So equal host strings are shared, up to
# _HOSTS_KEPT of them (a server facing many distinct clients keeps sharing
# only the first ones, and never holds more).  Strings are immutable: nobody
# can tell a shared one from a copy.
cdef dict _hosts = {}
cdef Py_ssize_t _HOSTS_KEPT = 256


cdef object _share_host(object addr):
    """addr, with its host string replaced by an equal, shared one."""
    if type(addr) is not tuple or len(<tuple>addr) < 2 or type((<tuple>addr)[0]) is not str:
        return addr
    host = (<tuple>addr)[0]
    shared = _hosts.get(host)
    if shared is None:
        if len(_hosts) >= _HOSTS_KEPT:
            return addr
        _hosts[host] = host
        return addr
    if shared is host:
        return addr
    return (shared,) + (<tuple>addr)[1:]


# An accepted connection's local address: the same few for all of a
# server's connections, so the tuples are shared as the host strings are,
# with the same bound.
cdef dict _addrs = {}


cdef object _share_addr(object addr):
    """addr, or an equal tuple kept from an earlier connection."""
    if type(addr) is not tuple:
        return addr
    try:
        shared = _addrs.get(addr)
    except TypeError:
        return addr   # not hashable: never the socket module's
    if shared is not None:
        return shared
    addr = _share_host(addr)
    if len(_addrs) < _HOSTS_KEPT:
        _addrs[addr] = addr
    return addr


# How a read reaches the protocol: data_received(bytes), get_buffer() and
# buffer_updated() for a BufferedProtocol, or, for asyncio's own
# StreamReaderProtocol, into its reader (stream_reader.pyx).
cdef enum:
    _READ_DATA
    # data_received(bytes) too, the last read having brought more than
    # COPY_MAX: received straight into a bytes object of LARGE_READ_SIZE
    # bytes, shrunk to what came.  The same bytes, without the copy.
    _READ_LARGE
    _READ_INTO_BUFFER
    _READ_FEEDS_READER


# Write coalescing
#
# A server answers a request with a few writes -- uvicorn sends a
# response's head and body apart, a pipelined batch of requests gets one
# response each -- and asyncio sends each at once, a send() per write().
# Each send() runs the kernel's TCP output path (on loopback the peer's
# input path as well): the costliest step of a small request, and the same
# for every loop.  So a bytes write into an empty buffer, made by a callback
# of the loop, is held (_BATCH_PENDING) and the transport noted on the
# loop's flush list (_BATCH_LISTED, loop.pxd's schedule_flush); later
# writes queue behind it, and as the batch of callbacks that
# _run_iteration() runs ends (before the loop polls again) the loop has each
# transport written to send all of it in one writev (_send_held): fewer
# syscalls per request for a multi-write response or a pipelined batch.
# The price, on a one-write request (the echo rows: its syscalls stay the
# same), is the holding: a few instructions more per request, against a
# send() saved per extra write.  The figures: benchmarks/RESULTS.md,
# "Figures moved out of code comments (issue 44)".
#
# To the batch's end, not each callback's (as uvloop and zuvloop hold them
# to the end of their iteration): a busy server's responses then leave
# back to back, not one per task step with the next task's Python between.
# Each send() to a peer asleep in its poller wakes it, and the waking
# (try_to_wake_up, an IPI to the peer's CPU) is the sender's kernel time:
# with the sends spread out, a client waiting on many connections (wrk
# -c64) sleeps between nearly every two of them, and the server pays for
# each wake-up (RESULTS.md, as above).  A transport's held bytes are still
# bounded: past its high-water mark they leave at once
# (_maybe_pause_protocol), and from
# _HOLD_TO_BATCH_END bytes on they leave as the callback returns (large
# writes are few, and lose more held than they save).
#
# A batch leaves in two parts, though: first what the callbacks carried
# over from the last iteration wrote, as the last of them returns, then
# the rest as the batch ends.  Those come first in the batch (asyncio's
# order: a read's handler wakes a task, whose step runs in the next
# iteration, after the poll's own handlers are queued behind it), and they
# are where a server's answers are written; the poll's handlers after them
# mostly read the next requests and wake more tasks.  Held to the batch's
# end, the answers waited for all those reads, the client slept meanwhile,
# and the server settled into two groups of connections answered on
# alternate iterations: a wake-up per half as many answers.  Sending the
# carried-over callbacks' writes first gives fewer wake-ups and polls per
# answer and leaves the bench's other rows as they were (RESULTS.md, as
# above).
#
# What a program can observe stays asyncio's:
# * bytes leave in the order written, before the loop polls again (and
#   before run_forever() returns, or loop.close() closes);
# * get_write_buffer_size() first sends what is held, then answers what the
#   kernel did not take -- asyncio's number (0 for a small write); a program
#   asking after each write merely loses the coalescing;
# * flow control: held bytes past the high-water mark are sent at once and
#   the mark judged on what the kernel refused, so pause_writing() comes
#   only where asyncio's would;
# * a send error reaches the protocol as asyncio's: _fatal_error(), then
#   connection_lost(exc) in a later iteration; write() never raises it;
#   is_closing() in a later callback than the write's first sends what is
#   held, so that it answers as asyncio's would (StreamWriter.drain() asks
#   it; CPython's test_sslproto test_connection_lost_when_busy);
# * close() and write_eof() send what is held first; abort() and the other
#   _force_close()s offer it to the kernel once (asyncio had sent it at
#   write()) and drop what it refuses, as asyncio drops its buffer;
# * a write outside the loop's callbacks (the loop not running, another
#   thread while it sleeps) goes out at once, as before, and so does a
#   write of a mutable buffer into an empty buffer (held, it would have to
#   be copied).
# What differs (README, "Differences"): a later callback of the same batch
# that reads the peer synchronously (a socket of its own, not through the
# loop) does not find the bytes yet; after a write that will fail, the
# transport is not closing in the callback that wrote, and later writes to
# it before the batch ends or is_closing() is asked are dropped with it
# rather than counted as writes after loss.
cdef enum:
    # Held writes of at least this many bytes leave as the callback that
    # wrote returns (each callback's end, as before the batch's): a large
    # echo (tcp-protocol-64k-c16 on 3.14) held to the batch's end took twice
    # the server's CPU per round trip, 42 us against 22.
    _HOLD_TO_BATCH_END = 16384

cdef enum:
    _BATCH_PENDING = 1   # _buffer holds writes not yet offered to the
                         # kernel; no writer is armed
    _BATCH_LISTED = 2    # the loop's flush list holds the transport


@cython.final
@cython.no_gc_clear
cdef class SocketTransport(StreamTransportBase):
    """A TCP or Unix stream socket, as asyncio's _SelectorSocketTransport."""

    # The transports' shape (lifecycle.pxd), then this one's own fields.
    cdef:
        readonly object _loop     # None once connection_lost() has run
        LoopCore _core            # the same loop, kept
        readonly int _sock_fd
        # Four one-byte flags fill the rest of the fd's 8 bytes:
        # asyncio's `_extra` dict would have 'peername' first (an accepted
        # connection's, given to the constructor); asyncio's
        # _protocol_connected (the property below); how reads reach the
        # protocol (set_protocol); where the running callback's writes stand
        # (_BATCH_* below, "Write coalescing").
        unsigned char _peername_given
        unsigned char _connected
        unsigned char _read_mode
        unsigned char _batch
        # running_callback()'s answer as _batch became _BATCH_PENDING.
        size_t _held_seq
        # None once connection_lost() has run.  Writable, as asyncio's is:
        # CPython's tests swap it for a wrapper (the transport's own I/O
        # goes through _sock_fd, so a wrapper changes nothing here).
        public object _sock
        readonly object _protocol
        readonly object _server
        # The connection's context, when asyncio gives one (3.15): every
        # protocol callback the transport schedules runs in this one
        # object, so what connection_made() sets, data_received() and
        # connection_lost() see.  None before 3.15: each callback runs in a
        # copy of the context current when it was scheduled.
        readonly object _context
        # Data not yet sent, oldest first: bytes objects only, in a list,
        # or the bytes object itself while it is the only one (a request's
        # one response, held while the callback runs, needs no list).
        # The first `_buffer_head` bytes of the first have been sent
        # already.  None while nothing is queued: an idle connection should
        # not pay for an empty list.
        object _buffer
        Py_ssize_t _buffer_head
        Py_ssize_t _buffer_size   # bytes still to send
        readonly Py_ssize_t _high_water
        readonly Py_ssize_t _low_water
        # Set when connection_lost() is scheduled; then counts the writes
        # attempted since, as asyncio's does.
        readonly Py_ssize_t _conn_lost
        # The flags (C ints) go in pairs between the 8-byte fields, so that
        # the struct has no holes: _protocol_paused here, with the others,
        # not beside _high_water.
        readonly bint _protocol_paused
        readonly bint _closing
        readonly bint _paused
        readonly bint _eof
        # Set while loop.sendfile() uses the socket: first its wait for an
        # empty buffer, then (sock_ops._sendfile_native) the send's own
        # future, which closing the transport fails.  write() raises while
        # it is set.
        public object _empty_waiter
        # get_extra_info()'s three keys, each kept in a field (see
        # get_extra_info): captured at construction, as asyncio's dict has
        # them, and still there after close.  _trsock is made on first use.
        object _sockname
        object _peername
        object _trsock
        object __weakref__        # users may hold transports weakly

    max_size = READ_SIZE
    _start_tls_compatible = True
    _sendfile_compatible = _aio_constants._SendfileMode.TRY_NATIVE

    def __cinit__(self, loop, *args, **kwargs):
        # Every method relies on _core: no instance without it
        # (SocketTransport.__new__(SocketTransport) would crash later).
        self._core = <LoopCore?>loop
        self._sock_fd = -1

    def __init__(self, loop, sock, protocol, waiter=None, extra=None,
                 server=None, context=None):
        self._setup(loop, sock, protocol, waiter, extra, False, None, server,
                    context)

    cdef _setup(self, loop, sock, protocol, waiter, extra, bint accepted,
                peername, server, context):
        """__init__; the accept loop calls it with `accepted` and the peer's
        address as accept() returned it (asyncio's extra={'peername': addr}),
        so that no dict is made."""
        cdef LoopCore core = <LoopCore?>loop
        if self._owns_fd():
            # __init__ run again (Python lets it): asyncio's _transports
            # keeps the first fd's entry too.  Ours leaves the fd table,
            # where only the fd __dealloc__ will let go of may name us.
            self._disown_fd()
            self._core._transports[self._sock_fd] = self
        if extra is not None:
            # A dict given is the dict, filled in as asyncio fills it.
            self._extra = extra
            extra['socket'] = self._trsock = _TransportSocket(sock)
            extra['sockname'] = _share_host(sock_name(sock))
            if 'peername' not in extra:
                extra['peername'] = sock_peer(sock)
            extra['peername'] = _share_host(extra['peername'])
            self._sockname = extra['sockname']
            self._peername = extra['peername']
            self._peername_given = False
        else:
            # No dict: get_extra_info() answers from the fields.
            self._extra = None
            self._trsock = None
            sockname = sock_name(sock)
            # An accepted connection's local address is, nearly always, one
            # of the server's few: share the tuple, not only its host.
            self._sockname = _share_addr(sockname) if accepted else _share_host(sockname)
            if not accepted:
                peername = sock_peer(sock)
            self._peername = _share_host(peername)
            self._peername_given = accepted
        self._loop = loop
        self._core = core
        self._sock = sock
        self._sock_fd = sock.fileno()
        self._context = context
        self.set_protocol(protocol)
        self._server = server
        self._set_write_buffer_limits(None, None)
        if server is not None:
            if _SERVER_TRACKS_TRANSPORTS:
                server._attach(self)
            else:
                server._attach()
        # asyncio's loop._transports[fd] = self: the fd table's slot points
        # back at us (borrowed; __dealloc__ lets go of it).
        own_fd(core, self._sock_fd, self)
        # Small writes go out without waiting for the peer's ACK (asyncio
        # disables Nagle's algorithm on every TCP transport).
        _set_nodelay(sock)
        # Reading starts only once connection_made() has run.
        if context is None:
            loop.call_soon(self._protocol.connection_made, self)
            loop.call_soon(self._start_reading)
            if waiter is not None:
                loop.call_soon(_set_result_unless_cancelled, waiter, None)
        else:
            loop.call_soon(self._protocol.connection_made, self,
                           context=context)
            loop.call_soon(self._start_reading, context=context)
            if waiter is not None:
                loop.call_soon(_set_result_unless_cancelled, waiter, None,
                               context=context)

    cdef bint _owns_fd(self) noexcept:
        return self._core is not None and owns_fd(self._core, self._sock_fd, self)

    cdef void _disown_fd(self) noexcept:
        # Pure C, for __dealloc__: _core is None only for an instance whose
        # __cinit__ failed.
        if self._core is not None:
            disown_fd(self._core, self._sock_fd, self)

    def __dealloc__(self):
        # The fd table's pointer to us is borrowed: it goes before we do.
        # (No tp_clear -- @no_gc_clear -- so _core is still set here.)
        self._disown_fd()

    def __repr__(self):
        return selector_transport_repr(self, self._sock, self._closing,
                                       self._sock_fd, self._loop, self._core,
                                       self._buffer_size)

    def __del__(self):
        # asyncio's _transports entry is a weak reference: the collector
        # clears it before finalizers run, even if this one resurrects us
        # (warn_unclosed's warning holds the transport as its source).
        self._disown_fd()
        if self._sock is not None:
            warn_unclosed(self, self._sock)
            self._keep_transport_socket()
            self._sock = None
            self._detach_server()

    cdef _detach_server(self):
        server = self._server
        if server is not None:
            self._server = None
            if _SERVER_TRACKS_TRANSPORTS:
                server._detach(self)
            else:
                server._detach()

    # ------------------------------------------------------------------
    # BaseTransport

    # asyncio keeps a dict per transport for get_extra_info(): 'socket',
    # 'sockname' and 'peername', and a TransportSocket for the first.  For
    # an idle server's connections that is most of what a connection costs
    # beyond the kernel's, so here the three live in fields, the
    # TransportSocket is made when first asked for, and the dict only when
    # one is given to the constructor or someone reads `_extra` (then it
    # holds what asyncio's holds, and is the one answer from then on).

    def get_extra_info(self, name, default=None):
        if self._extra is not None:
            return self._extra.get(name, default)
        if type(name) is not str:
            # dict.get()'s own answer for any other key (equal to one of
            # ours, unhashable...): ask the dict.
            return self._extra_dict().get(name, default)
        if name == 'peername':
            return self._peername
        if name == 'sockname':
            return self._sockname
        if name == 'socket':
            return self._transport_socket()
        return default

    @property
    def _extra(self):
        return self._extra_dict()

    @_extra.setter
    def _extra(self, value):
        self._extra = value

    cdef object _extra_dict(self):
        """`_extra`, made as asyncio's (in its key order) if not yet made."""
        if self._extra is None:
            trsock = self._transport_socket()
            if self._peername_given:
                self._extra = {'peername': self._peername, 'socket': trsock,
                               'sockname': self._sockname}
            else:
                self._extra = {'socket': trsock, 'sockname': self._sockname,
                               'peername': self._peername}
        return self._extra

    cdef object _transport_socket(self):
        # The same TransportSocket every time.  After close it was made by
        # _keep_transport_socket(); an instance that never had a socket
        # (made by __new__ alone) has none.
        if self._trsock is None and self._sock is not None:
            self._trsock = _TransportSocket(self._sock)
        return self._trsock

    cdef void _keep_transport_socket(self) noexcept:
        # Before _sock is cleared: get_extra_info('socket') answers with
        # the (closed) socket after close, as asyncio's does.
        if self._trsock is None and self._sock is not None:
            try:
                self._trsock = _TransportSocket(self._sock)
            except BaseException:
                pass

    def is_closing(self):
        if self._batch & _BATCH_PENDING and self._held_by_earlier_callback():
            # asyncio sent it as that callback wrote it: a failure of that
            # send would have closed the transport by now (StreamWriter's
            # drain() asks, and then waits for connection_lost()).
            self._send_batch()
        return self._closing

    def set_protocol(self, protocol):
        check_loop_thread(self._core)
        if isinstance(protocol, _BufferedProtocol):
            self._read_mode = _READ_INTO_BUFFER
        elif is_stream_reader_protocol(protocol):
            self._read_mode = _READ_FEEDS_READER
            adopt_stream_reader(protocol)
        else:
            self._read_mode = _READ_DATA
        self._protocol = protocol
        self._connected = True

    def get_protocol(self):
        return self._protocol

    @property
    def _protocol_connected(self):
        return bool(self._connected)

    # ------------------------------------------------------------------
    # ReadTransport

    def is_reading(self):
        return not self._closing and not self._paused

    def pause_reading(self):
        pause_reading_on(self, self._core, self._sock_fd, self._closing, &self._paused)

    def resume_reading(self):
        if resume_reading_begins(self._core, self._closing, &self._paused):
            self._add_reader(self._sock_fd, self._read_ready)
            log_reading(self, self._core, "%r resumes reading")

    def _start_reading(self):
        """The first _add_reader(), after connection_made().  If the socket
        cannot be watched (epoll_ctl() ENOMEM), the connection ends with
        that error: asyncio reports it to the exception handler and leaves
        the connection open and never read, a hang for its peer (the fault
        harness, docs/faults.md)."""
        try:
            self._add_reader(self._sock_fd, self._read_ready)
        except OSError as exc:
            self._fatal_error(exc, 'Fatal error: the socket cannot be watched for reading')

    def _add_reader(self, fd, callback, *args):
        if self._closing or self._paused:
            return
        self._core._add_fd_handle(fd, POLLER_READ, callback, args,
                                  self._context)

    @property
    def _read_ready_cb(self):
        # asyncio's: the method reads go through, None from close() or
        # connection_lost() on (CPython's TLS tests read it).
        if self._closing or self._sock is None:
            return None
        return self._read_ready

    def _read_ready(self):
        if self._conn_lost:
            return
        if self._read_mode == _READ_INTO_BUFFER:
            self._read_into_protocol_buffer()
        elif self._read_mode == _READ_LARGE:
            self._read_large()
        else:
            self._read_data()

    cdef _read_data(self):
        cdef char *buf = read_buffer(self._core)
        cdef ssize_t n = recv(self._sock_fd, buf, READ_SIZE, 0)
        if n < 0:
            if not blocked_or_interrupted(errno):
                self._fatal_error(os_error(errno),
                                  'Fatal read error on socket transport')
            return
        if n == 0:
            self._read_eof()
            return
        if self._read_mode == _READ_FEEDS_READER:
            # asyncio's streams: their data_received() done here, unless the
            # protocol or its reader is not as asyncio made it.
            try:
                if feed_stream_reader(self._protocol, buf, n):
                    return
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._fatal_error(
                    exc, 'Fatal error: protocol.data_received() call failed.')
                return
        elif n > COPY_MAX:
            self._read_mode = _READ_LARGE     # for the next read
        # Copied out of the loop's buffer before any Python code runs.
        try:
            if af_fails(AF_READ_BUFFER):
                raise MemoryError()
            data = PyBytes_FromStringAndSize(buf, n)
        except MemoryError as exc:
            # The bytes are out of the kernel: the stream cannot go on
            # without them.  asyncio's recv() fails before reading, and
            # reports it so.
            self._fatal_error(exc, 'Fatal read error on socket transport')
            return
        self._data_received(data)

    cdef _read_large(self):
        # As asyncio's recv(max_size), smaller: no copy, an allocation to
        # shrink.
        cdef ssize_t n
        try:
            data = read_new_bytes(self._sock_fd, LARGE_READ_SIZE, &n, True)
        except MemoryError as exc:
            # As asyncio's recv(max_size) failing so.
            self._fatal_error(exc, 'Fatal read error on socket transport')
            return
        cdef int err = errno
        if n <= 0:
            if n == 0:
                self._read_eof()
            elif not blocked_or_interrupted(err):
                self._fatal_error(os_error(err),
                                  'Fatal read error on socket transport')
            return
        if n <= COPY_MAX:
            self._read_mode = _READ_DATA      # small again: copy
        self._data_received(data)

    cdef _data_received(self, data):
        try:
            # Looked up on every read, as asyncio does: a protocol may
            # replace its data_received as its state changes.
            self._protocol.data_received(data)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._fatal_error(
                exc, 'Fatal error: protocol.data_received() call failed.')

    cdef _read_into_protocol_buffer(self):
        cdef Py_buffer view
        cdef ssize_t n
        cdef int err
        try:
            buf = self._protocol.get_buffer(-1)
            if not len(buf):
                raise RuntimeError('get_buffer() returned an empty buffer')
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._fatal_error(
                exc, 'Fatal error: protocol.get_buffer() call failed.')
            return
        try:
            PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE)
        except BaseException:
            # Not a writable contiguous buffer: asyncio's sock.recv_into(buf)
            # raises the socket module's own TypeError for it, so go through
            # the socket's method to fail (or, for an exotic buffer it
            # accepts, succeed) exactly as asyncio does.
            n = self._recv_into_by_socket(buf)
        else:
            n = recv(self._sock_fd, view.buf, <size_t>view.len, 0)
            err = errno
            PyBuffer_Release(&view)
            if n < 0:
                if not blocked_or_interrupted(err):
                    self._fatal_error(os_error(err),
                                      'Fatal read error on socket transport')
                return
        if n < 0:
            return
        if n == 0:
            self._read_eof()
            return
        try:
            self._protocol.buffer_updated(n)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._fatal_error(
                exc, 'Fatal error: protocol.buffer_updated() call failed.')

    cdef ssize_t _recv_into_by_socket(self, buf) except -2:
        """sock.recv_into(buf) as asyncio calls it; -1 when there is no data."""
        try:
            return self._sock.recv_into(buf)
        except (BlockingIOError, InterruptedError):
            return -1
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._fatal_error(exc, 'Fatal read error on socket transport')
            return -1

    cdef _read_eof(self):
        if self._core._debug:
            _logger.debug("%r received EOF", self)
        try:
            keep_open = self._protocol.eof_received()
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._fatal_error(
                exc, 'Fatal error: protocol.eof_received() call failed.')
            return
        if keep_open:
            # The protocol may still write, but nothing more can be read.
            self._core._remove_fd_handle(self._sock_fd, POLLER_READ)
        else:
            self.close()

    # ------------------------------------------------------------------
    # WriteTransport

    def write(self, data):
        check_loop_thread(self._core)
        cdef Py_ssize_t sent
        if not PyBytes_Check(data) and not isinstance(data, (bytearray, memoryview)):
            raise TypeError(_WRITE_REFUSAL.format(type(data).__name__))
        if self._eof:
            raise RuntimeError('Cannot call write() after write_eof()')
        if self._empty_waiter is not None:
            raise RuntimeError('unable to write; sendfile is in progress')
        if not data:
            return
        if self._conn_lost:
            self._count_write_after_loss()
            return
        if not self._buffer_size:
            if PyBytes_Check(data) and self._can_hold():
                # Held until the batch of callbacks ends ("Write coalescing").
                self._buffer = data
                self._buffer_head = 0
                self._buffer_size = PyBytes_GET_SIZE(data)
                self._hold_batch()
                self._check_held_size()
                if self._buffer_size > self._high_water:
                    self._maybe_pause_protocol()
                return
            sent = self._send_now(data)
            if sent < 0:
                return
            if not self._queue(data, sent):
                return   # all of it went out
            self._core._add_fd_handle(self._sock_fd, POLLER_WRITE,
                                      self._write_ready, (), self._context)
        else:
            self._queue(data, 0)
            if self._batch & _BATCH_PENDING:
                self._check_held_size()
        self._maybe_pause_protocol()

    def writelines(self, list_of_data):
        check_loop_thread(self._core)
        # Before 3.12 asyncio's writelines() is WriteTransport's:
        # write(b''.join(list_of_data)).  From 3.12 the socket transport
        # queues memoryview(data) of each item and sends them at once.
        cdef bint contiguous = True
        if _WRITELINES_JOINS:
            chunks = _joinable(list_of_data)
        if self._eof:
            raise RuntimeError(f'Cannot call {_WRITELINES}() after write_eof()')
        if self._empty_waiter is not None:
            raise RuntimeError(f'unable to {_WRITELINES}; sendfile is in progress')
        if not _WRITELINES_JOINS:
            if not list_of_data:
                return
            chunks = _viewable(list_of_data, &contiguous)
        if self._conn_lost:
            # write() of the joined bytes drops an empty join uncounted.
            # (asyncio 3.12+ counts as write() does since gh-136234; before,
            # it failed on its cleared callback or loop.)
            if not _WRITELINES_JOINS or _any_bytes(chunks):
                self._count_write_after_loss()
            return
        if not contiguous:
            # 3.12+ (join() refused it before): asyncio's sendmsg() of the
            # queue fails, and the queue is dropped -- all but what asyncio
            # had sent already: what the batch's writes hold.
            if self._send_batch() < 0:
                return
            self._core._remove_fd_handle(self._sock_fd, POLLER_WRITE)
            self._clear_buffer()
            try:
                _lend_buffers(chunks)
            except Exception as exc:
                self._fatal_error(exc, 'Fatal write error on socket transport')
            return
        was_empty = not self._buffer_size
        for data in chunks:
            self._queue(data, 0)
        if not self._buffer_size:
            return
        if was_empty:
            if self._can_hold():
                # With the batch's other writes ("Write coalescing").
                self._hold_batch()
            else:
                # One sendmsg() for all of it; a writer only for what is left.
                self._batch |= _BATCH_PENDING
                if self._send_batch() < 0:
                    return
        if self._batch & _BATCH_PENDING:
            self._check_held_size()
        self._maybe_pause_protocol()

    cdef _count_write_after_loss(self):
        if self._conn_lost >= _LOG_THRESHOLD_FOR_CONNLOST_WRITES:
            _logger.warning('socket.send() raised exception.')
        self._conn_lost += 1

    cdef Py_ssize_t _send_now(self, data) except -2:
        """send() data at once; the bytes sent (0 on EAGAIN), -1 on a fatal error."""
        cdef Py_buffer view
        cdef ssize_t n
        cdef int err
        if self._sock is None:
            return self._socket_gone()
        if PyBytes_Check(data):
            n = send(self._sock_fd, PyBytes_AS_STRING(data),
                     <size_t>PyBytes_GET_SIZE(data), MSG_NOSIGNAL)
            err = errno
        else:
            try:
                PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._fatal_error(exc, 'Fatal write error on socket transport')
                return -1
            n = send(self._sock_fd, view.buf, <size_t>view.len, MSG_NOSIGNAL)
            err = errno
            PyBuffer_Release(&view)
        if n >= 0:
            return n
        if blocked_or_interrupted(err):
            return 0
        self._fatal_error(os_error(err), 'Fatal write error on socket transport')
        return -1

    cdef int _socket_gone(self) except -2:
        # A write once connection_lost() has run, and _conn_lost is still 0
        # (close() waited for the queue to drain): the fd is closed, and its
        # number may be another file's by now.  asyncio's send on its
        # cleared socket fails, and so does its report of that on its
        # cleared loop (an AttributeError out of write()).
        self._fatal_error(AttributeError("'NoneType' object has no attribute 'send'"),
                          'Fatal write error on socket transport')
        return -1

    cdef bint _queue(self, data, Py_ssize_t offset) except -1:
        """Queue data[offset:]; False if there is nothing left to queue."""
        if af_fails(AF_WRITE_QUEUE):
            raise MemoryError()
        if self._buffer is None:
            self._buffer = []
        elif PyBytes_Check(self._buffer):
            self._buffer = [self._buffer]   # no longer the only one
        return queue_unsent(<list>self._buffer, &self._buffer_head,
                            &self._buffer_size, data, offset)

    cdef int _flush(self) except -2:
        """sendmsg() what is queued; -1 after a fatal error, else 0."""
        cdef iovec iov[MINLOOP_IOV_MAX]
        cdef msghdr msg
        cdef Py_ssize_t count = 0
        cdef ssize_t sent
        cdef int err
        if self._buffer is None:
            return 0
        if self._sock is None:
            self._clear_buffer()
            return self._socket_gone()
        if PyBytes_Check(self._buffer):
            # The one write: a plain send().
            sent = send(self._sock_fd,
                        PyBytes_AS_STRING(self._buffer) + self._buffer_head,
                        <size_t>self._buffer_size, MSG_NOSIGNAL)
        else:
            count = fill_iovecs(<list>self._buffer, self._buffer_head, iov)
            memset(&msg, 0, sizeof(msg))
            msg.msg_iov = iov
            msg.msg_iovlen = <size_t>count
            sent = sendmsg(self._sock_fd, &msg, MSG_NOSIGNAL)
        err = errno
        if sent < 0:
            if blocked_or_interrupted(err):
                return 0
            self._core._remove_fd_handle(self._sock_fd, POLLER_WRITE)
            self._clear_buffer()
            exc = os_error(err)
            self._fatal_error(exc, 'Fatal write error on socket transport')
            if self._empty_waiter is not None and not self._empty_waiter.done():
                self._empty_waiter.set_exception(exc)
            return -1
        if sent == self._buffer_size:
            self._clear_buffer()   # all sent: an idle connection keeps no list
        elif PyBytes_Check(self._buffer):
            self._buffer_head += sent
            self._buffer_size -= sent
        else:
            drop_sent(<list>self._buffer, &self._buffer_head,
                      &self._buffer_size, sent, count)
        return 0

    cdef void _clear_buffer(self):
        self._buffer = None
        self._buffer_head = 0
        self._buffer_size = 0
        self._batch &= ~_BATCH_PENDING

    # ------------------------------------------------------------------
    # Write coalescing (the essay above the class)

    cdef inline bint _can_hold(self) noexcept:
        """Whether a write into the empty buffer may wait for the end of the
        callback (else it is sent now, as before)."""
        # _sock: after connection_lost(), a write fails in write(), as
        # asyncio's does (_socket_gone), not as the batch ends.
        return self._sock is not None and writes_can_wait(<PyObject *>self._core)

    cdef inline bint _held_by_earlier_callback(self) noexcept:
        """What is held was written by a callback before the running one
        (on the loop's thread: another thread's is_closing() only reads)."""
        return callback_ran_since(<PyObject *>self._core, self._held_seq)

    cdef inline void _check_held_size(self) noexcept:
        """Large held writes leave as the callback returns, not at the
        batch's end ("Write coalescing")."""
        if self._buffer_size >= _HOLD_TO_BATCH_END:
            flush_after_callback(<PyObject *>self._core)

    cdef inline int _hold_batch(self) except -1:
        """What _buffer holds waits for the batch's end: note the
        transport on the loop's flush list, once."""
        self._held_seq = running_callback(<PyObject *>self._core)
        if self._batch & _BATCH_LISTED:
            self._batch |= _BATCH_PENDING
            return 0
        if schedule_flush(<PyObject *>self._core, self):
            self._batch = _BATCH_PENDING | _BATCH_LISTED
            return 0
        self._batch |= _BATCH_PENDING
        return self._send_batch()   # no memory to note it: send now

    cdef int _send_batch(self) except -2:
        """Offer the held writes, if any, to the kernel now; a writer for
        what it refuses.  -1 after a fatal error, else 0."""
        if not self._batch & _BATCH_PENDING:
            return 0
        self._batch &= ~_BATCH_PENDING
        if self._flush() < 0:
            return -1
        if self._buffer_size:
            self._core._add_fd_handle(self._sock_fd, POLLER_WRITE,
                                      self._write_ready, (), self._context)
        return 0

    cdef int _send_held(self) except -1:
        """As the batch of callbacks that wrote ends: send what it wrote."""
        cdef ssize_t sent
        if self._batch != _BATCH_PENDING | _BATCH_LISTED:
            self._batch &= ~_BATCH_LISTED   # sent already (close(), ...)
            return 0
        self._batch = 0
        if PyBytes_Check(self._buffer) and self._sock is not None:
            # The common case, one write: _send_batch() without its calls.
            sent = send(self._sock_fd,
                        PyBytes_AS_STRING(self._buffer) + self._buffer_head,
                        <size_t>self._buffer_size, MSG_NOSIGNAL)
            if sent == self._buffer_size:
                self._buffer = None
                self._buffer_head = 0
                self._buffer_size = 0
                return 0
            if sent > 0:
                self._buffer_head += sent
                self._buffer_size -= sent
                self._core._add_fd_handle(self._sock_fd, POLLER_WRITE,
                                          self._write_ready, (), self._context)
                return 0
            # Refused or failed: _flush() tells which, and does the rest.
        self._batch = _BATCH_PENDING
        self._send_batch()
        return 0

    cdef void _drop_batch(self) noexcept:
        """_force_close() of a transport holding writes: asyncio had sent
        them at write(), so they are offered to the kernel once; what it
        refuses, or an error, goes as asyncio's buffer goes then."""
        if not self._batch & _BATCH_PENDING:
            return
        self._batch &= ~_BATCH_PENDING
        if self._sock is None or self._buffer is None:
            return
        if PyBytes_Check(self._buffer):
            send(self._sock_fd, PyBytes_AS_STRING(self._buffer) + self._buffer_head,
                 <size_t>self._buffer_size, MSG_NOSIGNAL)
        else:
            _sendmsg_once(self._sock_fd, <list>self._buffer, self._buffer_head)

    def _write_ready(self):
        if self._conn_lost or not self._buffer_size:
            return
        if self._flush() < 0:
            return
        self._maybe_resume_protocol()   # may write more
        # Into the emptied buffer, that is held: the writer is armed, and
        # goes once nothing is left, so send it now.
        if self._send_batch() < 0:
            return
        if not self._buffer_size:
            self._core._remove_fd_handle(self._sock_fd, POLLER_WRITE)
            if self._empty_waiter is not None:
                self._empty_waiter.set_result(None)
            if self._closing:
                if _FLUSHED_CLOSE_COUNTS_LOST:
                    self._conn_lost += 1
                self._call_connection_lost(None)
            elif self._eof:
                self._sock.shutdown(_SHUT_WR)

    def write_eof(self):
        check_loop_thread(self._core)
        if self._closing or self._eof:
            return
        # What is held goes first (asyncio sent it at write()), and may fail.
        if self._send_batch() < 0:
            return
        self._eof = True
        if not self._buffer_size:
            self._sock.shutdown(_SHUT_WR)

    def can_write_eof(self):
        return True

    def get_write_buffer_size(self):
        # asyncio's answer: what the kernel has not taken.  It had been
        # offered everything at write(): so is what is held, first.
        self._send_batch()
        return self._buffer_size

    def get_write_buffer_limits(self):
        return (self._low_water, self._high_water)

    def set_write_buffer_limits(self, high=None, low=None):
        check_loop_thread(self._core)
        self._set_write_buffer_limits(high, low)
        self._maybe_pause_protocol()

    cdef _set_write_buffer_limits(self, high, low):
        self._high_water, self._low_water = water_marks(high, low)

    cdef _maybe_pause_protocol(self):
        if self._buffer_size > self._high_water and self._batch & _BATCH_PENDING:
            # Held bytes past the mark are not a full buffer yet: asyncio
            # would have offered them to the kernel, and judged the rest.
            if self._send_batch() < 0:
                return
        maybe_pause_protocol(self._loop, self, self._protocol,
                             self._buffer_size, self._high_water,
                             &self._protocol_paused)

    cdef _maybe_resume_protocol(self):
        maybe_resume_protocol(self._loop, self, self._protocol,
                              self._buffer_size, self._low_water,
                              &self._protocol_paused)

    # sendfile's fallback (asyncio's loop.sendfile) waits for the buffer to
    # drain between chunks.
    def _make_empty_waiter(self):
        if self._empty_waiter is not None:
            raise RuntimeError("Empty waiter is already set")
        self._empty_waiter = self._loop.create_future()
        self._send_batch()   # held writes go before the file
        if not self._buffer_size:
            self._empty_waiter.set_result(None)
        return self._empty_waiter

    def _reset_empty_waiter(self):
        self._empty_waiter = None


    # ------------------------------------------------------------------
    # The end of the connection: asyncio's methods in asyncio's order, over
    # the helpers of lifecycle.pxd

    def close(self):
        check_loop_thread(self._core)
        if self._closing:
            return
        # Held writes go first: asyncio had sent them at write(), so an
        # error there comes before the close, as asyncio's does.
        if self._send_batch() < 0:
            return
        if not begin_closing(self._core, self._sock_fd, &self._closing):
            return
        if not self._buffer_size:
            # Else _write_ready() calls connection_lost() once all is sent.
            lose_connection(self._loop, self._core, self._sock_fd,
                            &self._closing, &self._conn_lost,
                            self._call_connection_lost, None, self._context)

    def abort(self):
        check_loop_thread(self._core)
        self._force_close(None)

    def _fatal_error(self, exc, message='Fatal error on transport'):
        # Called from an exception handler only.
        report_fatal_error(self._loop, self._core._debug, self, self._protocol,
                           exc, message, isinstance(exc, OSError))
        self._force_close(exc)

    def _force_close(self, exc):
        if self._conn_lost:
            return
        self._drop_batch()
        if self._buffer_size:
            self._clear_buffer()
            drop_writer(self._loop, self._core, self._sock_fd)
        lose_connection(self._loop, self._core, self._sock_fd,
                        &self._closing, &self._conn_lost,
                        self._call_connection_lost, exc, self._context)

    def _call_connection_lost(self, exc):
        try:
            if self._connected:
                self._protocol.connection_lost(exc)
        finally:
            release_fd(self._core, self._sock_fd, self._buffer_size != 0)
            self._sock.close()
            self._keep_transport_socket()
            self._sock = None
            self._protocol = None
            self._loop = None
            self._detach_server()
        # Unless it has just ended (asyncio would raise InvalidStateError).
        if self._empty_waiter is not None and not self._empty_waiter.done():
            self._empty_waiter.set_exception(
                ConnectionError("Connection is closed by peer"))


cdef int _send_held_writes(object transport) except -1:
    """The loop's write_flusher.  What the send raises is this transport's
    fatal error, not the loop's: asyncio's write() would have raised it
    into the protocol's callback, which fails the transport (an epoll_ctl()
    ENOMEM arming the writer after a partial send stopped the loop)."""
    try:
        return (<SocketTransport>transport)._send_held()
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:
        (<SocketTransport>transport)._fatal_error(exc, 'Fatal write error on socket transport')
        return 0


set_write_flusher(_send_held_writes)


cdef void _sendmsg_once(int fd, list queue, Py_ssize_t head) noexcept:
    # One sendmsg() of the queue, its result unread (SocketTransport._drop_batch).
    cdef iovec iov[MINLOOP_IOV_MAX]
    cdef msghdr msg
    memset(&msg, 0, sizeof(msg))
    msg.msg_iov = iov
    msg.msg_iovlen = <size_t>fill_iovecs(queue, head, iov)
    sendmsg(fd, &msg, MSG_NOSIGNAL)


# ----------------------------------------------------------------------
# Servers: the reader callback of a listening socket


def accept_connections(loop, protocol_factory, sock, sslcontext, server,
                       int backlog, ssl_handshake_timeout,
                       ssl_shutdown_timeout, context):
    """Accept up to `backlog` connections now waiting on sock.

    The loop's reader for a listening socket, with the arguments of
    asyncio's BaseSelectorEventLoop._accept_connection.  `context`: the
    server's (asyncio 3.15's Server copies its creator's), of which each
    connection gets a copy of its own; None before 3.15.
    """
    cdef int i
    for i in range(backlog):
        try:
            conn, addr = sock.accept()
            if loop._debug:
                _logger.debug("%r got a new connection from %r: %r",
                              server, addr, conn)
            conn.setblocking(False)
        except ConnectionAbortedError:
            # The peer gave up before accept(): accept the next, where
            # asyncio does (ACCEPT_SKIPS_ABORTED), else wait for the next
            # wake-up.
            if _ACCEPT_SKIPS_ABORTED:
                continue
            return None
        except (BlockingIOError, InterruptedError):
            # Nothing more to accept now.
            return None
        except OSError as exc:
            # Out of fds or memory: pause accepting (it would only spin)
            # and try again a second later, as asyncio does.
            if exc.errno in (EMFILE, ENFILE, ENOBUFS, ENOMEM):
                loop.call_exception_handler({
                    'message': 'socket.accept() out of system resource',
                    'exception': exc,
                    'socket': _TransportSocket(sock),
                })
                loop._remove_reader(sock.fileno())
                if context is None:
                    loop.call_later(_aio_constants.ACCEPT_RETRY_DELAY, loop._start_serving,
                                    protocol_factory, sock, sslcontext, server,
                                    backlog, ssl_handshake_timeout,
                                    ssl_shutdown_timeout)
                else:
                    loop.call_later(_aio_constants.ACCEPT_RETRY_DELAY, loop._start_serving,
                                    protocol_factory, sock, sslcontext, server,
                                    backlog, ssl_handshake_timeout,
                                    ssl_shutdown_timeout, context)
                return None
            raise
        conn_context = context.copy() if context is not None else None
        if sslcontext is not None:
            extra = {'peername': addr}
            # TLS goes through asyncio's task-based path unchanged.
            if conn_context is not None:
                accept = loop._accept_connection2(
                    protocol_factory, conn, extra, sslcontext, server,
                    ssl_handshake_timeout, ssl_shutdown_timeout,
                    context=conn_context)
                loop.create_task(accept, context=conn_context)
                continue
            if _HAS_SSL_SHUTDOWN_TIMEOUT:
                accept = loop._accept_connection2(
                    protocol_factory, conn, extra, sslcontext, server,
                    ssl_handshake_timeout, ssl_shutdown_timeout)
            else:
                accept = loop._accept_connection2(
                    protocol_factory, conn, extra, sslcontext, server,
                    ssl_handshake_timeout)
            loop.create_task(accept)
            continue
        # asyncio sets each connection up in a task of its own, so the
        # protocol factory runs in a fresh copy of the server's context:
        # what one connection sets must not leak into the next.  From 3.15
        # that copy is the connection's context for good (the task runs in
        # it, and the transport's callbacks too).
        if conn_context is None:
            _copy_context().run(_serve_connection, loop, protocol_factory,
                                conn, addr, server, None)
        else:
            conn_context.run(_serve_connection, loop, protocol_factory, conn,
                             addr, server, conn_context)
    return None


def _serve_connection(loop, protocol_factory, conn, addr, server, context):
    cdef SocketTransport transport
    protocol = None
    try:
        protocol = protocol_factory()
        # SocketTransport(loop, conn, protocol, None, {'peername': addr},
        # server, context), without the dict.
        transport = SocketTransport.__new__(SocketTransport, loop)
        transport._setup(loop, conn, protocol, None, None, True, addr, server,
                         context)
    except (SystemExit, KeyboardInterrupt):
        conn.close()
        raise
    except BaseException as exc:
        # asyncio reports a failed protocol factory only in debug mode (and
        # leaves the socket to the garbage collector); the socket is closed
        # here so that the fd is not held until then.
        conn.close()
        if loop._debug:
            context = {
                'message': 'Error on transport creation for incoming connection',
                'exception': exc,
            }
            if protocol is not None:
                context['protocol'] = protocol
            loop.call_exception_handler(context)


def _alloc_faults(str site, long skip=-1, long fails=0):
    """Test builds only: includes.pxd's arm_alloc_faults for this module."""
    return arm_alloc_faults(site, skip, fails)
