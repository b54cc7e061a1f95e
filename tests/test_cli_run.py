"""``python -m minloop run`` and ``info`` as a user types them: exit status,
stdout and stderr of a real process.

``run`` must give the program what python gives it (sys.argv, sys.path,
__main__, python's messages and tracebacks): most tests here run the same
program both ways and compare.
"""

import json
import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import pytest

import minloop
from conftest import DAEMON_THREADS, sigint_as_from_a_terminal


def run_cli(*args, cwd=None, env=None, input=None):
    return subprocess.run([sys.executable, '-m', 'minloop', *args], capture_output=True,
                          text=True, timeout=60, cwd=cwd, env=env, input=input)


def run_python(*args, cwd=None, input=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd, input=input)


def outcome(proc):
    return proc.returncode, proc.stdout, proc.stderr


# --- the program's arguments and view of the world ---------------------------

# What a program can see of how it was started.
SHOW = textwrap.dedent('''
    import json, sys
    main = sys.modules['__main__']
    print(json.dumps({
        'argv': sys.argv,
        'path': sys.path,
        'name': __name__,
        'main_is_this_module': main.__dict__ is globals(),
        'file': globals().get('__file__'),
        'spec': __spec__.name if __spec__ else None,
        'package': __package__,
        'loader': type(__loader__).__name__,
        'cached': '__cached__' in globals(),
    }))
''')


@pytest.fixture
def programs(tmp_path):
    """tmp_path/sub/show.py, tmp_path/showmod.py, tmp_path/showpkg (a package
    with __main__) and tmp_path/showdir (a directory with __main__.py)."""
    (tmp_path / 'sub').mkdir()
    (tmp_path / 'sub' / 'show.py').write_text(SHOW)
    (tmp_path / 'showmod.py').write_text(SHOW)
    (tmp_path / 'showpkg').mkdir()
    (tmp_path / 'showpkg' / '__init__.py').write_text('')
    (tmp_path / 'showpkg' / '__main__.py').write_text(SHOW)
    (tmp_path / 'showdir').mkdir()
    (tmp_path / 'showdir' / '__main__.py').write_text(SHOW)
    return tmp_path


@pytest.mark.parametrize('args', [
    ['sub/show.py'],
    ['sub/show.py', '--help'],
    ['sub/show.py', '-m', 'x', '--', '-h'],
    ['-m', 'showmod', '--port', '8000', 'app:app'],
    ['-m', 'showmod', '-h'],
    ['-m', 'showpkg', '--bind', '127.0.0.1', '0'],
    ['showdir', '-v'],
], ids=lambda args: ' '.join(args))
def test_run_gives_the_program_what_python_gives_it(programs, args):
    ours = run_cli('run', *args, cwd=programs)
    theirs = run_python(*args, cwd=programs)
    assert ours.returncode == theirs.returncode == 0, ours.stderr
    assert ours.stderr == ''
    assert json.loads(ours.stdout) == json.loads(theirs.stdout)


def test_run_takes_the_module_glued_to_m_and_a_double_dash(programs):
    ours = run_cli('run', '-mshowmod', 'a', cwd=programs)
    assert json.loads(ours.stdout)['argv'][1:] == ['a'], ours.stderr
    ours = run_cli('run', '--', 'sub/show.py', '-x', cwd=programs)
    assert json.loads(ours.stdout)['argv'] == ['sub/show.py', '-x'], ours.stderr


def test_run_reads_the_program_from_stdin_with_a_dash(tmp_path):
    program = 'import sys; print(sys.argv, __name__, sys.path[0] == "")\n'
    ours = run_cli('run', '-', 'a', '-b', cwd=tmp_path, input=program)
    theirs = run_python('-', 'a', '-b', cwd=tmp_path, input=program)
    assert outcome(ours) == outcome(theirs)
    assert ours.stdout == "['-', 'a', '-b'] __main__ True\n"


