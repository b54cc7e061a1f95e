"""Subprocesses: loop.subprocess_exec/subprocess_shell and asyncio.create_subprocess_*.

Every test runs on asyncio's loop and on minloop (the ``loop`` fixture); the
few marked ``minloop_only`` test promises asyncio does not make (no watcher
thread, no SIGCHLD handler, a status reaped through the Popen object kept,
a status another reaper took never invented and recovered where the kernel
keeps it).
"""

import asyncio
import contextlib
import errno
import fcntl
import functools
import gc
import hashlib
import logging
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import types
import warnings

import pytest

from asyncio.subprocess import DEVNULL, PIPE, STDOUT

from conftest import IN_SUB_INTERPRETER, MAIN_INTERPRETER_ONLY

PY = sys.executable


def run(loop, coro, timeout=30):
    return loop.run_until_complete(asyncio.wait_for(coro, timeout))


def py(code):
    """Arguments that run ``code`` in a fresh Python, without site (faster)."""
    return (PY, '-S', '-c', code)


class RecordingProtocol(asyncio.SubprocessProtocol):
    """Records every call, in order; ``done`` resolves at connection_lost."""

    def __init__(self, loop):
        self.events = []
        self.data = {1: bytearray(), 2: bytearray()}
        self.exited = loop.create_future()
        self.done = loop.create_future()
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        self.events.append('connection_made')

    def pipe_data_received(self, fd, data):
        self.data[fd] += data

    def pipe_connection_lost(self, fd, exc):
        self.events.append(('pipe_connection_lost', fd, exc))

    def process_exited(self):
        self.events.append('process_exited')
        self.exited.set_result(self.transport.get_returncode())

    def connection_lost(self, exc):
        self.events.append(('connection_lost', exc))
        self.done.set_result(None)


# --- data through the pipes ---------------------------------------------------

def test_echo_through_cat_both_ways(loop):
    async def main():
        proc = await asyncio.create_subprocess_exec(
            'cat', stdin=PIPE, stdout=PIPE)
        lines = []
        for i in range(5):
            proc.stdin.write(b'line %d\n' % i)
            await proc.stdin.drain()
            lines.append(await proc.stdout.readline())
        proc.stdin.close()
        assert await proc.stdout.read() == b''
        return lines, await proc.wait()

    lines, returncode = run(loop, main())
    assert lines == [b'line %d\n' % i for i in range(5)]
    assert returncode == 0


def test_communicate(loop):
    async def main():
        proc = await asyncio.create_subprocess_exec(
            *py('import sys; data = sys.stdin.buffer.read(); '
                'sys.stdout.buffer.write(data.upper()); '
                'sys.stderr.buffer.write(b"err:" + data); sys.exit(4)'),
            stdin=PIPE, stdout=PIPE, stderr=PIPE)
        out, err = await proc.communicate(b'hello')
        return out, err, proc.returncode

    assert run(loop, main()) == (b'HELLO', b'err:hello', 4)


def test_wait_returns_the_exit_code(loop):
    async def main():
        codes = []
        for code in (0, 1, 7, 255):
            proc = await asyncio.create_subprocess_exec('sh', '-c', f'exit {code}')
            codes.append(await proc.wait())
            assert proc.returncode == code
        return codes

    assert run(loop, main()) == [0, 1, 7, 255]


def test_killed_by_a_signal_returns_minus_the_signal(loop):
    async def main():
        proc = await asyncio.create_subprocess_exec('sh', '-c', 'kill -TERM $$')
        by_itself = await proc.wait()
        proc = await asyncio.create_subprocess_exec(
            *py('import os, signal; os.kill(os.getpid(), signal.SIGUSR1)'))
        by_usr1 = await proc.wait()
        return by_itself, by_usr1

    assert run(loop, main()) == (-signal.SIGTERM, -signal.SIGUSR1)


@pytest.mark.parametrize('how, expected', [
    ('terminate', -signal.SIGTERM),
    ('kill', -signal.SIGKILL),
    ('send_signal', 3),
])
def test_terminate_kill_send_signal(loop, how, expected):
    # The child says "ready" once its SIGUSR1 handler is in place.
    code = ('import signal, sys, time\n'
            'signal.signal(signal.SIGUSR1, lambda *a: sys.exit(3))\n'
            'print("ready", flush=True)\n'
            'while True: time.sleep(10)\n')

    async def main():
        proc = await asyncio.create_subprocess_exec(*py(code), stdout=PIPE)
        assert await proc.stdout.readline() == b'ready\n'
        if how == 'send_signal':
            proc.send_signal(signal.SIGUSR1)
        else:
            getattr(proc, how)()
        return await proc.wait()

    assert run(loop, main()) == expected


def test_signals_after_exit_raise_process_lookup_error(loop):
    async def main():
        proc = await asyncio.create_subprocess_exec('true')
        await proc.wait()
        # The transport lets go of the process in a callback that exit
        # schedules (asyncio's _call_connection_lost); until it has run,
        # asyncio's kill() is a silent no-op.  wait() may return before it
        # (at once, when the exit was seen first): a turn or two of the loop.
        for _ in range(3):
            await asyncio.sleep(0)
        for send in (proc.kill, proc.terminate,
                     lambda: proc.send_signal(signal.SIGUSR1)):
            with pytest.raises(ProcessLookupError):
                send()

    run(loop, main())


# --- redirections -------------------------------------------------------------

