"""add_reader/add_writer/remove_reader/remove_writer on sockets and pipes."""

import os
import socket
import tempfile

import pytest

from conftest import import_minloop


def _stop_after(loop, n, counter, extra=None):
    """A callback that counts its calls and stops the loop at the n-th."""
    def cb(*args):
        counter.append(args)
        if extra is not None:
            extra()
        if len(counter) >= n:
            loop.stop()
    return cb


def test_reader_fires_on_socket_data(loop, socketpair):
    """add_reader on a socket fires once data arrives, with its args."""
    a, b = socketpair
    got = []

    def on_readable(tag):
        got.append((tag, a.recv(100)))
        loop.stop()

    loop.add_reader(a.fileno(), on_readable, "tag")
    loop.call_later(0.005, b.send, b"hello")
    loop.run_forever()
    assert got == [("tag", b"hello")]
    assert loop.remove_reader(a.fileno()) is True


def test_reader_is_level_triggered_socket(loop, socketpair):
    """A reader that leaves data unread fires again on every iteration."""
    a, b = socketpair
    calls = []
    b.send(b"x")
    loop.add_reader(a, _stop_after(loop, 3, calls))
    loop.run_forever()
    assert len(calls) == 3
    assert a.recv(10) == b"x"
    loop.remove_reader(a)


def test_reader_fires_exactly_once_per_iteration(loop, socketpair):
    """A readable fd's callback runs exactly once per loop iteration."""
    a, b = socketpair
    calls = []
    b.send(b"x")
    loop.add_reader(a, calls.append, 1)
    for expected in (1, 2, 3):
        loop.stop()          # exactly one iteration
        loop.run_forever()
        assert len(calls) == expected
    loop.remove_reader(a)


def test_reader_is_level_triggered_pipe(loop, pipe):
    """add_reader on an os.pipe read end is level-triggered too."""
    r, w = pipe
    os.write(w, b"data")
    calls = []
    loop.add_reader(r, _stop_after(loop, 3, calls))
    loop.run_forever()
    assert len(calls) == 3
    assert os.read(r, 10) == b"data"
    assert loop.remove_reader(r) is True


def test_reader_stops_firing_once_drained(loop, socketpair, run_for):
    """Once the data is read the reader no longer fires."""
    a, b = socketpair
    calls = []

    def on_readable():
        calls.append(a.recv(100))

    b.send(b"abc")
    loop.add_reader(a, on_readable)
    run_for(loop, 0.02)
    assert calls == [b"abc"]
    loop.remove_reader(a)


def test_reader_fires_on_eof(loop, socketpair):
    """Peer close makes the fd readable (recv returns b'')."""
    a, b = socketpair
    got = []

    def on_readable():
        got.append(a.recv(10))
        loop.stop()

    loop.add_reader(a, on_readable)
    loop.call_soon(b.close)
    loop.run_forever()
    assert got == [b""]
    loop.remove_reader(a)


def test_writer_fires_and_is_level_triggered(loop, socketpair):
    """add_writer fires while the socket is writable, on every iteration."""
    a, _ = socketpair
    calls = []
    loop.add_writer(a.fileno(), _stop_after(loop, 3, calls), "w")
    loop.run_forever()
    assert calls == [("w",)] * 3
    assert loop.remove_writer(a.fileno()) is True


def test_writer_on_pipe(loop, pipe):
    """add_writer fires on an os.pipe write end."""
    r, w = pipe
    calls = []
    loop.add_writer(w, _stop_after(loop, 1, calls))
    loop.run_forever()
    assert len(calls) == 1
    assert loop.remove_writer(w) is True


def test_writer_waits_for_buffer_space(loop, socketpair, run_for):
    """A writer on a full socket does not fire until the peer drains it."""
    a, b = socketpair
    try:
        while True:
            a.send(b"x" * 65536)
    except BlockingIOError:
        pass
    calls = []
    loop.add_writer(a, calls.append, 1)
    run_for(loop, 0.02)
    assert calls == []

    def drain():
        try:
            while True:
                b.recv(1 << 20)
        except BlockingIOError:
            pass

    loop.call_soon(drain)
    loop.call_later(0.05, loop.stop)
    loop.run_forever()
    assert calls  # writable again
    loop.remove_writer(a)