@pytest.mark.parametrize('how', [['spawner.py'], ['-m', 'spawner']], ids=' '.join)
def test_run_programs_main_module_is_found_by_multiprocessing_spawn(tmp_path, how):
    # A spawned child re-imports the parent's __main__ by its file or name.
    (tmp_path / 'spawner.py').write_text(textwrap.dedent('''
        import multiprocessing

        def square(x):
            return x * x

        if __name__ == '__main__':
            with multiprocessing.get_context('spawn').Pool(1) as pool:
                print(pool.map(square, [1, 2, 3]))
    '''))
    out = run_cli('run', *how, cwd=tmp_path)
    assert outcome(out) == (0, '[1, 4, 9]\n', '')


def test_run_m_pkg_dash_h_is_the_programs_help(tmp_path):
    (tmp_path / 'tool.py').write_text(textwrap.dedent('''
        import argparse
        parser = argparse.ArgumentParser(prog='tool', description='the tool itself')
        parser.add_argument('--port', type=int)
        print(parser.parse_args())
    '''))
    out = run_cli('run', '-m', 'tool', '-h', cwd=tmp_path)
    assert out.returncode == 0 and 'the tool itself' in out.stdout and 'minloop' not in out.stdout
    out = run_cli('run', 'tool.py', '--port', '8000', cwd=tmp_path)
    assert out.returncode == 0 and out.stdout == 'Namespace(port=8000)\n', out.stderr


def test_run_usage_errors():
    out = run_cli('run')
    assert out.returncode == 2 and 'a script or -m MODULE is required' in out.stderr
    out = run_cli('run', '-m')
    assert out.returncode == 2 and 'argument -m: expected one argument' in out.stderr
    out = run_cli('run', '--port', '1', 'app.py')
    assert out.returncode == 2 and 'unrecognized option --port' in out.stderr
    out = run_cli('run', '-h')
    assert out.returncode == 0 and out.stdout.startswith('usage: python -m minloop run')


