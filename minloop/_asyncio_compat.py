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
from asyncio import coroutines as _coroutines
from asyncio import events as _events
from asyncio import format_helpers as _format_helpers
from asyncio import futures as _futures
from asyncio import selector_events as _selector_events
from asyncio import sslproto as _sslproto
from asyncio import tasks as _tasks
from asyncio import unix_events as _unix_events

# asyncio.Runner, used by asyncio.run() (3.11, bpo-47062).
HAS_RUNNER = hasattr(asyncio, 'Runner')
# asyncio.run(loop_factory=...) (3.12, gh-99388).
RUN_TAKES_LOOP_FACTORY = 'loop_factory' in inspect.signature(asyncio.run).parameters

# The event loop policy system is deprecated, to be removed in 3.16 (3.14,
# gh-127949): asyncio.set_event_loop_policy(), get_event_loop_policy() and
# the policy classes warn, and asyncio's own code uses the private
# functions added with the deprecation, which do not.
POLICIES_DEPRECATED = hasattr(_events, '_set_event_loop_policy')
get_event_loop_policy = getattr(_events, '_get_event_loop_policy',
                                _events.get_event_loop_policy)
set_event_loop_policy = getattr(_events, '_set_event_loop_policy',
                                _events.set_event_loop_policy)

# loop.create_task(coro, **kwargs) hands every keyword it is given (name=,
# context=, eager_start=...) to the task factory, which names the task
# itself (3.14, gh-128307); before, the factory got context= (and from
# 3.13.4 other keywords) and the loop called set_name().  3.14's signature
# is the one without a name= of its own.
_create_task_parameters = inspect.signature(_base_events.BaseEventLoop.create_task).parameters
CREATE_TASK_PASSES_KWARGS = 'name' not in _create_task_parameters
# loop.create_task() takes keywords besides name= and context= at all
# (3.13.4, gh-133745; before, a TypeError).
CREATE_TASK_TAKES_KWARGS = any(p.kind is inspect.Parameter.VAR_KEYWORD
                               for p in _create_task_parameters.values())

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


def _accept_skips_aborted():
    # Asked of asyncio's own accept loop, with a socket whose first accept()
    # fails with ECONNABORTED and the next finds nothing; the loop itself is
    # not touched on those paths.
    calls = []

    class Listener:
        def accept(self):
            calls.append(None)
            raise ConnectionAbortedError if len(calls) == 1 else BlockingIOError

    try:
        _selector_events.BaseSelectorEventLoop._accept_connection(None, None, Listener(),
                                                                   backlog=2)
    except Exception:
        return False
    return len(calls) == 2


# The accept loop of a server skips a connection aborted before accept()
# and goes on to the next (3.14 and 3.13.2, gh-127529); before, it returned
# until the next wake-up.
ACCEPT_SKIPS_ABORTED = _accept_skips_aborted()


def _stream_write_refusal():
    # Asked of asyncio's own write(), whose first act is the type check.
    try:
        _selector_events._SelectorSocketTransport.write(None, None)
    except TypeError as exc:
        return str(exc).replace("'NoneType'", '{!r}')
    except Exception:
        pass
    return 'data argument must be a bytes-like object, not {!r}'


# The socket transport's write() of what is not bytes, bytearray or
# memoryview: "data argument must be a bytes-like object, not 'str'", from
# 3.14 "... must be a bytes, bytearray, or memoryview object, not 'str'"; a
# format string for the type's name.
STREAM_WRITE_REFUSAL = _stream_write_refusal()

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

# The loop's sock_recvfrom()/sock_recvfrom_into() and sock_sendto() (3.11):
# Loop has them where asyncio's selector loop does.
HAS_SOCK_RECVFROM = hasattr(_selector_events.BaseSelectorEventLoop, 'sock_recvfrom')
HAS_SOCK_SENDTO = hasattr(_selector_events.BaseSelectorEventLoop, 'sock_sendto')

# Names some versions lack, with what stands for them there.

# 3.14 deprecates asyncio.iscoroutinefunction() (a DeprecationWarning per
# call) and 3.16 removes it; asyncio's own checks (debug mode's
# _check_callback, add_signal_handler) use the private one.
iscoroutinefunction = getattr(_coroutines, '_iscoroutinefunction',
                              _coroutines.iscoroutinefunction)