def test_devnull_stdin_stdout_stderr(loop):
    async def main():
        # stdin from /dev/null: cat sees EOF at once.
        proc = await asyncio.create_subprocess_exec(
            'cat', stdin=DEVNULL, stdout=PIPE)
        out, _ = await proc.communicate()
        assert out == b'' and proc.returncode == 0
        # Output to /dev/null: nothing to read, no pipe transport for it.
        proc = await asyncio.create_subprocess_exec(
            *py('import sys; print("x"); print("y", file=sys.stderr)'),
            stdout=DEVNULL, stderr=DEVNULL)
        assert proc.stdout is None and proc.stderr is None
        assert proc._transport.get_pipe_transport(1) is None
        assert await proc.wait() == 0

    run(loop, main())


def test_stderr_to_stdout(loop):
    async def main():
        proc = await asyncio.create_subprocess_exec(
            *py('import sys, os; os.write(1, b"out,"); os.write(2, b"err")'),
            stdout=PIPE, stderr=STDOUT)
        assert proc.stderr is None
        out, err = await proc.communicate()
        return out, err

    assert run(loop, main()) == (b'out,err', None)


def test_stdout_to_an_fd_and_to_a_file_object(loop, tmp_path):
    path_fd = tmp_path / 'by_fd'
    path_file = tmp_path / 'by_file'

    async def main():
        fd = os.open(path_fd, os.O_WRONLY | os.O_CREAT)
        try:
            proc = await asyncio.create_subprocess_exec('echo', 'to an fd',
                                                        stdout=fd)
            assert await proc.wait() == 0
        finally:
            os.close(fd)
        with open(path_file, 'wb') as f:
            proc = await asyncio.create_subprocess_exec(
                'sh', '-c', 'echo to a file >&2', stderr=f)
            assert await proc.wait() == 0
        with open(path_file, 'rb') as f:
            # And stdin from a file object.
            proc = await asyncio.create_subprocess_exec('cat', stdin=f,
                                                        stdout=PIPE)
            out, _ = await proc.communicate()
        return out

    assert run(loop, main()) == b'to a file\n'
    assert path_fd.read_bytes() == b'to an fd\n'


def test_pass_fds(loop):
    r, w = os.pipe()

    async def main():
        proc = await asyncio.create_subprocess_exec(
            *py(f'import os; os.write({w}, b"through fd {w}")'),
            pass_fds=(w,))
        return await proc.wait()

    try:
        assert run(loop, main()) == 0
        os.close(w)
        assert os.read(r, 100) == b'through fd %d' % w
    finally:
        os.close(r)


def test_start_new_session(loop):
    async def main():
        proc = await asyncio.create_subprocess_exec(
            *py('import os; print(os.getsid(0) == os.getpid())'),
            stdout=PIPE, start_new_session=True)
        out, _ = await proc.communicate()
        return out

    assert run(loop, main()) == b'True\n'


@pytest.mark.main_interpreter("preexec_fn")
def test_preexec_fn(loop):
    async def main():
        # preexec_fn runs in the child before exec: it puts the child in a
        # process group of its own.
        with warnings.catch_warnings():
            # 3.12 warns about preexec_fn with threads running (the asyncio
            # loop's watcher thread).
            warnings.simplefilter('ignore', DeprecationWarning)
            proc = await asyncio.create_subprocess_exec(
                *py('import os; print(os.getpgid(0) == os.getpid())'),
                stdout=PIPE, preexec_fn=lambda: os.setpgid(0, 0))
        out, _ = await proc.communicate()
        return out

    assert run(loop, main()) == b'True\n'


def test_cwd_and_env(loop, tmp_path):
    async def main():
        proc = await asyncio.create_subprocess_exec(
            *py('import os; print(os.getcwd()); print(os.environ["MINLOOP_X"])'),
            stdout=PIPE, cwd=tmp_path,
            env={'MINLOOP_X': 'from env', 'PATH': os.environ.get('PATH', '')})
        out, _ = await proc.communicate()
        return out.decode().splitlines()

    assert run(loop, main()) == [os.path.realpath(tmp_path), 'from env']


def test_shell_pipeline(loop):
    async def main():
        proc = await asyncio.create_subprocess_shell(
            "printf 'b\\na\\nc\\n' | sort | tr a-z A-Z; exit 5", stdout=PIPE)
        out, _ = await proc.communicate()
        return out, proc.returncode

    assert run(loop, main()) == (b'A\nB\nC\n', 5)


# --- volume and concurrency -----------------------------------------------------

@pytest.mark.timeout(180)
def test_100_mb_through_cat(loop):
    chunk = bytes(range(256)) * 4096           # 1 MiB
    total_chunks = 100

    async def main():
        proc = await asyncio.create_subprocess_exec('cat', stdin=PIPE,
                                                    stdout=PIPE)
        sent = hashlib.sha256()

        async def feed():
            for i in range(total_chunks):
                # Every chunk differs, so a reordering or a loss shows.
                data = i.to_bytes(4, 'big') + chunk[4:]
                sent.update(data)
                proc.stdin.write(data)
                await proc.stdin.drain()
            proc.stdin.close()

        received = hashlib.sha256()
        size = 0
        feeder = asyncio.ensure_future(feed())
        while True:
            data = await proc.stdout.read(1 << 20)
            if not data:
                break
            received.update(data)
            size += len(data)
        await feeder
        assert await proc.wait() == 0
        return size, sent.hexdigest(), received.hexdigest()

    size, sent, received = run(loop, main(), timeout=170)
    assert size == total_chunks * len(chunk)
    assert received == sent


@pytest.mark.timeout(120)
def test_200_concurrent_short_lived_subprocesses(loop):
    async def one(i):
        proc = await asyncio.create_subprocess_exec(
            'sh', '-c', f'exit {i % 256}',
            stdin=DEVNULL, stdout=DEVNULL, stderr=DEVNULL)
        return await proc.wait()

    async def main():
        return await asyncio.gather(*(one(i) for i in range(200)))

    assert run(loop, main(), timeout=110) == [i % 256 for i in range(200)]


