"""minloop-only checks of the compiled sock_* coroutines (sock_ops.pyx):
what asyncio's loop has no way to show.  The fast path creates no future and
touches no poller interest; a blocked operation adds and removes its fd's
interest exactly once; the waiter objects do not outlive the operation."""

import asyncio
import gc
import socket

import pytest

import minloop
from minloop import sock_ops


class CountingLoop(minloop.Loop):
    futures = 0

    def create_future(self):
        self.futures += 1
        return super().create_future()


@pytest.fixture
def loop():
    loop = CountingLoop()
    loop.set_debug(False)
    yield loop
    loop.close()


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def waiters_alive():
    return [o for o in gc.get_objects()
            if type(o).__module__ == 'minloop.sock_ops' and type(o).__name__.endswith('Wait')]


def test_methods_are_the_compiled_ones():
    for name in ('sock_recv', 'sock_recv_into', 'sock_recvfrom', 'sock_recvfrom_into',
                 'sock_sendall', 'sock_sendto', 'sock_connect', 'sock_accept'):
        if hasattr(minloop.Loop, name):
            assert getattr(minloop.Loop, name) is getattr(sock_ops, name)


def test_fast_path_makes_no_future_and_no_poller_change(loop, pair):
    a, b = pair

    async def main():
        changes = loop._poller_changes
        for _ in range(100):
            await loop.sock_sendall(a, b'ping')
            assert await loop.sock_recv(b, 4) == b'ping'
            await loop.sock_sendall(b, bytearray(b'pong'))
            buf = bytearray(4)
            assert await loop.sock_recv_into(a, buf) == 4
        return loop._poller_changes - changes
    assert loop.run_until_complete(main()) == 0
    assert loop.futures == 0


async def _recv_after_waiting(loop, a, b, data):
    """sock_recv(a) made to wait (nothing sent yet), then `data` sent from b:
    what the receive returned."""
    task = asyncio.ensure_future(loop.sock_recv(a, 10))
    await asyncio.sleep(0)
    b.send(data)
    return await task


def test_blocked_recv_arms_interest_once_and_removes_it_for_free(loop, pair):
    """The one-shot registration is disarmed by the kernel when it fires, so
    the operation's end makes no syscall; each later wait re-arms it with
    one change."""
    a, b = pair

    async def main():
        changes = loop._poller_changes
        task = asyncio.ensure_future(loop.sock_recv(a, 10))
        await asyncio.sleep(0)
        assert loop._poller_changes - changes == 1     # the reader
        b.send(b'x')
        assert await task == b'x'
        assert loop._poller_changes - changes == 1
        for i in range(10):
            assert await _recv_after_waiting(loop, a, b, b'y') == b'y'
        return loop._poller_changes - changes
    assert loop.run_until_complete(main()) == 11
    assert loop.futures == 11


def test_waiters_do_not_outlive_their_operation(loop, pair):
    a, b = pair

    async def main():
        for _ in range(20):
            await _recv_after_waiting(loop, a, b, b'x')
        task = asyncio.ensure_future(loop.sock_recv(a, 10))
        await asyncio.sleep(0)
        assert len(waiters_alive()) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        del task
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        await loop.sock_sendall(b, b'y')
        send = asyncio.ensure_future(loop.sock_sendall(a, b'z' * 1_000_000))
        got = 0
        while got < 1_000_000:
            got += len(await loop.sock_recv(b, 1 << 20))
        await send
    gc.disable()    # they must go by reference counting alone
    try:
        loop.run_until_complete(main())
        assert waiters_alive() == []
    finally:
        gc.enable()


def test_abandoned_pending_operation_is_collectable(loop, pair):
    a, b = pair
    task = loop.create_task(loop.sock_recv(a, 10))
    loop.run_until_complete(asyncio.sleep(0))
    assert not task.done()
    task.cancel()
    loop.run_until_complete(asyncio.sleep(0))
    del task
    gc.collect()
    assert waiters_alive() == []
    assert loop.remove_reader(a.fileno()) is False


def test_debug_repr_names_the_operation(loop, pair):
    a, b = pair
    loop.set_debug(True)

    async def main():
        task = asyncio.ensure_future(loop.sock_recv(a, 10))
        await asyncio.sleep(0)
        (waiter,) = waiters_alive()
        assert repr(waiter).startswith('<RecvWait fd=')
        b.send(b'x')
        await task
    loop.run_until_complete(main())


# ----------------------------------------------------------------------
# One-shot interest (see "The fd table and the kernel" in src/fd_table.h).  Each
# test drives one transition of an fd's kernel state and checks both the
# table's view (loop._fd_state) and, on Linux, the kernel's own
# (/proc/self/fdinfo of the epoll fd).

