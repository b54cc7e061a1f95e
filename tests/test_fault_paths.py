"""Error paths the fault harness (tests/faults/, docs/faults.md) found,
each reproduced here without libfiu: a child process preloads only the
harness's shim (tests/faults/fiu_shim.c, built with cc), which fails the
call the test names.  On both loops."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "faults"))

import injector  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("cc") is None or not sys.platform.startswith("linux"),
                                reason="the shim is built with cc and wraps Linux's epoll_ctl")

def shim_env():
    """The environment of a child that preloads the shim: after what is
    preloaded already (.ci/run's ASan stage preloads the sanitizers' runtimes,
    which must come first)."""
    shim = injector.shim_path()
    preload = " ".join(filter(None, [os.environ.get("LD_PRELOAD", "").replace(":", " "), shim]))
    return dict(os.environ, LD_PRELOAD=preload, FAULT_SHIM=shim)


# Each child: the shim (its switches through ctypes), and the loop named by
# argv[1].
PRELUDE = textwrap.dedent("""
    import asyncio, ctypes, os, socket, sys
    shim = ctypes.CDLL(os.environ["FAULT_SHIM"])
    if sys.argv[1] == "minloop":
        import minloop
        loop = minloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
""")

CHILD = PRELUDE + textwrap.dedent("""

    async def main():
        a, b = socket.socketpair()
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        lost = loop.create_future()

        class Echo(asyncio.Protocol):
            def connection_made(self, transport):
                self.transport = transport

            def data_received(self, data):
                loop.create_task(self.send())

            async def send(self):
                # From a task, as a streams handler writes: more than the
                # socket takes, so the rest waits for a writer, and arming
                # it fails.
                shim.shim_fail_epoll_ctl(1)
                try:
                    self.transport.write(b"x" * 60_000)   # held: under the high-water mark
                except OSError as exc:   # asyncio: to the caller
                    self.transport.abort()
                    lost.set_result(exc)

            def connection_lost(self, exc):
                if not lost.done():
                    lost.set_result(exc)

        await loop.create_connection(Echo, sock=a)
        b.send(b"go")
        exc = await asyncio.wait_for(lost, 10)
        b.close()
        # The loop goes on serving.
        await asyncio.sleep(0.01)
        print(type(exc).__name__, getattr(exc, "errno", None))

    reports = []
    loop.set_exception_handler(lambda lp, ctx: reports.append(ctx["message"]))
    loop.run_until_complete(main())
    print(reports)
""")


@pytest.mark.parametrize("kind", ["minloop", "asyncio"])
def test_arming_the_writer_fails_after_a_partial_send(kind):
    """epoll_ctl() ENOMEM arming the writer for what a send left: the
    error reaches the caller of write() (asyncio) or the protocol's
    connection_lost (minloop, which sends a callback's writes as the
    callback ends), and the loop goes on.  It escaped from that send and
    stopped minloop's loop."""
    env = shim_env()
    out = subprocess.run([sys.executable, "-c", CHILD, kind], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "OSError 12"


# How the children below end: main() run, then what reached the exception
# handler, each exception's type and errno.
REPORTED = textwrap.dedent("""
    reports = []
    loop.set_exception_handler(lambda lp, ctx: reports.append(
        (type(ctx.get("exception")).__name__, getattr(ctx.get("exception"), "errno", None))))
    loop.run_until_complete(main())
    print(reports)
""")

START_CHILD = PRELUDE + textwrap.dedent("""

    async def main():
        a, b = socket.socketpair()
        lost = loop.create_future()

        class Proto(asyncio.Protocol):
            def connection_lost(self, exc):
                lost.set_result(exc)

        # The next epoll_ctl() is the new transport's, watching its socket.
        shim.shim_fail_epoll_ctl(1)
        transport, _ = await loop.create_connection(Proto, sock=a)
        for _ in range(5):
            await asyncio.sleep(0)
        if lost.done():
            exc = lost.result()
            b.setblocking(False)
            peer = b.recv(10)          # the peer sees the connection end
            print("lost", type(exc).__name__, exc.errno, peer)
        else:
            print("open", transport.is_closing())
            transport.close()
        b.close()

""") + REPORTED


@pytest.mark.parametrize("kind", ["minloop", "asyncio"])
def test_watching_a_new_connection_fails(kind):
    """epoll_ctl() ENOMEM as a new transport starts watching its socket:
    asyncio reports it to the exception handler and the connection stays
    open, never read (its peer hangs); minloop ends that connection with
    the error (connection_lost(exc), the peer sees the end)."""
    env = shim_env()
    out = subprocess.run([sys.executable, "-c", START_CHILD, kind], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    first, reports = out.stdout.splitlines()[:2]
    if kind == "minloop":
        assert first == "lost OSError 12 b''"
        assert reports == "[]"            # an OSError: asyncio's _fatal_error logs it in debug only
    else:
        assert first == "open False"
        assert reports == "[('OSError', 12)]"


WATCH_CHILD = PRELUDE + textwrap.dedent("""

    async def main():
        lost = loop.create_future()

        class Proto(asyncio.Protocol):
            def connection_lost(self, exc):
                lost.set_result(exc)

        # The next epoll_ctl() is the new transport's, watching its fd.
        if sys.argv[2] == "pipe":
            r, w = os.pipe()
            shim.shim_fail_epoll_ctl(1)
            try:
                transport, _ = await loop.connect_read_pipe(Proto, os.fdopen(r, "rb", 0))
            except OSError as exc:
                transport = None
                print("raised", type(exc).__name__, exc.errno)
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            shim.shim_fail_epoll_ctl(1)
            transport, _ = await loop.create_datagram_endpoint(Proto, sock=s)
        for _ in range(5):
            await asyncio.sleep(0)
        if lost.done():
            exc = lost.result()
            print("lost", type(exc).__name__, exc.errno,
                  "-" if transport is None else transport.is_closing())
        else:
            print("open", transport.is_closing())
            transport.close()
            await asyncio.sleep(0)
        if sys.argv[2] == "pipe":
            os.close(w)

""") + REPORTED


@pytest.mark.parametrize("what", ["pipe", "udp"])
@pytest.mark.parametrize("kind", ["minloop", "asyncio"])
def test_watching_a_new_pipe_or_endpoint_fails(kind, what):
    """epoll_ctl() ENOMEM as a read pipe or a datagram endpoint starts
    watching its fd: asyncio reports it to the exception handler and the
    transport stays open, never read (a reader waits for ever); minloop ends
    that transport with the error (connection_lost(exc)), and
    connect_read_pipe() raises it.  Also under -X dev (asyncio's debug mode),
    where connect_read_pipe() logs the pipe's fileno() once woken."""
    out = subprocess.run([sys.executable, "-c", WATCH_CHILD, kind, what], env=shim_env(),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    if kind == "minloop" and what == "pipe":
        # A pipe's _fatal_error reports every error but EIO, as asyncio's
        # read pipe does.
        assert lines == ["raised OSError 12", "lost OSError 12 -", "[('OSError', 12)]"]
        return
    first, reports = lines[:2]
    if kind == "minloop":
        assert first == "lost OSError 12 True"
        assert reports == "[]"            # an OSError: a socket's _fatal_error logs it in debug only
    else:
        assert first == "open False"
        assert reports == "[('OSError', 12)]"
