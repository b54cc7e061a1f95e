"""The subprocess transport: loop.subprocess_exec/subprocess_shell's child.

asyncio's semantics (base_subprocess.BaseSubprocessTransport with
unix_events._UnixSubprocessTransport), on our own machinery:

* the child is started with subprocess.Popen, and the Popen object holds
  its status: the exit watch reaps the child itself (never through
  Popen.poll()/wait(), which report 0 for a child someone else reaped) under
  Popen's _waitpid_lock, and stores the status in Popen.returncode, so a
  user who calls poll()/wait() on get_extra_info('subprocess') and the
  transport never steal the status from each other, and agree on it;
* a status is never invented: where the kernel has it no more (another
  reaper in the process took it first, or SIGCHLD is ignored), the pidfd
  (Linux >= 6.15) or the kqueue's exit event (macOS/BSD) still has it; where
  neither has, the child is reported as asyncio does, 255 with its warning;
* its stdin/stdout/stderr pipes are connected with the loop's
  connect_write_pipe/connect_read_pipe (so with its pipe transports, made by
  its _make_read_pipe_transport/_make_write_pipe_transport hooks), as
  asyncio connects them;
* its exit is seen without a child watcher: on Linux a pidfd
  (os.pidfd_open), on macOS/BSD a kqueue watching the pid (EVFILT_PROC), is
  a reader on the loop, readable once the child has exited; where neither
  can be had, a thread per child waits for it (see _ExitWatch).  No SIGCHLD
  handler is installed, so a loop running in any thread can start
  subprocesses.

The order of the protocol's calls is asyncio's: connection_made once every
pipe is connected (anything that happened before, data or exit, is queued
behind it); pipe_data_received/pipe_connection_lost per pipe;
process_exited when the exit is seen, whether or not the pipes are closed;
connection_lost(None) once the process has exited *and* every pipe is
closed.  _wait() (asyncio.subprocess.Process.wait) returns at
connection_lost on 3.11+, at the exit on 3.10 -- the running version's
rule.
"""

import asyncio
import collections
import errno
import fcntl
import os
import select
import struct
import subprocess
import sys
import threading
import warnings

from asyncio.log import logger

from . import _asyncio_compat
from ._subinterpreters import daemon_threads_allowed

_WAKE_WAITERS_AT_EXIT = _asyncio_compat.SUBPROCESS_WAKES_WAITERS_AT_EXIT
_KILL_ERRORS_IGNORED = ((ProcessLookupError, PermissionError)
                        if _asyncio_compat.SUBPROCESS_KILL_IGNORES_PERMISSION
                        else (ProcessLookupError,))


# --- reading the exit status --------------------------------------------------
#
# Popen's own reaping (Popen.poll(), wait(), and the poll() inside
# send_signal()) turns a status it cannot read into 0: when waitpid() fails
# with ECHILD because something else in the process took the child (a SIGCHLD
# handler calling waitpid(-1), signal(SIGCHLD, SIG_IGN)), Popen takes that as
# a success (bpo-15756).  So nothing here asks Popen for a status: the exit
# watch reads it from the kernel itself, holding Popen's _waitpid_lock as
# Popen's own methods do, and stores it in Popen.returncode, so that Popen and
# the transport agree.  Where the kernel has the status no more, the child is
# reported as asyncio reports it: 255, with asyncio's warning.

def _returncode_of(info):
    """Popen's returncode (-N for a child killed by signal N) of a waitid()."""
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status       # CLD_KILLED, CLD_DUMPED


class _PidfdSupport:
    """What the kernel does with pidfds here, learnt from the first refusal.

    usable: os.pidfd_open works (Linux >= 5.3, Python >= 3.9).  ENOSYS (old
    kernel) and EPERM (a seccomp filter, as some container runtimes install)
    do not change while the process lives, so later children go straight to
    the thread fallback.
    waitid: waitid(P_PIDFD) works (Linux >= 5.4; 5.3 refuses it with EINVAL).
    exit_info: ioctl(PIDFD_GET_INFO) is known (Linux >= 6.13).
    """
    usable = hasattr(os, 'pidfd_open')
    waitid = hasattr(os, 'P_PIDFD')
    exit_info = True