import os
import sys

READ, WRITE, ONESHOT = 1, 2, 4
DISARMED = ONESHOT
# The kernel's view is epoll's: a kqueue build (macOS, or Linux over
# libkqueue) is checked through the table alone.
LINUX = (sys.platform.startswith('linux') and os.path.isdir('/proc/self/fdinfo')
         and minloop.loop.poller_backend_name() == 'epoll')
EPOLLIN, EPOLLOUT, EPOLLONESHOT = 0x1, 0x4, 1 << 30


def kernel_events(loop, fd):
    """The epoll event masks registered under fd number `fd` (one per file:
    a closed file's registration may linger beside a new one's)."""
    with open(f'/proc/self/fdinfo/{loop._poller_fd()}') as f:
        return [int(line.split()[3], 16) for line in f
                if line.startswith('tfd:') and int(line.split()[1]) == fd]


def assert_kernel(loop, fd, *expected):
    """Check the kernel's registrations under fd (Linux only): each item of
    `expected` is an armed mask (EPOLLIN...|EPOLLONESHOT) or 'disarmed'."""
    if not LINUX:
        return
    got = []
    for ev in kernel_events(loop, fd):
        if ev & (EPOLLIN | EPOLLOUT) == 0:
            got.append('disarmed')
        else:
            got.append(ev & (EPOLLIN | EPOLLOUT | EPOLLONESHOT))
    assert sorted(map(str, got)) == sorted(map(str, expected))


def socket_at(fd):
    """A new connected socket whose number is `fd` (and its peer)."""
    c, d = socket.socketpair()
    if c.fileno() != fd:      # else the lowest free number was fd already
        os.dup2(c.fileno(), fd)
        c.close()
        c = socket.socket(fileno=fd)
    c.setblocking(False)
    d.setblocking(False)
    return c, d


async def blocked(loop, coro):
    task = asyncio.ensure_future(coro)
    await asyncio.sleep(0)
    assert not task.done()
    return task


def test_oneshot_states_of_a_blocked_recv(loop, pair):
    a, b = pair
    fd = a.fileno()

    async def main():
        task = await blocked(loop, loop.sock_recv(a, 10))
        assert loop._fd_state(fd)[:2] == (READ | ONESHOT, READ)
        assert loop._user_fds == 1
        assert_kernel(loop, fd, EPOLLIN | EPOLLONESHOT)
        b.send(b'x')
        assert await task == b'x'
        # The kernel disarmed it; the table let go of the waiter for free.
        assert loop._fd_state(fd) == (DISARMED, 0, None, None)
        assert loop._user_fds == 0
        assert_kernel(loop, fd, 'disarmed')
        assert loop.remove_reader(a) is False     # as asyncio: nothing left
    loop.run_until_complete(main())


def test_reused_fd_number_after_close_of_a_disarmed_socket(loop, pair):
    a, b = pair
    fd = a.fileno()

    async def main():
        task = await blocked(loop, loop.sock_recv(a, 10))
        b.send(b'x')
        await task
        assert loop._fd_state(fd)[0] == DISARMED
        a.close()                        # the registration goes with the file
        c, d = socket_at(fd)
        with c, d:
            task = await blocked(loop, loop.sock_recv(c, 10))   # MOD: ENOENT -> ADD
            assert_kernel(loop, fd, EPOLLIN | EPOLLONESHOT)
            d.send(b'new')
            assert await asyncio.wait_for(task, 5) == b'new'
    loop.run_until_complete(main())


def test_reused_fd_number_while_the_old_file_lives_on(loop, pair):
    """A dup() keeps the old file open, so its disarmed registration lingers
    under the number: it must stay silent, and the new file under the same
    number gets a registration of its own."""
    a, b = pair
    fd = a.fileno()
    keep = None

    async def main():
        nonlocal keep
        task = await blocked(loop, loop.sock_recv(a, 10))
        b.send(b'x')
        await task
        keep = os.dup(fd)
        a.close()
        c, d = socket_at(fd)
        with c, d:
            b.send(b'old file readable')        # must not wake anything
            task = await blocked(loop, loop.sock_recv(c, 10))
            assert_kernel(loop, fd, 'disarmed', EPOLLIN | EPOLLONESHOT)
            events = loop._fd_events
            await asyncio.sleep(0.05)
            assert loop._fd_events == events
            assert not task.done()
            d.send(b'new')
            assert await asyncio.wait_for(task, 5) == b'new'
    try:
        loop.run_until_complete(main())
    finally:
        if keep is not None:
            os.close(keep)