def test_remove_reader_writer_return_values(loop, socketpair):
    """remove_reader/remove_writer return True if something was removed, else False."""
    a, _ = socketpair
    assert loop.remove_reader(a) is False
    assert loop.remove_writer(a) is False
    loop.add_reader(a, lambda: None)
    assert loop.remove_writer(a) is False
    assert loop.remove_reader(a) is True
    assert loop.remove_reader(a) is False
    loop.add_writer(a, lambda: None)
    assert loop.remove_reader(a) is False
    assert loop.remove_writer(a) is True
    assert loop.remove_writer(a) is False


def test_remove_reader_stops_callbacks(loop, socketpair, run_for):
    """After remove_reader the callback no longer fires, even with data pending."""
    a, b = socketpair
    calls = []
    b.send(b"x")
    loop.add_reader(a, calls.append, 1)
    run_for(loop, 0.005)
    n = len(calls)
    assert n >= 1
    loop.remove_reader(a)
    run_for(loop, 0.01)
    assert len(calls) == n


def test_fileobj_and_int_fd_are_the_same_key(loop, socketpair):
    """A socket object and its fileno() name the same registration."""
    a, _ = socketpair
    loop.add_reader(a, lambda: None)
    assert loop.remove_reader(a.fileno()) is True
    loop.add_writer(a.fileno(), lambda: None)
    assert loop.remove_writer(a) is True


def test_re_adding_reader_replaces_callback(loop, socketpair):
    """add_reader on an fd that has a reader replaces it; the old one never runs again."""
    a, b = socketpair
    calls = []
    loop.add_reader(a, calls.append, "old")
    loop.add_reader(a, _stop_after(loop, 1, calls), "new")
    b.send(b"x")
    loop.run_forever()
    assert calls == [("new",)]
    assert loop.remove_reader(a) is True
    assert loop.remove_reader(a) is False


def test_re_adding_writer_replaces_callback(loop, socketpair):
    """add_writer on an fd that has a writer replaces it."""
    a, _ = socketpair
    calls = []
    loop.add_writer(a, calls.append, "old")
    loop.add_writer(a, _stop_after(loop, 1, calls), "new")
    loop.run_forever()
    assert calls == [("new",)]
    assert loop.remove_writer(a) is True


def test_reader_replaced_while_ready_in_same_batch(loop, socketpair):
    """Replacing a reader whose event is already queued cancels the old handle."""
    a, b = socketpair
    c, d = socket.socketpair()
    try:
        c.setblocking(False)
        calls = []

        def first():
            calls.append("first")
            # Whichever reader runs first replaces the other's callback.
            other = c if first_fd[0] == a.fileno() else a
            loop.add_reader(other, calls.append, "replacement")

        first_fd = [None]

        def make(sock):
            def cb():
                if first_fd[0] is None:
                    first_fd[0] = sock.fileno()
                    first()
                else:
                    calls.append("old-callback")
            return cb

        loop.add_reader(a, make(a))
        loop.add_reader(c, make(c))
        b.send(b"x")
        d.send(b"x")
        loop.stop()
        loop.run_forever()
        # Both fds were ready in one poll, but the second callback had been
        # replaced (its handle cancelled) before its turn came.
        assert calls == ["first"]
        loop.remove_reader(a)
        loop.remove_reader(c)
    finally:
        c.close()
        d.close()


def test_reader_removed_by_earlier_callback_in_same_batch_is_skipped(loop, socketpair):
    """If one ready fd's callback removes another ready fd's reader, that one does not run."""
    a, b = socketpair
    c, d = socket.socketpair()
    try:
        calls = []

        def cb(me, other):
            calls.append(me)
            loop.remove_reader(other)

        loop.add_reader(a, cb, "a", c)
        loop.add_reader(c, cb, "c", a)
        b.send(b"x")
        d.send(b"x")
        # Give both events time to be pending before the single poll.
        loop.stop()
        loop.run_forever()
        assert len(calls) == 1
        loop.remove_reader(a)
        loop.remove_reader(c)
    finally:
        c.close()
        d.close()