def _open_pidfd(pid):
    """A pidfd for pid, or None where pidfds cannot be had."""
    if not _PidfdSupport.usable:
        return None
    try:
        # Always close-on-exec (the kernel sets O_CLOEXEC on every pidfd),
        # so later children never inherit it.
        return os.pidfd_open(pid)
    except OSError as exc:
        if exc.errno in (errno.ENOSYS, errno.EPERM):
            _PidfdSupport.usable = False
        # Anything else (EMFILE ...) is this child's problem only: it is
        # already running, so it is watched by the fallback instead.
        return None


def _waitid(pidfd, pid, flags):
    """waitid() for one child: its returncode, or None while it has not
    exited.  ChildProcessError once it has been reaped (by anyone).

    Through its pidfd where there is one: a pidfd names one process for
    good, so a reaped child's recycled pid can never be waited for instead.
    """
    flags |= os.WEXITED
    if pidfd is not None and _PidfdSupport.waitid:
        try:
            info = os.waitid(os.P_PIDFD, pidfd, flags)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            # Linux 5.3: the pid is still the child's until it is reaped.
            _PidfdSupport.waitid = False
        else:
            return None if info is None else _returncode_of(info)
    info = os.waitid(os.P_PID, pid, flags)
    return None if info is None else _returncode_of(info)


# ioctl(pidfd, PIDFD_GET_INFO) with PIDFD_INFO_EXIT (Linux >= 6.15): the
# kernel keeps a reaped process's wait status for as long as a pidfd to it
# is open, whoever reaped it -- even the kernel itself under SIG_IGN.  The
# request encodes the size of the struct's first version (64 bytes), which
# ends with `__s32 exit_code` (after a u64 mask, a u64 cgroup id and eleven
# u32 ids).
_PIDFD_GET_INFO = 0xC040FF0B     # _IOWR(0xFF, 11, 64 bytes)
_PIDFD_INFO_SIZE = 64
_PIDFD_INFO_EXIT = 1 << 3
_PIDFD_INFO_EXIT_CODE_AT = 60
_NOT_YET = object()


def _pidfd_exit_info(pidfd):
    """The returncode the kernel kept for the reaped child behind pidfd:
    None if it kept none, _NOT_YET while another waiter is still reaping it.
    """
    if not _PidfdSupport.exit_info:
        return None
    info = bytearray(_PIDFD_INFO_SIZE)
    struct.pack_into('=Q', info, 0, _PIDFD_INFO_EXIT)
    try:
        fcntl.ioctl(pidfd, _PIDFD_GET_INFO, info)
    except OSError as exc:
        if exc.errno in (errno.ENOTTY, errno.EINVAL, errno.EOPNOTSUPP):
            _PidfdSupport.exit_info = False     # before 6.13
        # ESRCH: the process is gone and no status was kept (6.13, 6.14).
        return None
    mask, = struct.unpack_from('=Q', info, 0)
    if not mask & _PIDFD_INFO_EXIT:
        # The process still exists: the reaper that made our waitid() fail
        # has not released it yet.  Asked again, the kernel will know.
        return _NOT_YET
    status, = struct.unpack_from('=i', info, _PIDFD_INFO_EXIT_CODE_AT)
    return os.waitstatus_to_exitcode(status)