def test_cancelled_recv_really_removes_its_interest(loop, pair):
    """Not fired yet, the one-shot registration is armed: cancelling the
    operation must delete it, so later data wakes nobody."""
    a, b = pair
    fd = a.fileno()

    async def main():
        task = await blocked(loop, loop.sock_recv(a, 10))
        changes = loop._poller_changes
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert loop._poller_changes == changes + 1    # the DEL
        assert loop._fd_state(fd) == (0, 0, None, None)
        assert_kernel(loop, fd)
        events = loop._fd_events
        b.send(b'x')
        for _ in range(20):
            await asyncio.sleep(0.005)
        assert loop._fd_events == events
        assert a.recv(10) == b'x'        # nobody consumed it
    loop.run_until_complete(main())


def test_add_reader_after_a_oneshot_wait_is_level_triggered(loop, pair):
    a, b = pair
    fd = a.fileno()
    calls = []

    async def main():
        task = await blocked(loop, loop.sock_recv(a, 10))
        b.send(b'x')
        await task
        assert loop._fd_state(fd)[0] == DISARMED
        loop.add_reader(a, calls.append, 1)
        assert loop._fd_state(fd)[:2] == (READ, 0)
        assert_kernel(loop, fd, EPOLLIN)
        b.send(b'y')                     # never consumed: fires every poll
        while len(calls) < 3:
            await asyncio.sleep(0.001)
        assert loop.remove_reader(a) is True
        assert loop._fd_state(fd)[:2] == (0, 0)
        assert_kernel(loop, fd)
    loop.run_until_complete(asyncio.wait_for(main(), 5))


def test_add_reader_replacing_a_pending_oneshot_waiter(loop, pair):
    a, b = pair
    fd = a.fileno()
    calls = []

    async def main():
        task = await blocked(loop, loop.sock_recv(a, 10))
        loop.add_reader(a, calls.append, 1)      # cancels the waiter's handle
        assert loop._fd_state(fd)[:2] == (READ, 0)
        assert_kernel(loop, fd, EPOLLIN)
        b.send(b'y')
        while len(calls) < 3:
            await asyncio.sleep(0.001)
        assert not task.done()
        task.cancel()                   # its removal must spare our reader
        with pytest.raises(asyncio.CancelledError):
            await task
        assert loop._fd_state(fd)[:2] == (READ, 0)
        assert loop.remove_reader(a) is True
    loop.run_until_complete(asyncio.wait_for(main(), 5))


def test_oneshot_wait_beside_a_persistent_writer(loop, pair):
    """With another handle on the fd, the waiter joins its level-triggered
    registration instead: a one-shot one would disarm the writer too."""
    a, b = pair
    fd = a.fileno()
    writes = []

    async def main():
        loop.add_writer(a, writes.append, 1)
        task = await blocked(loop, loop.sock_recv(a, 10))
        assert loop._fd_state(fd)[:2] == (READ | WRITE, READ)
        assert_kernel(loop, fd, EPOLLIN | EPOLLOUT)
        b.send(b'x')
        assert await task == b'x'
        assert loop._fd_state(fd)[:2] == (WRITE, 0)
        assert_kernel(loop, fd, EPOLLOUT)
        n = len(writes)
        while len(writes) < n + 3:       # still level-triggered
            await asyncio.sleep(0.001)
        assert loop.remove_writer(a) is True
        assert loop._fd_state(fd)[:2] == (0, 0)
    loop.run_until_complete(asyncio.wait_for(main(), 5))


def test_two_oneshot_waiters_on_one_fd(loop, pair):
    """A blocked recv and a blocked sendall on one socket share a
    level-triggered registration; when one ends, the other goes one-shot."""
    a, b = pair
    fd = a.fileno()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)

    async def main():
        recv = await blocked(loop, loop.sock_recv(a, 10))
        send = await blocked(loop, loop.sock_sendall(a, b'z' * 1_000_000))
        assert loop._fd_state(fd)[:2] == (READ | WRITE, READ | WRITE)
        assert_kernel(loop, fd, EPOLLIN | EPOLLOUT)
        got = 0
        while got < 1_000_000:
            got += len(await loop.sock_recv(b, 1 << 20))
        await send
        assert loop._fd_state(fd)[:2] == (READ | ONESHOT, READ)
        assert_kernel(loop, fd, EPOLLIN | EPOLLONESHOT)
        b.send(b'x')
        assert await recv == b'x'
        assert loop._fd_state(fd)[:2] == (DISARMED, 0)
    loop.run_until_complete(asyncio.wait_for(main(), 10))