def test_reader_and_writer_on_same_fd(loop, socketpair, run_for):
    """A reader and a writer on one fd both fire; removing one keeps the other."""
    a, b = socketpair
    reads, writes = [], []
    loop.add_reader(a, reads.append, 1)
    loop.add_writer(a, writes.append, 1)
    b.send(b"x")
    run_for(loop, 0.005)
    assert reads and writes
    assert loop.remove_reader(a) is True
    r0, w0 = len(reads), len(writes)
    run_for(loop, 0.005)
    assert len(reads) == r0
    assert len(writes) > w0
    assert loop.remove_writer(a) is True
    loop.add_reader(a, reads.append, 1)
    w1 = len(writes)
    run_for(loop, 0.005)
    assert len(reads) > r0
    assert len(writes) == w1
    assert loop.remove_reader(a) is True


def test_reader_on_pipe_and_writer_on_its_other_end(loop, pipe):
    """Writer on a pipe's write end feeds a reader on its read end."""
    r, w = pipe
    got = []

    def on_writable():
        os.write(w, b"ping")
        loop.remove_writer(w)

    def on_readable():
        got.append(os.read(r, 100))
        loop.stop()

    loop.add_reader(r, on_readable)
    loop.add_writer(w, on_writable)
    loop.run_forever()
    assert got == [b"ping"]
    assert loop.remove_reader(r) is True
    assert loop.remove_writer(w) is False


def test_add_reader_negative_fd_raises(loop):
    """add_reader(-1) raises ValueError('Invalid file descriptor: -1')."""
    with pytest.raises(ValueError, match=r"^Invalid file descriptor: -1$"):
        loop.add_reader(-1, lambda: None)
    with pytest.raises(ValueError, match=r"^Invalid file descriptor: -1$"):
        loop.add_writer(-1, lambda: None)


def test_add_reader_closed_fd_raises_oserror(loop):
    """add_reader on a closed fd raises OSError(EBADF) and registers nothing."""
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(OSError) as ei:
        loop.add_reader(r, lambda: None)
    assert ei.value.errno == 9
    assert loop.remove_reader(r) is False
    with pytest.raises(OSError):
        loop.add_writer(w, lambda: None)
    assert loop.remove_writer(w) is False


def test_add_reader_huge_fd_raises_oserror(loop):
    """add_reader on an fd number that was never open raises OSError."""
    with pytest.raises(OSError):
        loop.add_reader(10 ** 6, lambda: None)
    assert loop.remove_reader(10 ** 6) is False


@pytest.mark.parametrize("bad", ["x", 1.5, None, object(), b"3"])
def test_add_reader_non_fd_raises_valueerror(loop, bad):
    """A non-int object without fileno() -> ValueError('Invalid file object: ...')."""
    with pytest.raises(ValueError, match=r"^Invalid file object: "):
        loop.add_reader(bad, lambda: None)
    with pytest.raises(ValueError, match=r"^Invalid file object: "):
        loop.add_writer(bad, lambda: None)


def test_add_reader_on_a_regular_file(loop, loop_kind):
    """epoll refuses regular files: add_reader raises PermissionError (EPERM),
    as asyncio's EpollSelector does.  kqueue takes them (as asyncio's
    KqueueSelector on macOS and the BSDs): readable while the file's offset
    is short of its end, so the reader is called."""
    kqueue = loop_kind == "minloop" and import_minloop().poller_backend_name() == "kqueue"
    with tempfile.TemporaryFile() as f:
        f.write(b"data")
        f.flush()
        f.seek(0)
        if not kqueue:
            with pytest.raises(PermissionError):
                loop.add_reader(f.fileno(), lambda: None)
            assert loop.remove_reader(f.fileno()) is False
            return
        called = []
        loop.add_reader(f.fileno(), lambda: (called.append(True), loop.stop()))
        loop.call_later(5, loop.stop)
        loop.run_forever()
        assert called, "the regular file's reader was not called"
        assert loop.remove_reader(f.fileno()) is True