def test_subprocess_from_a_loop_in_a_non_main_thread(loop):
    results = []

    async def main():
        proc = await asyncio.create_subprocess_exec(
            'cat', stdin=PIPE, stdout=PIPE)
        out, _ = await proc.communicate(b'from a thread')
        killed = await asyncio.create_subprocess_exec('sleep', '30')
        killed.kill()
        return out, proc.returncode, await killed.wait()

    def in_thread():
        try:
            results.append(run(loop, main()))
        except BaseException as exc:  # reported by the assertion below
            results.append(exc)

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join(60)
    assert results == [(b'from a thread', 0, -signal.SIGKILL)]


# --- file descriptors -------------------------------------------------------------

def test_no_fd_leak(loop, open_fds, assert_no_fd_leak):
    async def spawn_all_kinds():
        proc = await asyncio.create_subprocess_exec(
            'cat', stdin=PIPE, stdout=PIPE, stderr=PIPE)
        await proc.communicate(b'x')
        proc = await asyncio.create_subprocess_exec('sleep', '30', stdin=PIPE,
                                                    stdout=PIPE)
        proc.kill()
        await proc.wait()
        proc = await asyncio.create_subprocess_shell('exit 3', stdout=PIPE)
        await proc.wait()
        with pytest.raises(FileNotFoundError):
            await asyncio.create_subprocess_exec('/nonexistent/minloop-x',
                                                 stdin=PIPE, stdout=PIPE)

    # A first run lets the loop open what it keeps (asyncio's watcher, ...).
    run(loop, spawn_all_kinds())
    before = open_fds()
    run(loop, spawn_all_kinds())
    gc.collect()
    assert_no_fd_leak(before, 'subprocesses')


@pytest.mark.main_interpreter("signals")
def test_child_does_not_inherit_the_loops_fds(loop):
    # close_fds=False: only the close-on-exec flag keeps the loop's own fds
    # (poller, wake-up fd, the pidfds of other children, pipes) out of the
    # child.
    lister = ('import os\n'
              'for name in os.listdir("/proc/self/fd"):\n'
              '    try: print(name, os.readlink("/proc/self/fd/" + name))\n'
              '    except OSError: pass\n')

    async def main():
        loop.add_signal_handler(signal.SIGUSR2, lambda: None)
        try:
            other = await asyncio.create_subprocess_exec(
                'cat', stdin=PIPE, stdout=PIPE)
            proc = await asyncio.create_subprocess_exec(
                *py(lister), stdout=PIPE, close_fds=False)
            out, _ = await proc.communicate()
            other.stdin.close()
            await other.wait()
            return out.decode()
        finally:
            loop.remove_signal_handler(signal.SIGUSR2)

    listing = run(loop, main())
    targets = [line.split(' ', 1)[1] for line in listing.splitlines()]
    for kind in ('eventpoll', 'eventfd', 'pidfd', 'socket:'):
        assert not [t for t in targets if kind in t], listing


# --- arguments asyncio refuses --------------------------------------------------

@pytest.mark.parametrize('kwargs, message', [
    ({'universal_newlines': True}, 'universal_newlines must be False'),
    ({'bufsize': 4096}, 'bufsize must be 0'),
    ({'text': True}, 'text must be False'),
    ({'encoding': 'utf-8'}, 'encoding must be None'),
    ({'errors': 'strict'}, 'errors must be None'),
])
def test_bad_arguments_raise_asyncios_value_errors(loop, kwargs, message):
    async def main():
        with pytest.raises(ValueError, match=f'^{message}$'):
            await loop.subprocess_exec(asyncio.SubprocessProtocol, 'true',
                                       **kwargs)
        with pytest.raises(ValueError, match=f'^{message}$'):
            await loop.subprocess_shell(asyncio.SubprocessProtocol, 'true',
                                        **kwargs)
        with pytest.raises(ValueError):
            await asyncio.create_subprocess_exec('true', **kwargs)

    run(loop, main())


def test_shell_and_exec_mixed_up(loop):
    async def main():
        with pytest.raises(ValueError, match='^shell must be False$'):
            await loop.subprocess_exec(asyncio.SubprocessProtocol, 'true',
                                       shell=True)
        with pytest.raises(ValueError, match='^shell must be True$'):
            await loop.subprocess_shell(asyncio.SubprocessProtocol, 'true',
                                        shell=False)
        with pytest.raises(ValueError, match='^cmd must be a string$'):
            await loop.subprocess_shell(asyncio.SubprocessProtocol,
                                        ['ls', '-l'])
        # The program's own type is Popen's to check.
        with pytest.raises(TypeError):
            await loop.subprocess_exec(asyncio.SubprocessProtocol, 42)
        with pytest.raises(FileNotFoundError):
            await loop.subprocess_exec(asyncio.SubprocessProtocol,
                                       '/nonexistent/minloop-x')

    with warnings.catch_warnings():
        warnings.simplefilter('error', ResourceWarning)
        run(loop, main())
        gc.collect()


# --- the protocol's calls, and close() ------------------------------------------

