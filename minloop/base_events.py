"""Loop: minloop's event loop, the compiled LoopCore plus asyncio's surface.

Everything on the hot path lives in loop.pyx.  What is here is rare work
(executors, exception reporting, async generator bookkeeping, name
resolution): where asyncio's BaseEventLoop implements such a method only in
terms of the loop's public and documented-private attributes, Loop uses
asyncio's own function, so its behaviour and messages follow the running
Python version exactly.
"""

import asyncio
import math
import os
import socket
import ssl
import warnings
import weakref

from asyncio import base_events as _aio_base
from asyncio import coroutines as _aio_coroutines
from asyncio import constants as _aio_constants
from asyncio import selector_events as _aio_selector
from asyncio import unix_events as _aio_unix

from . import _asyncio_compat
from . import fd_owners as _fd_owners
from . import sendfile_fallback as _sendfile_fallback_module
from . import sock_ops as _sock_ops
from . import stream as _stream
from . import subprocess as _subprocess
from . import tls as _tls
from .datagram import DatagramTransport as _DatagramTransport
from .loop import LoopCore
from .pipes import ReadPipeTransport as _ReadPipeTransport
from .pipes import WritePipeTransport as _WritePipeTransport
from .selector_view import FdTableView as _FdTableView
from .signals import SignalHandlingMixin
from .stall import set_stall_handler as _set_stall_handler
from .telemetry import environ as _telemetry_environ
from .stall import set_stall_threshold as _set_stall_threshold

_BaseEventLoop = _aio_base.BaseEventLoop
_BaseSelectorEventLoop = _aio_selector.BaseSelectorEventLoop
_UnixSelectorEventLoop = _aio_unix._UnixSelectorEventLoop


def _is_numeric_host(host):
    """True for None or an IP literal: the C library's getaddrinfo answers
    these without any lookup (no DNS, no hosts file)."""
    if host is None:
        return True
    if isinstance(host, bytes):
        try:
            host = host.decode('ascii')
        except UnicodeDecodeError:
            return False
    elif not isinstance(host, str):
        return False
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
            return True
        except (OSError, ValueError):
            pass
    return False


def _is_numeric_port(port):
    """True for None, an int or ASCII digits: no services-database lookup.
    (str.isdigit() alone also accepts other scripts' digits, which the C
    library takes for a service name.)"""
    if port is None or isinstance(port, int):
        return True
    if isinstance(port, (str, bytes)):
        return port.isascii() and port.isdigit()
    return False


class ReadPipeTransport(_ReadPipeTransport):
    """The compiled read pipe transport, taking instance attributes.

    asyncio's transports are Python objects: code may set attributes on
    them (CPython's test_pause_reading replaces pause_reading on the
    subprocess's stdout transport with a mock).  A Python subclass gives
    ours an instance __dict__, which a compiled type with a heap base
    cannot have; pipes are not on a per-message path.
    """


class WritePipeTransport(_WritePipeTransport):
    """The compiled write pipe transport, taking instance attributes."""