def test_remove_after_fd_closed_does_not_crash(loop, run_briefly):
    """Closing a registered fd, running the loop, then remove_reader is safe."""
    r, w = os.pipe()
    calls = []
    loop.add_reader(r, calls.append, 1)
    loop.add_writer(w, calls.append, 2)
    os.close(r)
    os.close(w)
    run_briefly(loop, 3)
    # epoll forgot the closed fds: no callback fires.
    assert calls == []
    assert loop.remove_reader(r) is True
    assert loop.remove_writer(w) is True
    assert loop.remove_reader(r) is False
    run_briefly(loop)


def test_remove_after_close_with_dup_alive(loop, run_briefly):
    """epoll fact: closing an fd whose file is still open via dup() keeps the kernel
    registration alive.  After remove_reader the callback must never run again,
    even though the kernel may keep reporting the old fd number."""
    r, w = os.pipe()
    r2 = os.dup(r)
    try:
        calls = []
        loop.add_reader(r, calls.append, 1)
        os.write(w, b"x")
        os.close(r)
        run_briefly(loop)
        assert loop.remove_reader(r) is True
        n = len(calls)
        run_briefly(loop, 3)
        assert len(calls) == n
        assert loop.remove_reader(r) is False
    finally:
        os.close(r2)
        os.close(w)
    run_briefly(loop)


def test_fd_number_reused_after_remove(loop, run_briefly):
    """After remove + close, the same fd number can be registered again and works."""
    r, w = os.pipe()
    loop.add_reader(r, lambda: None)
    assert loop.remove_reader(r) is True
    os.close(r)
    os.close(w)
    r2, w2 = os.pipe()
    try:
        got = []

        def on_readable():
            got.append(os.read(r2, 10))
            loop.stop()

        loop.add_reader(r2, on_readable)
        os.write(w2, b"z")
        loop.run_forever()
        assert got == [b"z"]
        assert loop.remove_reader(r2) is True
    finally:
        os.close(r2)
        os.close(w2)


def test_reader_callback_exception_goes_to_handler(loop, socketpair):
    """An exception in a reader callback reaches the exception handler, loop keeps going."""
    a, b = socketpair
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    def bad():
        a.recv(10)
        loop.stop()
        raise ZeroDivisionError

    loop.add_reader(a, bad)
    b.send(b"x")
    loop.run_forever()
    loop.remove_reader(a)
    assert len(contexts) == 1
    assert isinstance(contexts[0]["exception"], ZeroDivisionError)
    assert contexts[0]["message"].startswith("Exception in callback ")


def test_many_fds(loop):
    """200 socketpairs with readers: each fires exactly once for its one message."""
    pairs = [socket.socketpair() for _ in range(200)]
    try:
        seen = set()

        def on_readable(i, s):
            assert s.recv(10) == b"%d" % i
            seen.add(i)
            if len(seen) == len(pairs):
                loop.stop()

        for i, (x, y) in enumerate(pairs):
            x.setblocking(False)
            loop.add_reader(x, on_readable, i, x)
            y.send(b"%d" % i)
        loop.call_later(5, loop.stop)
        loop.run_forever()
        assert seen == set(range(len(pairs)))
        for x, _ in pairs:
            assert loop.remove_reader(x) is True
    finally:
        for x, y in pairs:
            x.close()
            y.close()


def test_reader_wakes_loop_blocked_in_long_timeout(loop, socketpair):
    """Data arriving while the loop waits for a far timer wakes it promptly."""
    import threading
    import time
    a, b = socketpair
    far = loop.call_later(30, loop.stop)
    got = []

    def on_readable():
        got.append(a.recv(10))
        loop.stop()

    loop.add_reader(a, on_readable)
    t = threading.Timer(0.02, b.send, (b"wake",))
    t.start()
    t0 = time.monotonic()
    loop.run_forever()
    t.join()
    far.cancel()
    assert got == [b"wake"]
    assert time.monotonic() - t0 < 2.0
    loop.remove_reader(a)