class Lines:
    """The lines of a child's pipe, read by a thread (a buffered reader may
    hold lines that a select() on the pipe cannot see)."""

    def __init__(self, stream):
        self._queue = queue.Queue()
        self.seen = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=DAEMON_THREADS)
        self._thread.start()

    def _read(self, stream):
        with stream:   # the pipe is this reader's: closed at its end
            for line in stream:
                self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern, timeout):
        """The match of the first line (from here on) that matches, or None."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if line is None:
                self._queue.put(None)
                return None
            self.seen.append(line)
            match = re.search(pattern, line)
            if match:
                return match

    def all(self, timeout=20):
        """Every line, once the pipe is closed."""
        self._thread.join(timeout)
        while not self._queue.empty():
            line = self._queue.get()
            if line is not None:
                self.seen.append(line)
        return ''.join(self.seen)


@pytest.mark.main_interpreter("preexec_fn")
def test_run_m_http_server_with_its_own_options(tmp_path):
    (tmp_path / 'hello.txt').write_text('hello')
    proc = subprocess.Popen(
        [sys.executable, '-m', 'minloop', 'run', '-m', 'http.server', '--bind', '127.0.0.1',
         '0'], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, PYTHONUNBUFFERED='1'), preexec_fn=sigint_as_from_a_terminal)
    out = Lines(proc.stdout)
    try:
        match = out.wait_for(r'Serving HTTP on 127\.0\.0\.1 port (\d+)', 10)
        assert match, out.seen
        with urllib.request.urlopen(f'http://127.0.0.1:{match[1]}/hello.txt', timeout=5) as r:
            assert r.read() == b'hello'
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(10)
    assert proc.returncode == 0 and 'Keyboard interrupt received, exiting.' in out.all()


# --- errors: python's words, python's status, the program's frames -----------

@pytest.fixture
def broken(tmp_path):
    (tmp_path / 'emptydir').mkdir()
    (tmp_path / 'pkgnomain').mkdir()
    (tmp_path / 'pkgnomain' / '__init__.py').write_text('')
    (tmp_path / 'boom.py').write_text(textwrap.dedent('''\
        def inner():
            raise ValueError('boom')

        def outer():
            try:
                inner()
            except ValueError as exc:
                raise RuntimeError('while running outer') from exc

        outer()
    '''))
    (tmp_path / 'syntax.py').write_text('def (\n')
    (tmp_path / 'interrupted.py').write_text('import os\nraise KeyboardInterrupt\n')
    (tmp_path / 'exits.py').write_text('import sys\nsys.exit("bye: status 1")\n')
    (tmp_path / 'badinit').mkdir()
    (tmp_path / 'badinit' / '__init__.py').write_text('1 / 0\n')
    (tmp_path / 'badinit' / 'mod.py').write_text('')
    return tmp_path


ERROR_CASES = [
    ['nonexistent.py'],
    ['-m', 'nosuchmodule'],
    ['-m', 'pkgnomain'],
    ['-m', 'os.nosuch'],
    ['emptydir'],
    ['syntax.py'],
    ['-m', 'syntax'],
    ['boom.py'],
    ['-m', 'boom'],
    ['interrupted.py'],
    ['exits.py', 'x'],
    ['-m', 'badinit.mod'],
]


MINLOOP_DIR = os.path.join(os.path.dirname(minloop.__file__), '')


def without_runpy_frames(stderr):
    # python -m shows frames of runpy (which it runs the module with) first;
    # they are all a traceback under `run` leaves out.
    return re.sub(r'  File "[^"]*runpy[^"]*", line \d+, in \w+\n(?:    .*\n)*', '', stderr)


@pytest.mark.parametrize('args', ERROR_CASES, ids=' '.join)
def test_run_fails_as_python_does(broken, args):
    got = run_cli('run', *args, cwd=broken)
    want = run_python(*args, cwd=broken)
    assert want.returncode != 0
    assert outcome(got) == (want.returncode, want.stdout, without_runpy_frames(want.stderr))
    # No frame of minloop's own or of runpy.  (Not the word "minloop":
    # python's own message names the interpreter, whose path holds it in a
    # clone called minloop.)
    assert MINLOOP_DIR not in got.stderr and 'runpy' not in got.stderr


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="needs a venv to reach by another path")
def test_run_fails_as_python_does_in_a_clone_named_minloop(broken, tmp_path_factory):
    """The default clone's name is minloop, and python's messages name the
    interpreter: <clone>/.venv/bin/python.  The venv reached through such a
    path gives the same messages both ways."""
    clone = tmp_path_factory.mktemp('clone') / 'minloop'
    clone.mkdir()
    (clone / '.venv').symlink_to(sys.prefix, target_is_directory=True)
    python = str(clone / '.venv' / 'bin' / os.path.basename(sys.executable))
    for args in (['-m', 'nosuchmodule'], ['nonexistent.py']):
        got = subprocess.run([python, '-m', 'minloop', 'run', *args], capture_output=True,
                             text=True, timeout=60, cwd=broken)
        want = subprocess.run([python, *args], capture_output=True, text=True,
                              timeout=60, cwd=broken)
        assert 'minloop' in want.stderr
        assert outcome(got) == outcome(want)


def test_run_error_lines(broken):
    # The one-line forms, spelled out (the comparison above proves them equal
    # to python's; this says what they are).
    got = run_cli('run', 'nonexistent.py', cwd=broken)
    assert got.returncode == 2
    assert got.stderr == (f"{sys.executable}: can't open file "
                          f"'{broken / 'nonexistent.py'}': [Errno 2] No such file or directory\n")
    got = run_cli('run', '-m', 'nosuchmodule', cwd=broken)
    assert got.returncode == 1
    assert got.stderr == f'{sys.executable}: No module named nosuchmodule\n'
    got = run_cli('run', 'interrupted.py', cwd=broken)
    assert got.returncode == -signal.SIGINT
    assert got.stderr.startswith(f'Traceback (most recent call last):\n  File '
                                 f'"{broken / "interrupted.py"}", line 2, in <module>\n')


def test_run_traceback_reaches_the_programs_own_excepthook(tmp_path):
    (tmp_path / 'hooked.py').write_text(textwrap.dedent('''
        import sys, traceback
        def hook(exc_type, exc, tb):
            frames = traceback.extract_tb(tb)
            print(exc_type.__name__, [(f.name, f.lineno) for f in frames],
                  tb is exc.__traceback__)
        sys.excepthook = hook
        def f():
            raise KeyError(1)
        f()
    '''))
    got = run_cli('run', 'hooked.py', cwd=tmp_path)
    assert outcome(got) == outcome(run_python('hooked.py', cwd=tmp_path))
    assert got.stdout == "KeyError [('<module>', 10), ('f', 9)] True\n"


# --- a program that picks its own loop ---------------------------------------

OWN_LOOP = textwrap.dedent('''
    import asyncio, sys, threading

    async def main():
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__

    how = sys.argv[1]
    if how == 'explicit':  # no policy involved
        loop = asyncio.SelectorEventLoop()
        print(loop.run_until_complete(main()), loop.run_until_complete(main()))
        loop.close()
    elif how == 'factory':
        print(asyncio.run(main(), loop_factory=asyncio.SelectorEventLoop))
        print(asyncio.run(main(), loop_factory=asyncio.SelectorEventLoop))
    elif how == 'uvloop':
        import uvloop
        loop = uvloop.new_event_loop()
        print(loop.run_until_complete(main()))
        loop.close()
    elif how == 'thread':  # another thread's loop is not the program's choice
        def in_thread():
            loop = asyncio.SelectorEventLoop()
            print(loop.run_until_complete(main()))
            loop.close()
        thread = threading.Thread(target=in_thread)
        thread.start()
        thread.join()
        print(asyncio.run(main()))
    else:
        print(asyncio.run(main()))
''')

WARNING = re.compile(r'^python -m minloop run: the program runs its own event loop, '
                     r'(\S+), not minloop \(.*\)$', re.M)


def run_own_loop(tmp_path, how):
    (tmp_path / 'own.py').write_text(OWN_LOOP)
    out = run_cli('run', 'own.py', how, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return out, WARNING.findall(out.stderr)


def test_run_says_once_when_the_program_runs_another_loop(tmp_path):
    out, warned = run_own_loop(tmp_path, 'explicit')
    assert out.stdout == 'asyncio.unix_events asyncio.unix_events\n'
    assert warned == ['asyncio.unix_events._UnixSelectorEventLoop']
    assert len(out.stderr.splitlines()) == 1


@pytest.mark.skipif(sys.version_info < (3, 12), reason='asyncio.run(loop_factory=) is 3.12+')
def test_run_says_so_for_asyncio_run_with_a_loop_factory(tmp_path):
    out, warned = run_own_loop(tmp_path, 'factory')
    assert out.stdout == 'asyncio.unix_events\n' * 2
    assert warned == ['asyncio.unix_events._UnixSelectorEventLoop']


def test_run_says_so_for_uvloop(tmp_path):
    pytest.importorskip('uvloop')
    out, warned = run_own_loop(tmp_path, 'uvloop')
    assert warned == ['uvloop.Loop']


@pytest.mark.parametrize('how', ['minloop', 'thread'])
def test_run_is_silent_when_the_main_thread_runs_minloop(tmp_path, how):
    out, warned = run_own_loop(tmp_path, how)
    assert out.stdout.splitlines()[-1] == 'minloop.base_events'
    assert out.stderr == ''


ASGI_APP = textwrap.dedent('''
    import asyncio

    async def app(scope, receive, send):
        if scope['type'] != 'http':
            return
        body = type(asyncio.get_running_loop()).__module__.encode()
        await send({'type': 'http.response.start', 'status': 200,
                    'headers': [(b'content-length', str(len(body)).encode())]})
        await send({'type': 'http.response.body', 'body': body})
''')


@pytest.mark.timeout(60)
@pytest.mark.parametrize('loop_option', [[], ['--loop', 'minloop:new_event_loop']],
                         ids=['uvicorns-loop', 'loop-minloop'])
def test_run_m_uvicorn(tmp_path, loop_option):
    uvicorn = pytest.importorskip('uvicorn')
    # Loop factories by import string came with uvicorn 0.36.
    takes_factories = tuple(map(int, re.findall(r'\d+', uvicorn.__version__)[:2])) >= (0, 36)
    if loop_option and not takes_factories:
        pytest.skip(f'uvicorn {uvicorn.__version__} has no --loop MODULE:FACTORY')
    (tmp_path / 'asgi.py').write_text(ASGI_APP)
    proc = subprocess.Popen(
        [sys.executable, '-m', 'minloop', 'run', '-m', 'uvicorn', '--port', '0',
         '--no-access-log', *loop_option, 'asgi:app'],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = Lines(proc.stderr)
    try:
        match = err.wait_for(r'Uvicorn running on http://127\.0\.0\.1:(\d+)', 30)
        assert match, (err.seen, proc.poll())
        with urllib.request.urlopen(f'http://127.0.0.1:{match[1]}/', timeout=5) as r:
            served_by = r.read().decode()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
    stderr = err.all()
    assert proc.returncode == 0, stderr
    assert 'Finished server process' in stderr
    warned = WARNING.findall(stderr)
    if loop_option:
        assert served_by == 'minloop.base_events'
        assert warned == []
    elif served_by == 'minloop.base_events':  # an older uvicorn, without uvloop: the policy's
        assert warned == []
    else:  # uvloop, or asyncio's loop: uvicorn passes its own loop_factory
        (name,) = warned
        assert name.startswith(served_by + '.')
        option = 'minloop:new_event_loop' if takes_factories else 'asyncio'
        assert f'uvicorn chose it: pass --loop {option})' in stderr


def test_run_m_uvicorn_help_is_uvicorns():
    pytest.importorskip('uvicorn')
    out = run_cli('run', '-m', 'uvicorn', '--help')
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('Usage: python -m uvicorn') and '--loop' in out.stdout


# --- info ----------------------------------------------------------------------

def info(*args, **kw):
    out = run_cli(*args, 'info', **kw)
    assert out.returncode == 0, out.stderr
    # "key  value" lines; a long value continues on indented lines.
    facts, key = {}, None
    for line in out.stdout.splitlines():
        if line.startswith(' '):
            facts[key] += ' ' + line.strip()
        else:
            key, value = re.match(r'(\S+(?: \S+)?) {2,}(.*)', line).groups()
            facts[key] = value
    return facts


def test_info_says_what_a_bug_report_needs():
    from minloop import loop
    facts = info()
    assert list(facts) == ['minloop', 'build', 'python', 'platform', 'poller', 'child exits',
                           'policy', 'packages', 'telemetry']
    assert facts['minloop'] == (f'{minloop.__version__} '
                                f'({os.path.dirname(minloop.__file__)})')
    flags = loop._build_flags()
    assert facts['build'].startswith('release' if flags['optimized'] else 'debug')
    assert ('AddressSanitizer' in facts['build']) == flags['address_sanitizer']
    assert sys.executable in facts['python']
    backend = minloop.poller_backend_name()
    emulated = " (libkqueue's emulation on Linux: a test build)" if flags['libkqueue'] else ''
    assert facts['poller'].startswith(backend + emulated + '; timed waits with ')
    assert flags['libkqueue'] == (backend == 'kqueue' and sys.platform.startswith('linux'))
    if backend == 'epoll':
        probe = loop._poller_probe_pwait2()
        assert ('with epoll_pwait2 (nanosecond' in facts['poller']) == (probe == 0)
    if hasattr(os, 'pidfd_open'):
        assert 'pidfd' in facts['child exits'] or 'thread' in facts['child exits']
    assert facts['policy'].startswith("asyncio's default")


def test_info_under_run_sees_minloops_policy():
    assert info('run', '-m', 'minloop')['policy'].startswith("minloop's")


def test_info_lists_asyncio_packages_without_importing_them(tmp_path):
    # Metadata only: no module behind it, so an import would fail.
    dist = tmp_path / 'uvloop-9.8.7.dist-info'
    dist.mkdir()
    (dist / 'METADATA').write_text('Metadata-Version: 2.1\nName: uvloop\nVersion: 9.8.7\n')
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    packages = info(env=env)['packages']
    assert packages.startswith('uvloop 9.8.7') or 'uvloop 9.8.7,' in packages, packages