def _exited(proc, pidfd):
    """Whether the child has exited, asked without reaping it.

    Popen.poll() would reap it -- and invent a 0 if someone else had.
    """
    if proc.returncode is not None:
        return True
    if not hasattr(os, 'waitid'):
        return False
    try:
        return _waitid(pidfd, proc.pid, os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


# What asyncio logs when it finds a child already reaped: the wording of the
# child watcher it would use here (3.12+ picks its pidfd watcher where
# can_use_pidfd() says it may; before, and where it may not, a thread per
# child).  Looked up on the first lost status only: can_use_pidfd() opens a
# pidfd to find out.
_LOST_STATUS_THREADED = (
    'Unknown child process pid %d, will report returncode 255')
_LOST_STATUS_PIDFD = (
    'child process pid %d exit status already read: '
    ' will report returncode 255')
_lost_status_message = None


def _status_lost(pid):
    """The returncode of a child whose status is gone: asyncio's 255."""
    global _lost_status_message
    if _lost_status_message is None:
        can_use_pidfd = _asyncio_compat.can_use_pidfd
        _lost_status_message = (_LOST_STATUS_PIDFD
                                if can_use_pidfd is not None and can_use_pidfd()
                                else _LOST_STATUS_THREADED)
    logger.warning(_lost_status_message, pid)
    return 255


def _reap_exited(proc, status=None):
    """Reap the child, blocking until it exits, and store its returncode
    in the Popen object; return it.  status: its returncode as learnt
    elsewhere (a kqueue's exit event), if it was.

    The caller holds Popen's _waitpid_lock, as Popen.wait() would.
    """
    if proc.returncode is not None:
        # Reaped through the Popen object (the user's poll()/wait()).  An
        # exit event's status is the kernel's word; Popen's may be its 0
        # for a child another reaper took.
        if status is not None:
            proc.returncode = status
        return proc.returncode
    while True:
        try:
            reaped, wait_status = os.waitpid(proc.pid, 0)
        except ChildProcessError:
            # Another reaper took it.
            proc.returncode = (status if status is not None
                               else _status_lost(proc.pid))
            return proc.returncode
        # waitpid() has been seen to return 0 without WNOHANG (bpo-14396).
        if reaped == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(wait_status)
            return proc.returncode


# --- seeing the child exit ----------------------------------------------------

# macOS and the BSDs: a kqueue can watch a pid for its exit.
_HAVE_KQUEUE_PROC = hasattr(select, 'KQ_FILTER_PROC')

# The NOTE_EXIT event carries the child's wait status in `data`: always on
# the BSDs, on macOS when NOTE_EXITSTATUS (sys/event.h; not in the select
# module) is asked for -- then the status is had even if another reaper
# takes the zombie first.  0 where no flag is needed.
_NOTE_EXITSTATUS = 0x04000000 if sys.platform == 'darwin' else 0


def _status_of_exit_event(event):
    """The child's returncode from its NOTE_EXIT event, if it carries it."""
    if not _NOTE_EXITSTATUS or event.fflags & _NOTE_EXITSTATUS:
        return os.waitstatus_to_exitcode(event.data)
    return None


def _open_exit_kqueue(pid):
    """A kqueue of its own watching pid for its exit, or None.

    The kqueue's fd is readable once it holds the exit event, as a pidfd is
    once the child has exited.  (Not the loop's poller: the loop's fd table
    knows fds, and this gives the exit an fd of its own.)
    """
    if not _HAVE_KQUEUE_PROC:
        return None
    kq = select.kqueue()
    try:
        kq.control([select.kevent(pid, select.KQ_FILTER_PROC,
                                  select.KQ_EV_ADD,
                                  select.KQ_NOTE_EXIT | _NOTE_EXITSTATUS)], 0)
    except OSError:
        # ESRCH: some kernels refuse a child that has already exited; the
        # fallback thread then reaps it at once.
        kq.close()
        return None
    return kq


class _ExitWatch:
    """Report a child's return code to transport._process_exited, once.

    Where it can, it watches an fd that becomes readable when the child
    exits, as a reader on the loop: on Linux a pidfd, on macOS/BSD a kqueue
    with EVFILT_PROC/NOTE_EXIT for the pid.  The child stays a zombie, its
    pid reserved, until it is reaped here (waitid(P_PIDFD) on Linux), so the
    status read is the child's own.  If another reaper took the child
    first, the pidfd still gets its status from the kernel (Linux >= 6.15),
    the kqueue from the exit event.

    Elsewhere (kernels before 5.3, pidfd_open refused): a thread (a daemon
    where the interpreter allows one) blocks in waitpid() as Popen.wait()
    would, and hands the return code to the loop with call_soon_threadsafe
    -- asyncio's ThreadedChildWatcher idea, one thread per child.
    """

    __slots__ = ('_loop', '_proc', '_on_exit', '_exit_fd', '_kqueue')

    def __init__(self, loop, proc, on_exit):
        self._loop = loop
        self._proc = proc
        self._on_exit = on_exit
        self._exit_fd = self._kqueue = None
        self._exit_fd = _open_pidfd(proc.pid)
        if self._exit_fd is None:
            self._kqueue = _open_exit_kqueue(proc.pid)
            if self._kqueue is not None:
                self._exit_fd = self._kqueue.fileno()
        if self._exit_fd is not None:
            try:
                loop._add_reader(self._exit_fd, self._exit_fd_readable)
            except BaseException:
                self.close()
                raise
        else:
            self._start_thread()

    @property
    def pidfd(self):
        """The child's pidfd while it is watched through one, else None."""
        return self._exit_fd if self._kqueue is None else None

    def _start_thread(self, status=None):
        threading.Thread(target=self._wait_in_thread, args=(status,),
                         name=f'minloop-waitpid-{self._proc.pid}',
                         daemon=daemon_threads_allowed()).start()

    def _exit_fd_readable(self):
        if self._kqueue is not None:
            events = self._kqueue.control(None, 1, 0)
            if not events:
                return
            # The event is taken: the kqueue will not be readable again.
            self.close()
            status = _status_of_exit_event(events[0])
            lock = self._proc._waitpid_lock
            if not lock.acquire(False):
                # A thread is inside Popen.wait() or poll(): a thread of
                # ours reaps the child once it is done.
                self._start_thread(status)
                return
            try:
                # NOTE_EXIT may come a moment before the zombie can be
                # reaped: the wait is short.
                returncode = _reap_exited(self._proc, status)
            finally:
                lock.release()
        else:
            returncode = self._reap_through_pidfd()
            if returncode is None:
                return      # the fd, still readable, brings us back
            self.close()
        # One loop iteration later, as asyncio's watchers report an exit:
        # output read in the same wake-up reaches the protocol first.
        self._loop.call_soon(self._on_exit, returncode)

    def _reap_through_pidfd(self):
        """The returncode of the child, whose pidfd is readable, or None to
        be called again."""
        proc, pidfd = self._proc, self._exit_fd
        lock = proc._waitpid_lock
        if not lock.acquire(False):
            # Another thread is inside Popen.wait() or poll(), and reaps the
            # exited child in a moment: come back once it is done.
            return None
        try:
            if proc.returncode is not None:
                # Reaped through the Popen object (the user's poll()/wait()):
                # Popen's word -- unless the kernel kept the status, since
                # Popen's may be its 0 for a child another reaper took.
                kept = _pidfd_exit_info(pidfd)
                if kept is not None and kept is not _NOT_YET:
                    proc.returncode = kept
                return proc.returncode
            try:
                returncode = _waitid(pidfd, proc.pid, os.WNOHANG)
            except ChildProcessError:
                # Another reaper took it (or the kernel did: SIG_IGN).
                returncode = _pidfd_exit_info(pidfd)
                if returncode is _NOT_YET:
                    return None
                if returncode is None:
                    returncode = _status_lost(proc.pid)
            if returncode is None:
                return None     # readable a moment before waitable
            proc.returncode = returncode
            return returncode
        finally:
            lock.release()

    def _wait_in_thread(self, status=None):
        proc = self._proc
        with proc._waitpid_lock:
            returncode = _reap_exited(proc, status)
        try:
            self._loop.call_soon_threadsafe(self._on_exit, returncode)
        except RuntimeError:
            # The loop was closed while the child ran: nobody is left to
            # tell (the Popen object holds the status).
            pass

    def _close_exit_fd(self):
        fd, kq = self._exit_fd, self._kqueue
        self._exit_fd = self._kqueue = None
        if kq is not None:
            kq.close()
        elif fd is not None:
            os.close(fd)
        return fd

    def __del__(self):
        # Only reached with the fd open if the loop was dropped with the
        # child still running: the fd must not outlive us.
        if hasattr(self, '_exit_fd'):    # unset if __init__ failed early
            self._close_exit_fd()

    def close(self):
        """Stop watching (the exit was seen, or the loop is gone)."""
        fd = self._exit_fd
        if fd is not None and not self._loop.is_closed():
            self._loop._remove_reader(fd)
        self._close_exit_fd()


# --- the pipes' protocols -----------------------------------------------------

class _PipeProtocol(asyncio.BaseProtocol):
    """Protocol of one of the child's pipes: relays to the transport.

    A write pipe (the child's stdin) uses it as is; its pause/resume_writing
    go to the subprocess protocol (asyncio.subprocess's StreamWriter drains
    on them).
    """

    def __init__(self, proc_transport, fd):
        self.proc_transport = proc_transport
        self.fd = fd
        self.pipe = None           # the pipe transport, once connected
        self.disconnected = False

    def __repr__(self):
        return f'<{type(self).__name__} fd={self.fd} pipe={self.pipe!r}>'

    def connection_made(self, transport):
        self.pipe = transport

    def connection_lost(self, exc):
        self.disconnected = True
        self.proc_transport._pipe_connection_lost(self.fd, exc)
        self.proc_transport = None

    def pause_writing(self):
        self.proc_transport._protocol.pause_writing()

    def resume_writing(self):
        self.proc_transport._protocol.resume_writing()


class _ReadPipeProtocol(_PipeProtocol, asyncio.Protocol):
    """Protocol of the child's stdout or stderr."""

    def data_received(self, data):
        self.proc_transport._pipe_data_received(self.fd, data)


# --- the transport ------------------------------------------------------------

class SubprocessTransport(asyncio.SubprocessTransport):
    """A child process and its pipes, as asyncio's subprocess transport.

    A plain Python subclass of asyncio.SubprocessTransport: nothing here is on
    a hot path (the bytes flow through the pipe transports), and the heap base
    in _transport_bases exists only so that *compiled* classes can derive
    from asyncio's; a Python class derives from it directly.
    """

    def __init__(self, loop, protocol, args, shell, stdin, stdout, stderr,
                 bufsize, waiter=None, extra=None, **kwargs):
        super().__init__(extra)
        self._closed = False
        self._protocol = protocol
        self._loop = loop
        self._proc = None
        self._pid = None
        self._returncode = None
        self._exit_watch = None
        self._exit_waiters = []
        # Protocol calls made before connection_made, replayed after it.
        self._pending_calls = collections.deque()
        # fd -> _PipeProtocol (None until that pipe is connected).
        self._pipes = {}
        self._finished = False

        if stdin == subprocess.PIPE:
            self._pipes[0] = None
        if stdout == subprocess.PIPE:
            self._pipes[1] = None
        if stderr == subprocess.PIPE:
            self._pipes[2] = None

        try:
            self._proc = subprocess.Popen(
                args, shell=shell, stdin=stdin, stdout=stdout, stderr=stderr,
                universal_newlines=False, bufsize=bufsize, **kwargs)
        except:  # noqa: E722 -- whatever Popen raised, nothing is left open
            self.close()
            raise
        self._pid = self._proc.pid
        self._extra['subprocess'] = self._proc

        if loop.get_debug():
            program = args if isinstance(args, (bytes, str)) else args[0]
            logger.debug('process %r created: pid %s', program, self._pid)

        try:
            self._exit_watch = _ExitWatch(loop, self._proc,
                                          self._process_exited)
        except BaseException:
            self.close()
            raise
        loop.create_task(self._connect_pipes(waiter))

    def __repr__(self):
        info = [type(self).__name__]
        if self._closed:
            info.append('closed')
        if self._pid is not None:
            info.append(f'pid={self._pid}')
        if self._returncode is not None:
            info.append(f'returncode={self._returncode}')
        elif self._pid is not None:
            info.append('running')
        else:
            info.append('not started')
        stdin = self._pipes.get(0)
        if stdin is not None:
            info.append(f'stdin={stdin.pipe}')
        stdout = self._pipes.get(1)
        stderr = self._pipes.get(2)
        if stdout is not None and stderr is stdout:
            info.append(f'stdout=stderr={stdout.pipe}')
        else:
            if stdout is not None:
                info.append(f'stdout={stdout.pipe}')
            if stderr is not None:
                info.append(f'stderr={stderr.pipe}')
        return '<{}>'.format(' '.join(info))

    def __del__(self, _warn=warnings.warn):
        if not self._closed:
            _warn(f"unclosed transport {self!r}", ResourceWarning, source=self)
            self.close()

    # --- the public surface ---------------------------------------------------

    def get_protocol(self):
        return self._protocol

    def set_protocol(self, protocol):
        self._protocol = protocol

    def is_closing(self):
        return self._closed

    def close(self):
        """Close the pipes; kill the child if it is still running."""
        if self._closed:
            return
        self._closed = True
        for proto in self._pipes.values():
            if proto is not None:
                proto.pipe.close()
        if self._proc is not None and self._returncode is None:
            # It may have exited without our having seen it yet.
            self._unless_exited(self._kill_running_child)
            # The exit watch stays: the exit is still reported to the
            # protocol and to _wait().

    def _kill_running_child(self):
        if self._loop.get_debug():
            logger.warning('Close running child process: kill %r', self)
        try:
            self._proc.kill()
        except _KILL_ERRORS_IGNORED:
            pass

    def get_pid(self):
        return self._pid

    def get_returncode(self):
        return self._returncode

    def get_pipe_transport(self, fd):
        proto = self._pipes.get(fd)
        return None if proto is None else proto.pipe

    def _check_proc(self):
        # The child is forgotten at connection_lost: from then on its pid
        # may belong to another process.
        if self._proc is None:
            raise ProcessLookupError()

    def _unless_exited(self, action):
        """Call action() -- which signals the child through Popen -- unless
        the child has exited.

        Popen.send_signal() first reaps an exited child with poll() and then
        skips the signal, so that a signal never reaches a recycled pid; but
        poll() invents a 0 for a child someone else reaped.  So we tell
        whether it exited (without reaping it) ourselves, holding Popen's
        lock: poll() cannot take it, and leaves the status alone.
        """
        proc = self._proc
        lock = proc._waitpid_lock
        if not lock.acquire(False):
            # A thread waits for the child inside Popen (the exit watch's,
            # or the user's Popen.wait()): poll() cannot reap it either.
            action()
            return
        try:
            watch = self._exit_watch
            if not _exited(proc, None if watch is None else watch.pidfd):
                action()
        finally:
            lock.release()

    def send_signal(self, signal):
        self._check_proc()
        self._unless_exited(lambda: self._proc.send_signal(signal))

    def terminate(self):
        self._check_proc()
        self._unless_exited(self._proc.terminate)

    def kill(self):
        self._check_proc()
        self._unless_exited(self._proc.kill)

    async def _wait(self):
        """Wait for the process to finish; return its return code."""
        if self._returncode is not None:
            return self._returncode
        waiter = self._loop.create_future()
        self._exit_waiters.append(waiter)
        return await waiter

    # --- connecting the pipes -------------------------------------------------

    async def _connect_pipes(self, waiter):
        try:
            proc = self._proc
            loop = self._loop
            # Through the loop's public connect_*_pipe, as asyncio does:
            # code that wraps those (CPython's test_pause_reading does)
            # sees the child's pipes too.
            if proc.stdin is not None:
                _, self._pipes[0] = await loop.connect_write_pipe(
                    lambda: _PipeProtocol(self, 0), proc.stdin)
            if proc.stdout is not None:
                _, self._pipes[1] = await loop.connect_read_pipe(
                    lambda: _ReadPipeProtocol(self, 1), proc.stdout)
            if proc.stderr is not None:
                _, self._pipes[2] = await loop.connect_read_pipe(
                    lambda: _ReadPipeProtocol(self, 2), proc.stderr)

            loop.call_soon(self._protocol.connection_made, self)
            for callback, args in self._pending_calls:
                loop.call_soon(callback, *args)
            self._pending_calls = None
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            # The pipes connected so far, and the child's ends of the others,
            # are closed here, not left to leak (as asyncio does from 3.14).
            for proto in self._pipes.values():
                if proto is not None:
                    proto.pipe.close()
            for raw_pipe in (proc.stdin, proc.stdout, proc.stderr):
                if raw_pipe is not None:
                    raw_pipe.close()
            if waiter is not None and not waiter.cancelled():
                waiter.set_exception(exc)
        else:
            if waiter is not None and not waiter.cancelled():
                waiter.set_result(None)

    # --- events from the pipes and the exit watch -----------------------------

    def _call(self, callback, *args):
        if self._pending_calls is not None:
            self._pending_calls.append((callback, args))
        else:
            self._loop.call_soon(callback, *args)

    def _pipe_data_received(self, fd, data):
        self._call(self._protocol.pipe_data_received, fd, data)

    def _pipe_connection_lost(self, fd, exc):
        self._call(self._protocol.pipe_connection_lost, fd, exc)
        self._try_finish()

    def _process_exited(self, returncode):
        if self._returncode is not None or self._loop is None:
            return
        self._exit_watch = None
        if self._loop.get_debug():
            logger.info('%r exited with return code %r', self, returncode)
        self._returncode = returncode
        if self._proc.returncode is None:
            self._proc.returncode = returncode
        self._call(self._protocol.process_exited)
        self._try_finish()
        # After _try_finish, as 3.10 does: with no pipe left open,
        # connection_lost is queued before the waiters wake.
        if _WAKE_WAITERS_AT_EXIT:
            self._wake_exit_waiters()

    def _try_finish(self):
        if self._finished or self._returncode is None:
            return
        if all(p is not None and p.disconnected
               for p in self._pipes.values()):
            self._finished = True
            self._call(self._call_connection_lost, None)

    def _wake_exit_waiters(self):
        waiters, self._exit_waiters = self._exit_waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(self._returncode)

    def _call_connection_lost(self, exc):
        try:
            self._protocol.connection_lost(exc)
        finally:
            if not _WAKE_WAITERS_AT_EXIT:
                self._wake_exit_waiters()
            self._loop = None
            self._proc = None
            self._protocol = None


async def make_subprocess_transport(loop, protocol, args, shell,
                                    stdin, stdout, stderr, bufsize,
                                    extra=None, **kwargs):
    """loop._make_subprocess_transport: start the child, connect its pipes.

    If connecting fails or is cancelled, the child is killed and reaped
    before the error propagates, as asyncio does.
    """
    waiter = loop.create_future()
    transport = SubprocessTransport(loop, protocol, args, shell,
                                    stdin, stdout, stderr, bufsize,
                                    waiter=waiter, extra=extra, **kwargs)
    try:
        await waiter
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException:
        transport.close()
        await transport._wait()
        raise
    return transport