# The TLS layer's constants (3.11, bpo-44011): 3.10 has none, and minloop's
# TLS layer uses 3.11's values there: seconds, and KiB of buffer.
SSL_SHUTDOWN_TIMEOUT = getattr(_constants, 'SSL_SHUTDOWN_TIMEOUT', 30.0)
FLOW_CONTROL_HIGH_WATER_SSL_READ = getattr(_constants, 'FLOW_CONTROL_HIGH_WATER_SSL_READ', 256)
FLOW_CONTROL_HIGH_WATER_SSL_WRITE = getattr(_constants, 'FLOW_CONTROL_HIGH_WATER_SSL_WRITE', 512)

# unix_events.can_use_pidfd() (3.14): whether asyncio's own child watching
# uses pidfds, which decides the wording of its lost-status warning; None
# where asyncio has no such function.
can_use_pidfd = getattr(_unix_events, 'can_use_pidfd', None)

# The platform's default event loop policy, which minloop's extends
# (policy.py), so that what it offers besides loops (the child watcher API
# before 3.14) keeps working after install(): unix_events' where asyncio
# is built for Unix, else the base class (public from 3.14 on).
DEFAULT_POLICY_BASE = (getattr(_unix_events, '_UnixDefaultEventLoopPolicy', None)
                       or getattr(_events, 'BaseDefaultEventLoopPolicy', None)
                       or getattr(_events, '_BaseDefaultEventLoopPolicy', None))

# The native sock_sendfile() leaves the file's position just after what it
# sent when it ends, also when it sent nothing (3.14; before, a send of
# nothing left the position alone): _sock_sendfile_update_filepos() lost
# its total_sent parameter.
SENDFILE_ALWAYS_SEEKS = 'total_sent' not in inspect.signature(
    _unix_events._UnixSelectorEventLoop._sock_sendfile_update_filepos).parameters

# Not asyncio's, the interpreter's, for `minloop run` (_cli_run.py): python
# gives a script's __main__ module `__cached__ = None`, as the import system
# gives every module loaded from a file its __cached__, until 3.15, which
# dropped the attribute everywhere.
MODULES_HAVE_CACHED = hasattr(_base_events, '__cached__')

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
# (3.11), which _force_close() leaves as it was when it drops the buffer
# until 3.15 (whose _SelectorTransport._force_close() zeroes it); 3.10 sums
# the buffer.
DATAGRAM_SIZE_COUNTED = sys.version_info >= (3, 11)
FORCE_CLOSE_ZEROES_SIZE = sys.version_info >= (3, 15)

# _run_once's end_time (timers due before it run) is now plus the clock's
# resolution, or plus one ulp of now where that is more (3.15).
END_TIME_PAST_ULP = sys.version_info >= (3, 15)

# asyncio's C Future and Task (None without _asyncio); made without loop=
# they find the running loop in the thread's state (3.12+; before, through
# the module's cache and a thread-id compare): per future, in a running
# loop, Future() against Future(loop=loop): 3.12 300-350 ns against
# 530-610, 3.14 185-195 against 315-350, 3.15 180-210 against 290-315;
# 3.11 515-620 against 425-505.  (A type called with a keyword gets a dict
# made for its __init__.)
CFuture = getattr(_futures, '_CFuture', None)
CTask = getattr(_tasks, '_CTask', None)
FUTURE_FINDS_RUNNING_LOOP_FAST = sys.version_info >= (3, 12)

# A socket transport whose close() waited for its queue to drain counts the
# connection lost when the flush ends it (3.14, gh-156512): write(),
# writelines() and abort() are then counted or ignored, as after any loss;
# before, they failed on the cleared socket or loop.
FLUSHED_CLOSE_COUNTS_LOST = sys.version_info >= (3, 14)

# Subprocess _wait() futures are woken at the exit (3.10, and again from
# 3.14, gh-119710: a pipe a grandchild holds open must not stall wait()),
# else in connection_lost, after every pipe is drained (3.11-3.13): seen
# in whether _process_exited() touches them.
SUBPROCESS_WAKES_WAITERS_AT_EXIT = (
    '_exit_waiters' in _base_subprocess.BaseSubprocessTransport._process_exited.__code__.co_names)
# The subprocess transport's close() ignores PermissionError (a setuid
# child) as well when it kills (3.13).
SUBPROCESS_KILL_IGNORES_PERMISSION = sys.version_info >= (3, 13)