class Loop(LoopCore, SignalHandlingMixin, asyncio.AbstractEventLoop):
    """A drop-in replacement for asyncio's event loop.

    The sections follow asyncio.AbstractEventLoop's.  A method named here as
    `name = _BaseEventLoop.name` (or _BaseSelectorEventLoop's,
    _UnixSelectorEventLoop's) is asyncio's own function running over our
    attributes; the compiled ones are LoopCore's (loop.pyx) or sock_ops.pyx's.
    """

    # The loop's own Python attributes live in slots, so that its __dict__
    # stays empty until a program sets one of its own: from 3.12 the
    # interpreter specialises `loop.call_soon(...)` and every other method
    # lookup on a loop only while that dict is not made (asyncio's loop keeps
    # its attributes inline, which 3.12+ does for plain classes only, not for
    # a subclass of a compiled one).  A loop still takes any other attribute
    # in its __dict__, which asyncio.AbstractEventLoop provides.  The last
    # three are SignalHandlingMixin's (a mixin beside LoopCore cannot have
    # slots of its own).
    __slots__ = ('_exception_handler', '_default_executor', '_executor_shutdown_called',
                 '_asyncgens', '_asyncgens_shutdown_called',
                 '_coroutine_origin_tracking_enabled',
                 '_coroutine_origin_tracking_saved_depth', '_unix_server_sockets',
                 '_signal_handlers', '_ssock', '_csock', '_lag_probe')

    def __init__(self):
        self._task_factory = None
        self._exception_handler = None
        self._default_executor = None
        self._executor_shutdown_called = False
        self._asyncgens = weakref.WeakSet()
        self._asyncgens_shutdown_called = False
        self._coroutine_origin_tracking_enabled = False
        self._coroutine_origin_tracking_saved_depth = None
        self._current_handle = None
        # Listening Unix socket -> inode of its path, for the path's removal
        # when the server closes (3.13's create_unix_server(cleanup_socket=)).
        self._unix_server_sockets = {}
        self._lag_probe = None   # monitor_lag()'s timer, while it runs
        self._init_signals()
        self.set_debug(_aio_coroutines._is_debug_mode())
        if os.environ.get(_telemetry_environ.STALL) or os.environ.get(_telemetry_environ.METRICS):
            # Telemetry asked for from outside the program (python -m
            # minloop run --stall/--metrics, or the variables themselves).
            try:
                _telemetry_environ.arm(self)
            except BaseException:
                self.close()
                raise

    def __repr__(self):
        return (f'<{type(self).__name__} running={self.is_running()} '
                f'closed={self.is_closed()} debug={self.get_debug()}>')

    def __del__(self, _warn=warnings.warn):
        if not self.is_closed():
            _warn(f"unclosed event loop {self!r}", ResourceWarning, source=self)
            if not self.is_running():
                self.close()

    # ------------------------------------------------------------------
    # Running and stopping the event loop.  run_forever, stop, is_running
    # and is_closed are compiled (LoopCore).  Running to completion and
    # async generators: asyncio's own code over our attributes.

    run_until_complete = _BaseEventLoop.run_until_complete
    _set_coroutine_origin_tracking = _BaseEventLoop._set_coroutine_origin_tracking

    def close(self):
        """Close the loop: drop pending callbacks, release every fd it opened.

        The loop must not be running.  Idempotent and irreversible.
        """
        if self.is_running():
            raise RuntimeError("Cannot close a running event loop")
        if self.is_closed():
            return
        self._close_signals()
        if self._debug:
            _aio_base.logger.debug("Close %r", self)
        self._close_core()
        self._executor_shutdown_called = True
        executor = self._default_executor
        if executor is not None:
            self._default_executor = None
            executor.shutdown(wait=False)

    _asyncgen_firstiter_hook = _BaseEventLoop._asyncgen_firstiter_hook
    _asyncgen_finalizer_hook = _BaseEventLoop._asyncgen_finalizer_hook
    shutdown_asyncgens = _BaseEventLoop.shutdown_asyncgens
    shutdown_default_executor = _BaseEventLoop.shutdown_default_executor
    _do_shutdown = _BaseEventLoop._do_shutdown

    # ------------------------------------------------------------------
    # Scheduling callbacks, futures and tasks: compiled (LoopCore).

    # ------------------------------------------------------------------
    # Threads: call_soon_threadsafe is compiled (LoopCore); the executor is
    # asyncio's own code over our attributes.

    run_in_executor = _BaseEventLoop.run_in_executor
    set_default_executor = _BaseEventLoop.set_default_executor
    _check_default_executor = _BaseEventLoop._check_default_executor

    # ------------------------------------------------------------------
    # Network I/O: name resolution.

    _getaddrinfo_debug = _BaseEventLoop._getaddrinfo_debug

    async def getaddrinfo(self, host, port, *,
                          family=0, type=0, proto=0, flags=0):
        """Resolve host and port, as socket.getaddrinfo in an executor.

        IP literals with a numeric port are resolved inline: the C library
        answers them without any lookup, so the executor round trip would
        only add latency.  The call is the one asyncio makes in its executor,
        with the caller's arguments unchanged, so that every answer and
        every error (bad flags, family, type, proto, port) is asyncio's.
        """
        if self._debug:
            getaddr_func = self._getaddrinfo_debug
        else:
            getaddr_func = socket.getaddrinfo
        if _is_numeric_host(host) and _is_numeric_port(port):
            # run_in_executor's checks first, as asyncio's call meets them.
            self._check_closed()
            self._check_default_executor()
            return getaddr_func(host, port, family, type, proto, flags)
        return await self.run_in_executor(
            None, getaddr_func, host, port, family, type, proto, flags)

    async def getnameinfo(self, sockaddr, flags=0):
        return await self.run_in_executor(
            None, socket.getnameinfo, sockaddr, flags)

    _ensure_resolved = _BaseEventLoop._ensure_resolved

    # ------------------------------------------------------------------
    # Network I/O: transports and servers.  create_connection,
    # create_server and their Unix and accepted-socket variants are
    # asyncio's own functions (name resolution, happy eyeballs, socket
    # options, Server): they reach the compiled code through
    # _make_socket_transport, _make_ssl_transport, _start_serving and
    # _stop_serving below.
    #
    # From 3.15 those functions pass context=: the context every protocol
    # callback of the connection runs in (a copy of the caller's for a
    # client, of the Server's creator's for each accepted connection).
    # Ours take it on every version; asyncio before 3.15 never passes it,
    # and None means its behaviour (each callback in a copy of the context
    # current when it was scheduled).

    create_connection = _BaseEventLoop.create_connection
    _connect_sock = _BaseEventLoop._connect_sock
    _create_connection_transport = _BaseEventLoop._create_connection_transport
    create_server = _BaseEventLoop.create_server
    _create_server_getaddrinfo = _BaseEventLoop._create_server_getaddrinfo
    _accept_connection2 = _BaseSelectorEventLoop._accept_connection2

    def _make_socket_transport(self, sock, protocol, waiter=None, *,
                               extra=None, server=None, context=None):
        return _stream.SocketTransport(self, sock, protocol, waiter, extra,
                                       server, context)

    def _make_ssl_transport(
            self, rawsock, protocol, sslcontext, waiter=None, *,
            server_side=False, server_hostname=None, extra=None, server=None,
            ssl_handshake_timeout=_aio_constants.SSL_HANDSHAKE_TIMEOUT,
            ssl_shutdown_timeout=None, context=None):
        # TLS is a protocol between the socket transport and the
        # application's protocol: minloop's compiled one (tls.pyx), with
        # asyncio 3.11+'s behaviour on every Python.
        ssl_protocol = _tls.SSLProtocol(
            self, protocol, sslcontext, waiter, server_side, server_hostname,
            ssl_handshake_timeout=ssl_handshake_timeout,
            ssl_shutdown_timeout=ssl_shutdown_timeout)
        _stream.SocketTransport(self, rawsock, ssl_protocol, None, extra,
                                server, context)
        return ssl_protocol._app_transport

    def _start_serving(self, protocol_factory, sock, sslcontext=None,
                       server=None, backlog=100,
                       ssl_handshake_timeout=_aio_constants.SSL_HANDSHAKE_TIMEOUT,
                       ssl_shutdown_timeout=None, context=None):
        if _asyncio_compat.HAS_SSL_SHUTDOWN_TIMEOUT and ssl_shutdown_timeout is None:
            ssl_shutdown_timeout = _aio_constants.SSL_SHUTDOWN_TIMEOUT
        # start_server()'s readers made as the compiled-steps subclass.
        protocol_factory = _stream.made_as_steps_readers(protocol_factory)
        self._add_reader(sock.fileno(), _stream.accept_connections, self,
                         protocol_factory, sock, sslcontext, server, backlog,
                         ssl_handshake_timeout, ssl_shutdown_timeout, context)

    def _stop_serving(self, sock):
        # A Unix socket's path is removed only if it is still this socket's
        # (same inode): another server may have been bound there since.
        ino = self._unix_server_sockets.pop(sock, None)
        path = sock.getsockname() if ino is not None else None
        self._remove_reader(sock.fileno())
        sock.close()
        if path:
            try:
                if os.stat(path).st_ino == ino:
                    os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as err:
                _aio_base.logger.error(
                    'Unable to clean up listening UNIX socket %r: %r', path, err)

    # sendfile: asyncio's sendfile() (argument checks, the choice of path)
    # over the compiled native hook (sock_ops.pyx); the transport fallback is
    # sendfile_fallback.py's.
    sendfile = _BaseEventLoop.sendfile
    _sendfile_native = _sock_ops._sendfile_native
    _sendfile_fallback = _sendfile_fallback_module.sendfile_fallback

    async def start_tls(self, transport, protocol, sslcontext, *,
                        server_side=False, server_hostname=None,
                        ssl_handshake_timeout=None,
                        ssl_shutdown_timeout=None):
        """Upgrade transport to TLS; return the transport protocol
        should use from now on (asyncio's start_tls, over the compiled
        TLS protocol)."""
        if not isinstance(sslcontext, ssl.SSLContext):
            raise TypeError(
                f'sslcontext is expected to be an instance of '
                f'ssl.SSLContext, got {sslcontext!r}')
        if not getattr(transport, '_start_tls_compatible', False):
            raise TypeError(
                f'transport {transport!r} is not supported by start_tls()')
        waiter = self.create_future()
        ssl_protocol = _tls.SSLProtocol(
            self, protocol, sslcontext, waiter, server_side,
            server_hostname, call_connection_made=False,
            ssl_handshake_timeout=ssl_handshake_timeout,
            ssl_shutdown_timeout=ssl_shutdown_timeout)
        # Paused first, so the TLS protocol cannot get data before its
        # connection_made.
        transport.pause_reading()
        if server_side and isinstance(protocol, asyncio.StreamReaderProtocol):
            # What the stream read ahead (the client's first TLS record) is
            # the TLS protocol's, else the handshake waits for it forever
            # (gh-142352, asyncio 3.14; harmless where asyncio lacks it).
            reader = getattr(protocol, '_stream_reader', None)
            if reader is not None and reader._buffer:
                ssl_protocol._incoming.write(reader._buffer)
                reader._buffer.clear()
        transport.set_protocol(ssl_protocol)
        conmade_cb = self.call_soon(ssl_protocol.connection_made, transport)
        resume_cb = self.call_soon(transport.resume_reading)
        try:
            await waiter
        except BaseException:
            transport.close()
            conmade_cb.cancel()
            resume_cb.cancel()
            # The waiter holds the exception, whose traceback holds this
            # frame: a cycle that would keep the transport alive until a
            # collection (gh-159049).
            waiter = None
            raise
        return ssl_protocol._app_transport

    create_unix_connection = _UnixSelectorEventLoop.create_unix_connection
    create_unix_server = _UnixSelectorEventLoop.create_unix_server
    connect_accepted_socket = _BaseEventLoop.connect_accepted_socket

    # Datagram endpoints (datagram.pyx): create_datagram_endpoint is
    # asyncio's own coroutine: address resolution, reuse_port,
    # allow_broadcast, Unix datagram sockets and sock= follow the running
    # Python version exactly; it ends in _make_datagram_transport, which
    # makes our compiled transport.
    create_datagram_endpoint = _BaseEventLoop.create_datagram_endpoint

    def _make_datagram_transport(self, sock, protocol, address=None,
                                 waiter=None, extra=None):
        return _DatagramTransport(self, sock, protocol, address, waiter, extra)

    # ------------------------------------------------------------------
    # Pipes and subprocesses.  connect_read_pipe/connect_write_pipe are
    # asyncio's own coroutines; they, and the subprocess transports, make
    # the compiled pipe transports (pipes.pyx) through asyncio's two hooks
    # below.

    connect_read_pipe = _BaseEventLoop.connect_read_pipe
    connect_write_pipe = _BaseEventLoop.connect_write_pipe

    def _make_read_pipe_transport(self, pipe, protocol, waiter=None,
                                  extra=None):
        return ReadPipeTransport(self, pipe, protocol, waiter, extra)

    def _make_write_pipe_transport(self, pipe, protocol, waiter=None,
                                   extra=None):
        return WritePipeTransport(self, pipe, protocol, waiter, extra)

    # subprocess_exec/subprocess_shell are asyncio's own coroutines (argument
    # checks and their ValueErrors, debug logging); they end in
    # _make_subprocess_transport, which starts the child on our transport
    # (subprocess.py): a pidfd (or a thread) sees its exit, no child watcher
    # is involved.
    subprocess_shell = _BaseEventLoop.subprocess_shell
    subprocess_exec = _BaseEventLoop.subprocess_exec
    _log_subprocess = _BaseEventLoop._log_subprocess
    _make_subprocess_transport = _subprocess.make_subprocess_transport

    # ------------------------------------------------------------------
    # Ready-based callback registration: add_reader & co are compiled
    # (LoopCore); _transports (fd -> transport, a mapping over the fd
    # table) and asyncio's _ensure_fd_no_transport check over it are
    # fd_owners.pyx's.

    _transports = property(_fd_owners._transports)
    _ensure_fd_no_transport = _fd_owners._ensure_fd_no_transport

    @property
    def _selector(self):
        """asyncio's selector, as a read-only view of the fd table
        (selector_view.pyx); None once the loop is closed, as asyncio's."""
        if self.is_closed():
            return None
        return _FdTableView(self)

    # ------------------------------------------------------------------
    # Completion based I/O: the sock_* coroutines are compiled
    # (sock_ops.pyx), following asyncio's selector loop step for step.  Each
    # is bound only where the running Python's selector loop has it.

    sock_recv = _sock_ops.sock_recv
    sock_recv_into = _sock_ops.sock_recv_into
    if _asyncio_compat.HAS_SOCK_RECVFROM:
        sock_recvfrom = _sock_ops.sock_recvfrom
        sock_recvfrom_into = _sock_ops.sock_recvfrom_into
    sock_sendall = _sock_ops.sock_sendall
    if _asyncio_compat.HAS_SOCK_SENDTO:
        sock_sendto = _sock_ops.sock_sendto
    sock_connect = _sock_ops.sock_connect
    sock_accept = _sock_ops.sock_accept

    # sock_sendfile: asyncio's own (argument checks, the choice of path, the
    # read-and-send fallback), and its native path's checks (os.sendfile
    # available, a file with an fd and a size), over the compiled step.
    sock_sendfile = _BaseEventLoop.sock_sendfile
    _sock_sendfile_native = _UnixSelectorEventLoop._sock_sendfile_native
    _sock_sendfile_native_impl = _sock_ops._sock_sendfile_native_impl
    _sock_sendfile_fallback = _BaseEventLoop._sock_sendfile_fallback
    _check_sendfile_params = _BaseEventLoop._check_sendfile_params

    # ------------------------------------------------------------------
    # Signal handling: SignalHandlingMixin (signals.py).
    # Task factory: compiled (LoopCore).

    # ------------------------------------------------------------------
    # Error handlers: asyncio's own code over our attributes.

    get_exception_handler = _BaseEventLoop.get_exception_handler
    set_exception_handler = _BaseEventLoop.set_exception_handler
    default_exception_handler = _BaseEventLoop.default_exception_handler
    # call_exception_handler: compiled (LoopCore), asyncio's counted.

    # Debug flag management: compiled (LoopCore).

    # ------------------------------------------------------------------
    # Beyond asyncio: telemetry (stats, utilization, lag, busy_time, stalls)
    # is compiled (LoopCore); the stall watchdog is stall.pyx's.

    def set_stall_handler(self, handler, threshold=0.1):
        """Call handler(report) on the loop's thread after any callback that
        kept the loop from running for `threshold` seconds or more (a
        minloop.stall.StallReport: duration, callback, stack, gc_time).

        A watchdog thread, waiting without the GIL, notices the stall while
        it lasts and samples the loop thread's stack then.  None disarms it
        (off by default; the thread ends).  Any thread may call this.
        """
        _set_stall_handler(self, handler, threshold)

    def monitor_lag(self, resolution=0.01):
        """Keep a timer due every `resolution` seconds (Node's
        monitorEventLoopDelay), so that loop.lag sees a block even in a
        program with no timers of its own: each firing records how late it
        was.  None stops it.  Off by default, and off it costs nothing; on,
        one timer and one callback per `resolution`.  Call it from the
        loop's thread (or before the loop runs), as call_later.
        """
        if self._lag_probe is not None:
            self._lag_probe.cancel()
            self._lag_probe = None
        if resolution is None:
            return
        if isinstance(resolution, bool) or not isinstance(resolution, (int, float)):
            raise TypeError(f'resolution should be a positive number, got {resolution!r}')
        if not 0 < resolution < math.inf:
            raise ValueError(f'resolution should be a positive number, got {resolution!r}')
        self._lag_probe = self.call_later(resolution, self._lag_tick, float(resolution))

    def _lag_tick(self, resolution):
        # Its lateness is recorded as it fires (telemetry.h); the next one.
        self._lag_probe = self.call_later(resolution, self._lag_tick, resolution)

    def set_stall_threshold(self, threshold):
        """Arm the stall watchdog at `threshold` seconds, keeping the handler
        armed (if any): with none, stalls are only counted (loop.stalls,
        the exporters' minloop_stalls_total and minloop_stall_seconds, top).
        None disarms it.  Any thread may call this.
        """
        _set_stall_threshold(self, threshold)


def new_event_loop() -> Loop:
    """Return a new minloop event loop."""
    return Loop()
