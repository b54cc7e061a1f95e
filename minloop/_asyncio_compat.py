"""What the running asyncio does, where its versions differ: the one home of
minloop's asyncio behaviour switches.

Each flag is detected from asyncio itself where an attribute or signature
shows the change; where the change hides inside a method body, the version
that made it is the test.  Each is read once at import; the compiled modules
copy the ones they use into C variables.  Interpreter facts needed at compile
time (struct layouts, C API) are in src/py_compat.h instead.
"""

import asyncio
import inspect
import sys
from asyncio import base_events as _base_events
from asyncio import base_subprocess as _base_subprocess
from asyncio import constants as _constants
from asyncio import events as _events
from asyncio import format_helpers as _format_helpers
from asyncio import selector_events as _selector_events
from asyncio import sslproto as _sslproto
from asyncio import unix_events as _unix_events

# asyncio.Runner, used by asyncio.run() (3.11, bpo-47062).
HAS_RUNNER = hasattr(asyncio, 'Runner')
# asyncio.run(loop_factory=...) (3.12, gh-99388).
RUN_TAKES_LOOP_FACTORY = 'loop_factory' in inspect.signature(asyncio.run).parameters

# call_soon_threadsafe() returns an events._ThreadSafeHandle, whose cancel()
# and cancelled() from another thread wait, under its lock, while its
# callback runs (3.14 has it, 3.13.0 not); None where asyncio has none.
ThreadSafeHandle = getattr(_events, '_ThreadSafeHandle', None)

# format_helpers._format_callback_source(..., debug) (3.13, gh-112997).
FORMAT_TAKES_DEBUG = 'debug' in inspect.signature(
    _format_helpers._format_callback_source).parameters

# Server tracks its transports: _attach(transport)/_detach(transport)
# (3.13, gh-113538).
SERVER_TRACKS_TRANSPORTS = 'transport' in inspect.signature(
    _base_events.Server._attach).parameters

# The socket transport has its own writelines() (3.12, gh-91166); before, it
# is WriteTransport's, which joins the buffers and calls write(), so its
# errors name write().
WRITELINES_JOINS = 'writelines' not in vars(_selector_events._SelectorSocketTransport)

# constants.SSL_SHUTDOWN_TIMEOUT and ssl_shutdown_timeout on the TLS paths
# (3.11, bpo-44011).
HAS_SSL_SHUTDOWN_TIMEOUT = hasattr(_constants, 'SSL_SHUTDOWN_TIMEOUT')

# Selector transports, the datagram one included, got is_reading()/
# pause_reading()/resume_reading() (3.11); before, a datagram
# transport inherited ReadTransport's, which raise NotImplementedError.
DATAGRAM_READING_API = 'is_reading' in vars(_selector_events._SelectorTransport)
# The read pipe transport got is_reading() (3.11); before, ReadTransport's
# raised NotImplementedError.
PIPE_READING_API = 'is_reading' in vars(_unix_events._UnixReadPipeTransport)

# The TLS app transport is closing once the socket transport is
# (3.12.8/3.13.1, gh-118950).
TLS_CLOSING_FOLLOWS_TRANSPORT = hasattr(_sslproto.SSLProtocol, '_is_transport_closing')

# SSLProtocol._abort(exc) ends the connection with the socket transport's
# _force_close(exc) (3.13); before, _abort() took no argument and called the
# transport's abort() (which is _force_close(None) on asyncio's transports).
TLS_ABORT_PASSES_EXC = 'exc' in inspect.signature(_sslproto.SSLProtocol._abort).parameters

# ssl_shutdown_timeout runs on after a clean TLS shutdown until the socket
# transport is lost (its close() may wait on a peer that does not read), and
# starts there if the peer began the shutdown (3.14): seen in whether
# SSLProtocol._on_shutdown_complete() schedules a call (3.10's SSLProtocol
# has no such method).
_on_shutdown_complete = getattr(_sslproto.SSLProtocol, '_on_shutdown_complete', None)
TLS_SHUTDOWN_TIMEOUT_COVERS_CLOSE = (
    _on_shutdown_complete is not None
    and 'call_later' in _on_shutdown_complete.__code__.co_names)

# By version from here on: the change is inside a method body.

# Datagram transports send empty datagrams (3.13, gh-113812; earlier ones
# drop them) and count 8 header bytes per buffered datagram in
# get_write_buffer_size().  (3.13.0 subtracted only the payload when a
# buffered datagram left, so its count crept up; later 3.13 releases
# subtract both, as minloop does.)
DATAGRAM_SENDS_EMPTY = sys.version_info >= (3, 13)
DATAGRAM_HEADER_SIZE = 8 if sys.version_info >= (3, 13) else 0
# The datagram transport keeps a running count for get_write_buffer_size()
# (3.11), which _force_close() leaves as it was when it drops the buffer;
# 3.10 sums the buffer.
DATAGRAM_SIZE_COUNTED = sys.version_info >= (3, 11)

# Subprocess _wait() futures are woken at the exit (3.10, and again from
# 3.14, gh-119710: a pipe a grandchild holds open must not stall wait()),
# else in connection_lost, after every pipe is drained (3.11-3.13): seen
# in whether _process_exited() touches them.
SUBPROCESS_WAKES_WAITERS_AT_EXIT = (
    '_exit_waiters' in _base_subprocess.BaseSubprocessTransport._process_exited.__code__.co_names)
# The subprocess transport's close() ignores PermissionError (a setuid
# child) as well when it kills (3.13).
SUBPROCESS_KILL_IGNORES_PERMISSION = sys.version_info >= (3, 13)