def test_process_exits_before_its_pipes_close(loop):
    # sh exits at once; the cat it started in the background (its stdin
    # redirected: an asynchronous list reads /dev/null otherwise) holds
    # the stdout pipe, and reads the stdin pipe we hold: the exit is
    # reported first, connection_lost waits for the pipes.
    async def main():
        transport, proto = await loop.subprocess_shell(
            lambda: RecordingProtocol(loop), 'exec 3<&0; cat <&3 3<&- & exit 0',
            stderr=DEVNULL)
        assert await proto.exited == 0
        for _ in range(5):
            await asyncio.sleep(0)
        assert not proto.done.done()
        assert ('pipe_connection_lost', 1, None) not in proto.events
        transport.get_pipe_transport(0).write(b'late output')
        transport.get_pipe_transport(0).close()
        await proto.done
        transport.close()
        return proto

    proto = run(loop, main())
    assert proto.data[1] == b'late output'
    assert proto.events[0] == 'connection_made'
    assert proto.events.index('process_exited') < proto.events.index(
        ('pipe_connection_lost', 1, None))
    assert proto.events[-1] == ('connection_lost', None)
    assert sorted(e for e in proto.events if e[0] == 'pipe_connection_lost') \
        == [('pipe_connection_lost', 0, None), ('pipe_connection_lost', 1, None)]


def test_pipes_close_before_the_process_exits(loop):
    code = ('import os, sys, time\n'
            'os.write(1, b"bye")\n'
            'os.close(0); os.close(1); os.close(2)\n'
            'while True: time.sleep(10)\n')

    async def main():
        transport, proto = await loop.subprocess_exec(
            lambda: RecordingProtocol(loop), *py(code))
        while sum(1 for e in proto.events
                  if e[0] == 'pipe_connection_lost') < 3:
            await asyncio.sleep(0.01)
        assert 'process_exited' not in proto.events
        assert transport.get_returncode() is None
        transport.kill()
        await proto.done
        transport.close()
        return transport, proto

    transport, proto = run(loop, main())
    assert proto.data[1] == b'bye'
    assert proto.events[-2:] == ['process_exited', ('connection_lost', None)]
    assert transport.get_returncode() == -signal.SIGKILL
    with pytest.raises(ProcessLookupError):
        transport.kill()


def test_close_kills_a_running_child(loop):
    async def main():
        transport, proto = await loop.subprocess_exec(
            lambda: RecordingProtocol(loop), 'sleep', '30')
        assert transport.get_returncode() is None
        pid = transport.get_pid()
        transport.close()
        assert transport.is_closing()
        await proto.done
        return pid, transport.get_returncode()

    pid, returncode = run(loop, main())
    assert returncode == -signal.SIGKILL
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)   # reaped


def test_unclosed_transport_warns(loop):
    async def main():
        transport, proto = await loop.subprocess_exec(
            lambda: RecordingProtocol(loop), 'true',
            stdin=DEVNULL, stdout=DEVNULL, stderr=DEVNULL)
        await proto.done
        assert isinstance(transport, asyncio.SubprocessTransport)
        proto.transport = None
        return proto

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        run(loop, main())
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning)
               and 'unclosed transport' in str(w.message) for w in caught)


# --- minloop's own promises -----------------------------------------------------

@pytest.fixture
def no_pidfd(minloop_only, monkeypatch):
    """The fallback path: as on a system without pidfd_open or EVFILT_PROC."""
    from minloop import subprocess as ml_subprocess
    monkeypatch.setattr(ml_subprocess._PidfdSupport, 'usable', False)
    monkeypatch.setattr(ml_subprocess, '_HAVE_KQUEUE_PROC', False)


async def children_exit_every_way(message, while_running=lambda: None):
    """One child that echoes and exits, ten exit codes, one killed: what
    each way of seeing an exit must report.  while_running() is called with
    a child still alive."""
    proc = await asyncio.create_subprocess_exec('cat', stdin=PIPE, stdout=PIPE)
    out, _ = await proc.communicate(message)
    procs = [await asyncio.create_subprocess_exec('sh', '-c', f'exit {i}')
             for i in range(10)]
    codes = await asyncio.gather(*(proc.wait() for proc in procs))
    killed = await asyncio.create_subprocess_exec('sleep', '30')
    while_running()
    killed.kill()
    return out, codes, await killed.wait()


def test_fallback_thread_without_pidfd(loop, no_pidfd):
    assert run(loop, children_exit_every_way(b'no pidfd')) == (
        b'no pidfd', list(range(10)), -signal.SIGKILL)


def test_fallback_thread_from_a_non_main_thread(loop, no_pidfd):
    test_subprocess_from_a_loop_in_a_non_main_thread(loop)


@pytest.mark.skipif(not (hasattr(os, 'pidfd_open') or hasattr(select, 'KQ_FILTER_PROC')),
                    reason='needs pidfd_open or kqueue EVFILT_PROC')
def test_no_watcher_thread_and_no_sigchld_handler(loop, minloop_only):
    threads = set(threading.enumerate())
    sigchld = signal.getsignal(signal.SIGCHLD)

    async def main():
        procs = [await asyncio.create_subprocess_exec('sleep', '30')
                 for _ in range(3)]
        assert set(threading.enumerate()) == threads
        for proc in procs:
            proc.kill()
        return [await proc.wait() for proc in procs]

    assert run(loop, main()) == [-signal.SIGKILL] * 3
    assert signal.getsignal(signal.SIGCHLD) == sigchld


