"""Loop: minloop's event loop, the compiled LoopCore plus asyncio's surface.

Everything on the hot path lives in loop.pyx.  What is here is rare work
(executors, exception reporting, async generator bookkeeping, name
resolution): where asyncio's BaseEventLoop implements such a method only in
terms of the loop's public and documented-private attributes, Loop uses
asyncio's own function, so its behaviour and messages follow the running
Python version exactly.
"""

import asyncio
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

from . import sock_ops as _sock_ops
from .sendfile_fallback import sendfile_fallback as _sendfile_fallback
from . import stream as _stream
from . import tls as _tls
from . import subprocess as _subprocess
from .loop import LoopCore
from .unix_events import SignalHandlingMixin

_BaseEventLoop = _aio_base.BaseEventLoop
_BaseSelectorEventLoop = _aio_selector.BaseSelectorEventLoop
_UnixSelectorEventLoop = _aio_unix._UnixSelectorEventLoop
_HAS_SSL_SHUTDOWN_TIMEOUT = hasattr(_aio_constants, 'SSL_SHUTDOWN_TIMEOUT')

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


class Loop(LoopCore, SignalHandlingMixin, asyncio.AbstractEventLoop):
    """A drop-in replacement for asyncio's event loop."""

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
        # fd -> the transport that owns it (sock_* and add_reader refuse it).
        self._transports = weakref.WeakValueDictionary()
        # Listening Unix socket -> inode of its path, for the path's removal
        # when the server closes (3.13's create_unix_server(cleanup_socket=)).
        self._unix_server_sockets = {}
        self._init_signals()
        self.set_debug(_aio_coroutines._is_debug_mode())

    def __repr__(self):
        return (f'<{type(self).__name__} running={self.is_running()} '
                f'closed={self.is_closed()} debug={self.get_debug()}>')

    def __del__(self, _warn=warnings.warn):
        if not self.is_closed():
            _warn(f"unclosed event loop {self!r}", ResourceWarning, source=self)
            if not self.is_running():
                self.close()

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

    # Running to completion, async generators, executors and exception
    # reporting: asyncio's own code over our attributes.
    run_until_complete = _BaseEventLoop.run_until_complete
    _set_coroutine_origin_tracking = _BaseEventLoop._set_coroutine_origin_tracking
    _asyncgen_firstiter_hook = _BaseEventLoop._asyncgen_firstiter_hook
    _asyncgen_finalizer_hook = _BaseEventLoop._asyncgen_finalizer_hook
    shutdown_asyncgens = _BaseEventLoop.shutdown_asyncgens
    run_in_executor = _BaseEventLoop.run_in_executor
    set_default_executor = _BaseEventLoop.set_default_executor
    shutdown_default_executor = _BaseEventLoop.shutdown_default_executor
    _do_shutdown = _BaseEventLoop._do_shutdown
    _check_default_executor = _BaseEventLoop._check_default_executor
    get_exception_handler = _BaseEventLoop.get_exception_handler
    set_exception_handler = _BaseEventLoop.set_exception_handler
    default_exception_handler = _BaseEventLoop.default_exception_handler
    call_exception_handler = _BaseEventLoop.call_exception_handler
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

    # ------------------------------------------------------------------
    # Transports and servers.  create_connection, create_server and their
    # Unix and accepted-socket variants are asyncio's own functions (name
    # resolution, happy eyeballs, socket options, Server): they reach the
    # compiled code through the four methods below.

    def _make_socket_transport(self, sock, protocol, waiter=None, *,
                               extra=None, server=None):
        return _stream.SocketTransport(self, sock, protocol, waiter, extra,
                                       server)

    def _make_ssl_transport(
            self, rawsock, protocol, sslcontext, waiter=None, *,
            server_side=False, server_hostname=None, extra=None, server=None,
            ssl_handshake_timeout=_aio_constants.SSL_HANDSHAKE_TIMEOUT,
            ssl_shutdown_timeout=None):
        # TLS is a protocol between the socket transport and the
        # application's protocol: minloop's compiled one (tls.pyx), with
        # asyncio 3.11+'s behaviour on every Python.
        ssl_protocol = _tls.SSLProtocol(
            self, protocol, sslcontext, waiter, server_side, server_hostname,
            ssl_handshake_timeout=ssl_handshake_timeout,
            ssl_shutdown_timeout=ssl_shutdown_timeout)
        _stream.SocketTransport(self, rawsock, ssl_protocol, None, extra,
                                server)
        return ssl_protocol._app_transport

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
        transport.set_protocol(ssl_protocol)
        conmade_cb = self.call_soon(ssl_protocol.connection_made, transport)
        resume_cb = self.call_soon(transport.resume_reading)
        try:
            await waiter
        except BaseException:
            transport.close()
            conmade_cb.cancel()
            resume_cb.cancel()
            raise
        return ssl_protocol._app_transport

    def _start_serving(self, protocol_factory, sock, sslcontext=None,
                       server=None, backlog=100,
                       ssl_handshake_timeout=_aio_constants.SSL_HANDSHAKE_TIMEOUT,
                       ssl_shutdown_timeout=None):
        if _HAS_SSL_SHUTDOWN_TIMEOUT and ssl_shutdown_timeout is None:
            ssl_shutdown_timeout = _aio_constants.SSL_SHUTDOWN_TIMEOUT
        self._add_reader(sock.fileno(), _stream.accept_connections, self,
                         protocol_factory, sock, sslcontext, server, backlog,
                         ssl_handshake_timeout, ssl_shutdown_timeout)

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