def test_spurious_wakeup_rearms_the_oneshot_waiter(loop, pair):
    """The waiter fires, but the data is gone when it runs: the kernel has
    disarmed its registration, so it must arm it again to wait on."""
    a, b = pair
    fd = a.fileno()
    stolen = []

    async def main():
        task = await blocked(loop, loop.sock_recv(a, 10))
        # Queued before the poll that reports `a`, so it runs first.
        loop.call_soon(lambda: stolen.append(a.recv(10)))
        b.send(b'x')
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert stolen == [b'x']
        assert not task.done()
        assert loop._fd_state(fd)[:2] == (READ | ONESHOT, READ)
        assert_kernel(loop, fd, EPOLLIN | EPOLLONESHOT)
        b.send(b'y')
        assert await asyncio.wait_for(task, 5) == b'y'
    loop.run_until_complete(main())


def test_close_with_armed_and_disarmed_oneshot_registrations(pair):
    a, b = pair
    loop = minloop.Loop()
    try:
        async def main():
            task = await blocked(loop, loop.sock_recv(a, 10))
            b.send(b'x')
            await task
            return await blocked(loop, loop.sock_recv(b, 10))
        pending = loop.run_until_complete(main())
        assert loop._fd_state(a.fileno())[0] == DISARMED
        assert loop._fd_state(b.fileno())[0] == READ | ONESHOT
    finally:
        loop.close()
    assert loop._fd_state(a.fileno()) == (0, 0, None, None)
    assert loop._fd_state(b.fileno()) == (0, 0, None, None)
    assert loop._user_fds == 0
    del pending
    gc.collect()


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs fork()')
@pytest.mark.main_interpreter("fork")
def test_forked_child_rearms_oneshot_waiters_in_its_own_poller(loop, pair):
    """At fork: `a` has a disarmed registration, `b` a pending one-shot
    wait.  The child's new poller gets `b`'s registration back and none for
    `a`; both work in the child, and the parent's poller is untouched."""
    a, b = pair
    c, d = socket.socketpair()
    c.setblocking(False)
    d.setblocking(False)
    to_child_r, to_child_w = os.pipe()

    async def setup():
        task = await blocked(loop, loop.sock_recv(a, 10))
        b.send(b'x')
        await task
        return await blocked(loop, loop.sock_recv(c, 10))

    try:
        pending = loop.run_until_complete(setup())
        parent_kernel = kernel_events(loop, a.fileno()) + kernel_events(loop, c.fileno()) if LINUX else None
        pid = os.fork()
        if pid == 0:    # child
            code = 1
            try:
                import signal
                signal.alarm(10)
                os.read(to_child_r, 1)      # the parent has written to c's peer

                async def child():
                    assert await asyncio.wait_for(pending, 5) == b'to child'
                    assert loop._fd_state(c.fileno())[0] == DISARMED
                    assert loop._fd_state(a.fileno())[0] == 0
                    task = await blocked(loop, loop.sock_recv(a, 10))
                    assert_kernel(loop, a.fileno(), EPOLLIN | EPOLLONESHOT)
                    b.send(b'again')
                    assert await asyncio.wait_for(task, 5) == b'again'
                loop.run_until_complete(child())
                code = 0
            except BaseException:
                import traceback
                traceback.print_exc()
            finally:
                os._exit(code)
        d.send(b'to child')
        os.write(to_child_w, b'x')
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        # The parent's registrations are as they were, and still work.
        if LINUX:
            assert kernel_events(loop, a.fileno()) + kernel_events(loop, c.fileno()) == parent_kernel
        assert not pending.done()
        d.send(b'to parent')
        assert loop.run_until_complete(asyncio.wait_for(pending, 5)) == b'to parent'
    finally:
        for fd in (to_child_r, to_child_w):
            os.close(fd)
        c.close()
        d.close()


def test_socket_fields_are_read_from_the_object():
    # src/socket_object.h: CPython's socket object layout, checked at
    # import.  If this fails, minloop silently fell back to calling
    # fileno() and gettimeout() on every operation.
    assert sock_ops._probe_socket_layout() is True


def test_waits_use_the_core_transport_check_without_asking_the_class(loop, pair):
    # The answer "the class keeps the core's check" is remembered by the
    # class's version tag; a class changed since is asked again (see
    # test_sock_api's test_transport_check_patched_onto_the_class_later).
    a, b = pair

    async def main():
        for n in range(3):
            assert await _recv_after_waiting(loop, a, b, b'x') == b'x'
    loop.run_until_complete(main())
    assert loop.futures == 3