class PidfdKqueue:
    """select.kqueue as _open_exit_kqueue uses it, for Linux: the pid's
    "EVFILT_PROC" registration is a pidfd, which is readable once the pid
    has exited, as the kqueue is once it holds the NOTE_EXIT event.  The
    event carries the child's wait status in `data`, as the BSDs' does (and
    macOS's, asked with NOTE_EXITSTATUS), even if another reaper took the
    child: a test's reaper records what it took in `taken`."""

    opened = []
    taken = {}             # pid -> returncode, taken by another reaper

    def __init__(self):
        self.fd = self.pid = None
        self.closed = False
        PidfdKqueue.opened.append(self)

    def control(self, changes, max_events, timeout=None):
        from minloop import subprocess as ml_subprocess
        if changes is None:
            return self._exit_events()
        (change,) = changes
        assert (change.filter, change.flags, change.fflags) == (
            select.KQ_FILTER_PROC, select.KQ_EV_ADD,
            select.KQ_NOTE_EXIT | ml_subprocess._NOTE_EXITSTATUS)
        assert max_events == 0
        self.pid = change.ident
        self.fd = os.pidfd_open(change.ident)
        return []

    def _exit_events(self):
        from minloop import subprocess as ml_subprocess
        try:
            info = os.waitid(os.P_PIDFD, self.fd,
                             os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            returncode = PidfdKqueue.taken[self.pid]
        else:
            if info is None:
                return []       # exiting, not yet waitable: no event yet
            returncode = (info.si_status if info.si_code == os.CLD_EXITED
                          else -info.si_status)
        status = returncode << 8 if returncode >= 0 else -returncode
        return [types.SimpleNamespace(
            ident=self.pid, filter=select.KQ_FILTER_PROC,
            flags=select.KQ_EV_ADD,
            fflags=select.KQ_NOTE_EXIT | ml_subprocess._NOTE_EXITSTATUS,
            data=status)]

    def fileno(self):
        return self.fd

    def close(self):
        self.closed = True
        if self.fd is not None:
            os.close(self.fd)


@pytest.fixture
def kqueue_exit_watch(minloop_only, monkeypatch):
    """The macOS/BSD path, on Linux: no pidfd of its own, a kqueue instead."""
    if not hasattr(os, 'pidfd_open'):
        pytest.skip('the stand-in kqueue needs pidfd_open')
    from minloop import subprocess as ml_subprocess
    kevent = lambda ident, filter, flags, fflags: types.SimpleNamespace(
        ident=ident, filter=filter, flags=flags, fflags=fflags)
    monkeypatch.setattr(ml_subprocess._PidfdSupport, 'usable', False)
    monkeypatch.setattr(ml_subprocess, '_HAVE_KQUEUE_PROC', True)
    for name, value in (('kqueue', PidfdKqueue), ('kevent', kevent),
                        ('KQ_FILTER_PROC', -5), ('KQ_EV_ADD', 1),
                        ('KQ_NOTE_EXIT', 0x80000000)):
        monkeypatch.setattr(select, name, value, raising=False)
    PidfdKqueue.opened = []
    PidfdKqueue.taken = {}
    return PidfdKqueue.opened


def test_kqueue_exit_watch(loop, kqueue_exit_watch):
    threads = set(threading.enumerate())

    def no_waiter_thread():
        assert set(threading.enumerate()) == threads

    assert run(loop, children_exit_every_way(b'kqueue', no_waiter_thread)) == (
        b'kqueue', list(range(10)), -signal.SIGKILL)
    assert len(kqueue_exit_watch) == 12
    assert all(kq.closed for kq in kqueue_exit_watch)


def test_kqueue_refusing_the_pid_falls_back_to_a_thread(loop, kqueue_exit_watch, monkeypatch):
    def refuse(self, changes, max_events):
        raise ProcessLookupError(errno.ESRCH, 'No such process')
    monkeypatch.setattr(PidfdKqueue, 'control', refuse)

    async def main():
        proc = await asyncio.create_subprocess_exec('sh', '-c', 'exit 3')
        return await proc.wait()

    assert run(loop, main()) == 3
    assert [kq.closed for kq in kqueue_exit_watch] == [True]


def test_status_reaped_through_popen_is_kept(loop, minloop_only):
    # The user reaps the child with the Popen object
    # (get_extra_info('subprocess')) before the loop sees the exit: the
    # transport still reports the real status.  (asyncio's threaded
    # watcher loses it and reports 255.)
    async def main():
        transport, proto = await loop.subprocess_exec(
            lambda: RecordingProtocol(loop), 'sh', '-c', 'exit 5',
            stdin=DEVNULL, stdout=DEVNULL, stderr=DEVNULL)
        assert transport.get_extra_info('subprocess').wait() == 5
        returncode = await proto.exited
        await proto.done
        transport.close()
        return returncode

    assert run(loop, main()) == 5


@pytest.mark.skipif(not hasattr(os, 'pidfd_open'), reason='needs pidfd_open')
@pytest.mark.parametrize('errno_name, pidfd_kept', [
    ('EMFILE', True),    # this child only: later children get pidfds again
    ('ENOSYS', False),   # the kernel has none: never tried again
    ('EPERM', False),    # refused by a seccomp filter: never tried again
])
def test_pidfd_open_failure_falls_back_to_a_thread(
        loop, minloop_only, monkeypatch, errno_name, pidfd_kept):
    import errno
    from minloop import subprocess as ml_subprocess
    monkeypatch.setattr(ml_subprocess._PidfdSupport, 'usable', True)
    real_pidfd_open = os.pidfd_open
    calls = []

    def failing_once(pid, *args):
        calls.append(pid)
        if len(calls) == 1:
            raise OSError(getattr(errno, errno_name), 'refused')
        return real_pidfd_open(pid, *args)

    monkeypatch.setattr(os, 'pidfd_open', failing_once)

    async def main():
        codes = []
        for code in (3, 4):
            proc = await asyncio.create_subprocess_exec('sh', '-c', f'exit {code}')
            codes.append(await proc.wait())
        return codes

    assert run(loop, main()) == [3, 4]
    assert ml_subprocess._PidfdSupport.usable is pidfd_kept
    assert len(calls) == (2 if pidfd_kept else 1)


# --- exit statuses, and other reapers in the process --------------------------
#
# A child's status is read once, by whoever reaps it first.  Popen.poll()/
# wait() report 0 for a child someone else reaped (bpo-15756): the loop must
# never take that up.  What each loop reports, by who else reaps children:
#
#   nobody         both loops: the real status.
#   a SIGCHLD handler calling waitpid(-1) (the handler and the loop race):
#                  asyncio: the real status if its watcher reaped first,
#                  else 255 and its "pid N ... will report returncode 255"
#                  warning; minloop the same, except where the kernel keeps
#                  the status for it: a pidfd on Linux >= 6.15
#                  (PIDFD_INFO_EXIT), the exit event of a kqueue.
#   SIGCHLD ignored (SIG_IGN: the kernel reaps every child at its exit):
#                  asyncio: always 255 and the warning; minloop: the real
#                  status where the kernel keeps it, else as asyncio.
#
# The child waits for a line on stdin before it exits, so its exit comes
# after the loop has started watching it: if the status is still to be had
# anywhere, the loop must report it.

EXITS = {
    'exit_0': ('exit 0', 0),
    'exit_7': ('exit 7', 7),
    'signal': ('kill -TERM $$', -signal.SIGTERM),
}


@functools.lru_cache(maxsize=None)
def kernel_keeps_reaped_status():
    """Whether a pidfd gives the status of its reaped process here
    (ioctl PIDFD_GET_INFO with PIDFD_INFO_EXIT, Linux >= 6.15)."""
    if not hasattr(os, 'pidfd_open'):
        return False
    proc = subprocess.Popen(['sh', '-c', 'exit 9'])
    pidfd = os.pidfd_open(proc.pid)
    try:
        proc.wait()
        info = bytearray(64)                        # struct pidfd_info
        struct.pack_into('=Q', info, 0, 1 << 3)     # mask = PIDFD_INFO_EXIT
        try:
            fcntl.ioctl(pidfd, 0xC040FF0B, info)    # PIDFD_GET_INFO
        except OSError:
            return False
        return (struct.unpack_from('=Q', info, 0)[0] & (1 << 3)
                and struct.unpack_from('=i', info, 60)[0] == 9 << 8)
    finally:
        os.close(pidfd)


def lost_status_warnings(caplog, pid):
    """asyncio's warnings that the status of pid was lost, by either of its
    child watchers' wordings."""
    wordings = (f'Unknown child process pid {pid}, '
                f'will report returncode 255',
                f'child process pid {pid} exit status already read: '
                f' will report returncode 255')
    return [r.getMessage() for r in caplog.records
            if r.name == 'asyncio' and r.levelno == logging.WARNING
            and r.getMessage() in wordings]


def asyncio_lost_status_wording(pid):
    """The wording asyncio's own child watcher would use here: its pidfd
    watcher's where it picks that one (3.12+, can_use_pidfd())."""
    import asyncio.unix_events
    can_use_pidfd = getattr(asyncio.unix_events, 'can_use_pidfd', None)
    if can_use_pidfd is not None and can_use_pidfd():
        return (f'child process pid {pid} exit status already read: '
                f' will report returncode 255')
    return f'Unknown child process pid {pid}, will report returncode 255'


@contextlib.contextmanager
def other_reaper(kind):
    """Another reaper of children in the process while the block runs:
    'nobody', 'waitpid' (a SIGCHLD handler reaping every exited child with
    waitpid(-1, WNOHANG)) or 'sig_ign' (SIGCHLD ignored).  Yields
    {pid: returncode} of the children the handler took."""
    taken = PidfdKqueue.taken = {}

    def reap_every_child(signum, frame):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            taken[pid] = os.waitstatus_to_exitcode(status)

    if kind == 'nobody':
        yield taken
        return
    if IN_SUB_INTERPRETER:
        pytest.skip(f"main interpreter only: {MAIN_INTERPRETER_ONLY['signals']}")
    old = signal.getsignal(signal.SIGCHLD)
    if kind == 'waitpid':
        signal.signal(signal.SIGCHLD, reap_every_child)
    elif kind == 'sig_ign':
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        yield taken
    finally:
        signal.signal(signal.SIGCHLD, old)


async def run_child(loop, api, script):
    """Start `sh -c 'read line; <script>'` with api, let it go, wait for it.

    Returns (pid, what the loop reported, the transport's returncode, the
    Popen object)."""
    script = 'read line; ' + script
    if api == 'create_subprocess_exec':
        proc = await asyncio.create_subprocess_exec('sh', '-c', script,
                                                    stdin=PIPE)
        proc.stdin.write(b'go\n')
        proc.stdin.close()
        returncode = await proc.wait()
        transport = proc._transport
        assert proc.returncode == returncode
    else:
        if api == 'subprocess_exec':
            start = loop.subprocess_exec(lambda: RecordingProtocol(loop),
                                         'sh', '-c', script,
                                         stdout=DEVNULL, stderr=DEVNULL)
        else:
            start = loop.subprocess_shell(lambda: RecordingProtocol(loop),
                                          script,
                                          stdout=DEVNULL, stderr=DEVNULL)
        transport, proto = await start
        transport.get_pipe_transport(0).write(b'go\n')
        transport.get_pipe_transport(0).close()
        returncode = await proto.exited
        await proto.done
    popen = transport.get_extra_info('subprocess')
    result = (transport.get_pid(), returncode, transport.get_returncode(),
              popen)
    transport.close()
    return result


def check_exit_status(loop, caplog, api, exit_kind, reaper, status_kept):
    """Run one child; assert what the loop reports against what the test
    knows: the real status unless another reaper took it and the kernel did
    not keep it (status_kept) for the loop; then 255 and asyncio's warning.
    """
    script, real = EXITS[exit_kind]
    caplog.set_level(logging.WARNING, logger='asyncio')
    with other_reaper(reaper) as taken:
        pid, returncode, transport_returncode, popen = run(
            loop, run_child(loop, api, script), timeout=10)
    lost = not status_kept and (reaper == 'sig_ign' or pid in taken)
    if pid in taken:
        assert taken[pid] == real            # the handler read the truth
    expected = 255 if lost else real
    assert returncode == expected, (taken, lost)
    # Never a status the loop does not know: above all, never 0 for a child
    # that did not exit with 0 (Popen's fallback).
    assert returncode == 0 or real != 0 or lost
    # Popen and the transport agree, and Popen's methods say the same.
    assert transport_returncode == popen.returncode == returncode
    assert popen.poll() == popen.wait() == returncode
    # asyncio's warning, in the words its own child watcher uses here.
    assert lost_status_warnings(caplog, pid) == (
        [asyncio_lost_status_wording(pid)] if lost else [])


APIS = ['create_subprocess_exec', 'subprocess_exec', 'subprocess_shell']


@pytest.mark.parametrize('api', APIS)
@pytest.mark.parametrize('exit_kind', list(EXITS))
@pytest.mark.parametrize('reaper', ['nobody', 'waitpid', 'sig_ign'])
def test_exit_status_with_other_reapers(loop, loop_kind, caplog, api,
                                        exit_kind, reaper):
    # minloop's default watch on Linux is a pidfd: it keeps the status where
    # the kernel does (an improvement on asyncio, in README's table).
    status_kept = (loop_kind == 'minloop' and hasattr(os, 'pidfd_open')
                   and kernel_keeps_reaped_status())
    check_exit_status(loop, caplog, api, exit_kind, reaper, status_kept)


@pytest.fixture(params=['pidfd_without_exit_info', 'thread', 'kqueue'])
def exit_watch_kind(request, minloop_only, monkeypatch):
    """minloop's other ways of seeing an exit, and whether each keeps the
    status of a child another reaper took."""
    from minloop import subprocess as ml_subprocess
    if request.param == 'pidfd_without_exit_info':
        # A kernel before 6.15: the pidfd tells the exit, not the status.
        if not hasattr(os, 'pidfd_open'):
            pytest.skip('needs pidfd_open')
        monkeypatch.setattr(ml_subprocess._PidfdSupport, 'exit_info', False)
        return request.param, False
    if request.param == 'thread':
        monkeypatch.setattr(ml_subprocess._PidfdSupport, 'usable', False)
        monkeypatch.setattr(ml_subprocess, '_HAVE_KQUEUE_PROC', False)
        return request.param, False
    request.getfixturevalue('kqueue_exit_watch')
    return request.param, True      # the exit event carries the status


@pytest.mark.parametrize('api', APIS)
@pytest.mark.parametrize('exit_kind', list(EXITS))
@pytest.mark.parametrize('reaper', ['nobody', 'waitpid', 'sig_ign'])
def test_exit_status_with_other_reapers_every_exit_watch(
        loop, caplog, exit_watch_kind, api, exit_kind, reaper):
    kind, status_kept = exit_watch_kind
    if kind == 'kqueue' and reaper == 'sig_ign':
        pytest.skip('the stand-in kqueue has no status where Linux keeps '
                    'none (a real kqueue has it from the exit event)')
    check_exit_status(loop, caplog, api, exit_kind, reaper, status_kept)


def status_kept_by_the_kernel():
    return hasattr(os, 'pidfd_open') and kernel_keeps_reaped_status()


async def start_gated_child(loop, exit_code=7):
    """A child that exits with exit_code once open_gate(gate) is called --
    synchronously, so the caller can reap it before the loop runs again.
    Returns (transport, protocol, gate)."""
    gate_r, gate = os.pipe()
    try:
        transport, proto = await loop.subprocess_exec(
            lambda: RecordingProtocol(loop),
            'sh', '-c', f'read line; exit {exit_code}',
            stdin=gate_r, stdout=DEVNULL, stderr=DEVNULL)
    except BaseException:
        os.close(gate)
        raise
    finally:
        os.close(gate_r)
    return transport, proto, gate


def open_gate(gate):
    os.write(gate, b'go\n')
    os.close(gate)


@pytest.mark.skipif(not hasattr(os, 'pidfd_open'), reason='needs pidfd_open')
@pytest.mark.parametrize('how', ['send_signal', 'terminate', 'kill', 'close'])
def test_signalling_a_child_reaped_elsewhere_invents_no_status(
        loop, minloop_only, caplog, monkeypatch, how):
    # Another reaper (the test, with waitpid) takes the child before the
    # loop has seen it exit, then the transport is asked to signal it.
    # Popen.send_signal()'s poll() would store 0 in Popen.returncode
    # (bpo-15756): asyncio then reports 255 but its Popen says 0.  minloop
    # signals nothing (the pid may be another process's by now) and invents
    # nothing.  (Only the pidfd watch: the fallback thread, blocked in
    # waitpid(), would race the test for the child.)
    caplog.set_level(logging.WARNING, logger='asyncio')
    real_kill = os.kill
    signalled = []

    def kill(pid, sig):
        signalled.append(pid)
        real_kill(pid, sig)

    async def main():
        transport, proto, gate = await start_gated_child(loop)
        popen = transport.get_extra_info('subprocess')
        open_gate(gate)
        # No await before this: the loop cannot have seen the exit.
        _, status = os.waitpid(transport.get_pid(), 0)
        assert os.waitstatus_to_exitcode(status) == 7
        monkeypatch.setattr(os, 'kill', kill)
        if how == 'send_signal':
            transport.send_signal(signal.SIGUSR1)
        else:
            getattr(transport, how)()
        monkeypatch.setattr(os, 'kill', real_kill)
        assert signalled == []
        assert popen.returncode is None
        returncode = await proto.exited
        await proto.done
        transport.close()
        return transport.get_pid(), returncode, popen.returncode

    pid, returncode, popen_returncode = run(loop, main())
    expected = 7 if status_kept_by_the_kernel() else 255
    assert returncode == popen_returncode == expected
    assert len(lost_status_warnings(caplog, pid)) == (expected == 255)


@pytest.mark.skipif(not hasattr(os, 'pidfd_open'), reason='needs pidfd_open')
def test_a_status_popen_invented_is_corrected_where_the_kernel_kept_it(
        loop, minloop_only):
    # The user asks the Popen object after another reaper took the child:
    # Popen stores 0 (bpo-15756).  Where the kernel kept the status for the
    # pidfd, the loop reports it, and puts it in Popen.returncode too;
    # elsewhere it can only take Popen's word.
    async def main():
        transport, proto, gate = await start_gated_child(loop)
        popen = transport.get_extra_info('subprocess')
        open_gate(gate)
        os.waitpid(transport.get_pid(), 0)
        assert popen.poll() == 0          # the standard library's fallback
        returncode = await proto.exited
        await proto.done
        transport.close()
        return returncode, popen.returncode

    expected = 7 if status_kept_by_the_kernel() else 0
    assert run(loop, main()) == (expected, expected)


@pytest.fixture(params=['pidfd', 'kqueue'])
def exit_fd_watch(request, minloop_only):
    """minloop's ways of seeing an exit on the loop (not in a thread)."""
    if request.param == 'pidfd':
        if not hasattr(os, 'pidfd_open'):
            pytest.skip('needs pidfd_open')
    else:
        request.getfixturevalue('kqueue_exit_watch')
    return request.param


def test_exit_waits_for_a_thread_inside_popen(loop, exit_fd_watch):
    # A thread holds the Popen object's lock (as one inside Popen.wait()
    # or poll() does) when the child exits: the loop neither reaps the
    # child under it nor reports a status before it can read one, and then
    # reaps it -- no zombie is left.  (The fallback thread itself waits
    # for the child holding the lock, as Popen.wait() does.)
    async def main():
        transport, proto = await loop.subprocess_exec(
            lambda: RecordingProtocol(loop), 'sh', '-c', 'read line; exit 7',
            stdout=DEVNULL, stderr=DEVNULL)
        popen = transport.get_extra_info('subprocess')
        pid = transport.get_pid()
        lock = popen._waitpid_lock
        lock.acquire()
        try:
            transport.get_pipe_transport(0).close()    # the child exits
            # Exited, and still not reaped: the lock is ours.
            while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG
                            | os.WNOWAIT) is None:
                await asyncio.sleep(0.001)
            for _ in range(20):
                await asyncio.sleep(0)
            assert not proto.exited.done()
            assert popen.returncode is None
        finally:
            lock.release()
        returncode = await proto.exited
        await proto.done
        transport.close()
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)       # reaped
        return returncode, popen.returncode

    assert run(loop, main()) == (7, 7)