# The sock_* coroutines: compiled (sock_ops.pyx), following asyncio's
# selector loop step for step.  Each is bound only where the running
# Python's selector loop has it (sock_recvfrom & co are new in 3.11).
for _name in _sock_ops.METHODS:
    if hasattr(_aio_selector.BaseSelectorEventLoop, _name):
        setattr(Loop, _name, getattr(_sock_ops, _name))
Loop._ensure_resolved = _BaseEventLoop._ensure_resolved

# Connection set-up: asyncio's code for this Python version (the names a
# version lacks are skipped).
for _name in ('create_connection', '_connect_sock',
              '_create_connection_transport', 'create_server',
              '_create_server_getaddrinfo', 'connect_accepted_socket'):
    if hasattr(_BaseEventLoop, _name):
        setattr(Loop, _name, getattr(_BaseEventLoop, _name))
for _name in ('_ensure_fd_no_transport', '_accept_connection2'):
    setattr(Loop, _name, getattr(_BaseSelectorEventLoop, _name))
for _name in ('create_unix_connection', 'create_unix_server'):
    setattr(Loop, _name, getattr(_UnixSelectorEventLoop, _name))

# sendfile: asyncio's sock_sendfile() and sendfile() (argument checks, the
# choice of path, the read-and-send fallbacks) over compiled native hooks
# (sock_ops.pyx); the transport fallback is sendfile_fallback.py's.
for _name in ('sock_sendfile', '_sock_sendfile_fallback',
              '_check_sendfile_params', 'sendfile'):
    setattr(Loop, _name, getattr(_BaseEventLoop, _name))
Loop._sock_sendfile_native = _sock_ops._sock_sendfile_native
Loop._sendfile_native = _sock_ops._sendfile_native
Loop._sendfile_fallback = _sendfile_fallback

del _name


# --- subprocesses (subprocess.py) ---------------------------------------------
# subprocess_exec/subprocess_shell are asyncio's own coroutines (argument
# checks and their ValueErrors, debug logging); they end in
# _make_subprocess_transport, which starts the child on our transport: a pidfd
# (or a thread) sees its exit, no child watcher is involved.
Loop.subprocess_exec = _BaseEventLoop.subprocess_exec
Loop.subprocess_shell = _BaseEventLoop.subprocess_shell
Loop._log_subprocess = _BaseEventLoop._log_subprocess
Loop._make_subprocess_transport = _subprocess.make_subprocess_transport


def new_event_loop() -> Loop:
    """Return a new minloop event loop."""
    return Loop()


# --- datagram endpoints (datagram.pyx) ---------------------------------------
# create_datagram_endpoint is asyncio's own coroutine: address resolution,
# reuse_port, allow_broadcast, Unix datagram sockets and sock= follow the
# running Python version exactly; it ends in _make_datagram_transport, which
# makes our compiled transport.
from .datagram import DatagramTransport as _DatagramTransport  # noqa: E402


def _make_datagram_transport(self, sock, protocol, address=None,
                             waiter=None, extra=None):
    return _DatagramTransport(self, sock, protocol, address, waiter, extra)


Loop._make_datagram_transport = _make_datagram_transport
Loop.create_datagram_endpoint = _BaseEventLoop.create_datagram_endpoint


# --- pipes (pipes.pyx) --------------------------------------------------------
# connect_read_pipe/connect_write_pipe are asyncio's own coroutines; they,
# and the subprocess transports, make the compiled pipe transports through
# asyncio's two hooks below.
from .pipes import ReadPipeTransport as _ReadPipeTransport  # noqa: E402
from .pipes import WritePipeTransport as _WritePipeTransport  # noqa: E402


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


def _make_read_pipe_transport(self, pipe, protocol, waiter=None, extra=None):
    return ReadPipeTransport(self, pipe, protocol, waiter, extra)


def _make_write_pipe_transport(self, pipe, protocol, waiter=None, extra=None):
    return WritePipeTransport(self, pipe, protocol, waiter, extra)


Loop._make_read_pipe_transport = _make_read_pipe_transport
Loop._make_write_pipe_transport = _make_write_pipe_transport
Loop.connect_read_pipe = _BaseEventLoop.connect_read_pipe
Loop.connect_write_pipe = _BaseEventLoop.connect_write_pipe
