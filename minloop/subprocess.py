"""The subprocess transport: loop.subprocess_exec/subprocess_shell's child.

asyncio's semantics (base_subprocess.BaseSubprocessTransport with
unix_events._UnixSubprocessTransport), on our own machinery:

* the child is started with subprocess.Popen, which owns its pid and its
  status: every reap goes through Popen.poll()/wait(), so a user who calls
  poll()/wait() on get_extra_info('subprocess') and the transport never
  steal the exit status from each other;
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
import os
import select
import subprocess
import sys
import threading
import warnings

from asyncio.log import logger

# 3.11 moved the wake-up of _wait()'s futures from the exit to
# connection_lost, so that a wait() begun before the exit returns after every
# pipe is drained (base_subprocess.py, 3.10 vs 3.11).
_WAKE_WAITERS_AT_EXIT = sys.version_info < (3, 11)

# 3.13 ignores PermissionError (a setuid child) as well when close() kills.
_KILL_ERRORS_IGNORED = ((ProcessLookupError, PermissionError)
                        if sys.version_info >= (3, 13)
                        else (ProcessLookupError,))


# --- seeing the child exit ----------------------------------------------------

class _PidfdSupport:
    """Whether os.pidfd_open works here (Linux >= 5.3, Python >= 3.9).

    Learnt from the first failure: ENOSYS (old kernel) and EPERM (a seccomp
    filter, as some container runtimes install) do not change while the
    process lives, so later children go straight to the thread fallback.
    """
    usable = hasattr(os, 'pidfd_open')


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


# macOS and the BSDs: a kqueue can watch a pid for its exit.
_HAVE_KQUEUE_PROC = hasattr(select, 'KQ_FILTER_PROC')


def _open_exit_kqueue(pid):
    """A kqueue of its own watching pid for its exit, or None.

    The kqueue's fd is readable while it holds an event, and nothing here
    takes the event out: once the child has exited it stays readable until
    it is closed, as a pidfd does.  (Not the loop's poller: the loop's fd
    table knows fds, and this gives the exit an fd of its own.)
    """
    if not _HAVE_KQUEUE_PROC:
        return None
    kq = select.kqueue()
    try:
        kq.control([select.kevent(pid, select.KQ_FILTER_PROC,
                                  select.KQ_EV_ADD, select.KQ_NOTE_EXIT)], 0)
    except OSError:
        # ESRCH: some kernels refuse a child that has already exited; the
        # fallback thread's wait() then reaps it at once.
        kq.close()
        return None
    return kq


class _ExitWatch:
    """Report a child's return code to transport._process_exited, once.

    Where it can, it watches an fd that becomes readable when the child
    exits, as a reader on the loop: on Linux a pidfd, on macOS/BSD a kqueue
    with EVFILT_PROC/NOTE_EXIT for the pid.  The child stays a zombie, its
    pid reserved, until it is reaped, so the reap in Popen.poll()
    (waitpid(pid, WNOHANG), status converted with
    os.waitstatus_to_exitcode: -N for a child killed by signal N) cannot hit
    a recycled pid.

    Elsewhere (kernels before 5.3, pidfd_open refused): a daemon thread
    blocks in Popen.wait() and hands the return code to the loop with
    call_soon_threadsafe -- asyncio's ThreadedChildWatcher idea, one thread
    per child.
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
            threading.Thread(target=self._wait_in_thread,
                             name=f'minloop-waitpid-{proc.pid}',
                             daemon=True).start()

    def _exit_fd_readable(self):
        returncode = self._proc.poll()
        if returncode is None:
            # Popen's lock is held by another thread inside Popen.wait() on
            # this (exited) child; it reaps it at once, and the fd, still
            # readable, brings us back here to read the status it stored.
            return
        self.close()
        # One loop iteration later, as asyncio's watchers report an exit:
        # output read in the same wake-up reaches the protocol first.
        self._loop.call_soon(self._on_exit, returncode)

    def _wait_in_thread(self):
        returncode = self._proc.wait()
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
        if (self._proc is not None
                and self._returncode is None
                # It may have exited without our having seen it yet.
                and self._proc.poll() is None):
            if self._loop.get_debug():
                logger.warning('Close running child process: kill %r', self)
            try:
                self._proc.kill()
            except _KILL_ERRORS_IGNORED:
                pass
            # The exit watch stays: the exit is still reported to the
            # protocol and to _wait().

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

    # Popen.send_signal reaps an exited child first and then skips the
    # signal, so a signal never reaches a recycled pid.
    def send_signal(self, signal):
        self._check_proc()
        self._proc.send_signal(signal)

    def terminate(self):
        self._check_proc()
        self._proc.terminate()

    def kill(self):
        self._check_proc()
        self._proc.kill()

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
            if not waiter.cancelled():
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