@pytest.mark.skipif(not hasattr(os, 'P_PIDFD'), reason='needs waitid(P_PIDFD)')
def test_waitid_without_p_pidfd_falls_back_to_the_pid(loop, minloop_only,
                                                      monkeypatch):
    # Linux 5.3 has pidfd_open() but refuses waitid(P_PIDFD) with EINVAL.
    from minloop import subprocess as ml_subprocess
    monkeypatch.setattr(ml_subprocess._PidfdSupport, 'waitid', True)
    real_waitid = os.waitid
    refused = []

    def waitid(idtype, id, options):
        if idtype == os.P_PIDFD:
            refused.append(id)
            raise OSError(errno.EINVAL, 'Invalid argument')
        return real_waitid(idtype, id, options)

    monkeypatch.setattr(os, 'waitid', waitid)

    async def main():
        codes = []
        for code in (7, 0):
            proc = await asyncio.create_subprocess_exec('sh', '-c', f'exit {code}')
            codes.append(await proc.wait())
        return codes

    assert run(loop, main()) == [7, 0]
    assert len(refused) == 1
    assert ml_subprocess._PidfdSupport.waitid is False


@pytest.mark.parametrize('event_has_status', [True, False])
def test_macos_exit_event_status(loop, kqueue_exit_watch, monkeypatch, caplog,
                                 event_has_status):
    # macOS puts the status in the NOTE_EXIT event only when asked with
    # NOTE_EXITSTATUS, and says so in the event's fflags.  Another reaper
    # takes the child first: with the status in the event the loop reports
    # it; without, it is lost (255 and asyncio's warning).
    from minloop import subprocess as ml_subprocess
    monkeypatch.setattr(ml_subprocess, '_NOTE_EXITSTATUS', 0x04000000)
    caplog.set_level(logging.WARNING, logger='asyncio')
    real_events = PidfdKqueue._exit_events

    def exit_events(self):
        events = real_events(self)
        if not event_has_status:
            for event in events:
                event.fflags &= ~0x04000000
                event.data = 0
        return events

    monkeypatch.setattr(PidfdKqueue, '_exit_events', exit_events)

    async def main():
        transport, proto, gate = await start_gated_child(loop)
        pid = transport.get_pid()
        open_gate(gate)
        # The other reaper: the test, before the loop sees the event.
        _, status = os.waitpid(pid, 0)
        PidfdKqueue.taken[pid] = os.waitstatus_to_exitcode(status)
        returncode = await proto.exited
        await proto.done
        transport.close()
        return pid, returncode, transport.get_extra_info('subprocess').returncode

    pid, returncode, popen_returncode = run(loop, main())
    expected = 7 if event_has_status else 255
    assert returncode == popen_returncode == expected
    assert len(lost_status_warnings(caplog, pid)) == (not event_has_status)
