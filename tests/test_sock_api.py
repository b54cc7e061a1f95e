"""The loop's sock_* coroutines on real sockets, on both loops: data arrives
intact, EAGAIN waits on the fd, cancellation unregisters it, and asyncio's
errors for blocking sockets in debug mode.  Also what minloop's compiled
versions must not change: no yield when the syscall succeeds, the socket's
own errors, sockets with a timeout and subclasses going through their
methods, every kind of buffer, replaced readers and transport-owned fds."""

import asyncio
import inspect
import os
import socket
import sys

import pytest

needs_311 = pytest.mark.skipif(sys.version_info < (3, 11),
                               reason="sock_recvfrom/sock_sendto are new in 3.11")


def tcp_pair():
    listener = socket.create_server(('127.0.0.1', 0))
    listener.setblocking(False)
    client = socket.socket()
    client.setblocking(False)
    return listener, client


def test_connect_accept_sendall_recv_roundtrip(loop):
    async def main():
        listener, client = tcp_pair()
        with listener, client:
            await loop.sock_connect(client, listener.getsockname())
            conn, addr = await loop.sock_accept(listener)
            with conn:
                assert conn.gettimeout() == 0   # accepted sockets are non-blocking
                assert addr == client.getsockname()
                payload = bytes(range(256)) * 8192          # 2 MiB: EAGAIN on send
                send = asyncio.ensure_future(loop.sock_sendall(client, payload))
                got = bytearray()
                while len(got) < len(payload):
                    chunk = await loop.sock_recv(conn, 65536)
                    assert chunk
                    got += chunk
                await send
                assert bytes(got) == payload
                client.shutdown(socket.SHUT_WR)
                assert await loop.sock_recv(conn, 10) == b''
    loop.run_until_complete(main())


def test_recv_into(loop):
    async def main():
        a, b = socket.socketpair()
        with a, b:
            a.setblocking(False)
            b.setblocking(False)
            buf = bytearray(10)
            reader = asyncio.ensure_future(loop.sock_recv_into(a, buf))
            await asyncio.sleep(0)
            assert not reader.done()        # waiting on the fd
            await loop.sock_sendall(b, b'hello')
            assert await reader == 5
            assert bytes(buf[:5]) == b'hello'
    loop.run_until_complete(main())


def test_cancelled_recv_unregisters_the_reader(loop):
    async def main():
        a, b = socket.socketpair()
        with a, b:
            a.setblocking(False)
            task = asyncio.ensure_future(loop.sock_recv(a, 10))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.sleep(0)
            # The fd is free again: a plain reader can take it.
            assert loop.remove_reader(a.fileno()) is False
    loop.run_until_complete(main())


@pytest.mark.libkqueue_differs("socket error")
def test_connect_refused(loop):
    async def main():
        probe = socket.socket()
        probe.bind(('127.0.0.1', 0))
        address = probe.getsockname()
        probe.close()                      # nothing listens there now
        client = socket.socket()
        client.setblocking(False)
        with client:
            with pytest.raises(ConnectionRefusedError):
                await loop.sock_connect(client, address)
    loop.run_until_complete(main())


@pytest.mark.parametrize('op', ['sock_recv', 'sock_sendall', 'sock_connect', 'sock_accept'])
def test_blocking_socket_rejected_in_debug_mode(loop, op):
    loop.set_debug(True)
    sock = socket.socket()
    with sock:
        args = {'sock_recv': (sock, 1), 'sock_sendall': (sock, b'x'),
                'sock_connect': (sock, ('127.0.0.1', 1)), 'sock_accept': (sock,)}[op]
        with pytest.raises(ValueError, match='the socket must be non-blocking'):
            loop.run_until_complete(getattr(loop, op)(*args))


@needs_311
def test_udp_sendto_recvfrom(loop):
    async def main():
        a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with a, b:
            for s in (a, b):
                s.bind(('127.0.0.1', 0))
                s.setblocking(False)
            receiving = asyncio.ensure_future(loop.sock_recvfrom(b, 100))
            await asyncio.sleep(0)
            assert await loop.sock_sendto(a, b'ping', b.getsockname()) == 4
            data, addr = await receiving
            assert (data, addr) == (b'ping', a.getsockname())
            buf = bytearray(100)
            await loop.sock_sendto(a, b'pong', b.getsockname())
            nbytes, addr = await loop.sock_recvfrom_into(b, buf)
            assert (bytes(buf[:nbytes]), addr) == (b'pong', a.getsockname())
    loop.run_until_complete(main())


# ----------------------------------------------------------------------
# The fast path: no trip through the loop when the syscall succeeds

def test_recv_with_data_ready_does_not_yield(loop, socketpair):
    a, b = socketpair
    ran = []

    async def main():
        b.send(b'ready')
        loop.call_soon(ran.append, 'callback')
        data = await loop.sock_recv(a, 100)
        # Had the coroutine yielded to the loop, the callback would have run.
        return data, list(ran)
    assert loop.run_until_complete(main()) == (b'ready', [])


def test_sendall_that_fits_does_not_yield(loop, socketpair):
    a, b = socketpair
    ran = []

    async def main():
        loop.call_soon(ran.append, 'callback')
        result = await loop.sock_sendall(a, b'x' * 1000)
        return result, list(ran)
    assert loop.run_until_complete(main()) == (None, [])
    assert b.recv(2000) == b'x' * 1000


def test_blocked_recv_leaves_no_reader_behind(loop, socketpair):
    a, b = socketpair

    async def main():
        task = asyncio.ensure_future(loop.sock_recv(a, 100))
        await asyncio.sleep(0)
        assert not task.done()
        b.send(b'late')
        assert await task == b'late'
        # The reader is gone by the time the awaiting code runs.
        assert loop.remove_reader(a.fileno()) is False
    loop.run_until_complete(main())


def test_sock_methods_return_coroutines(loop, socketpair):
    a, b = socketpair
    coro = loop.sock_recv(a, 1)
    try:
        assert asyncio.iscoroutine(coro)
    finally:
        coro.close()
    # inspect's check: asyncio.iscoroutinefunction() is deprecated from 3.14.
    assert inspect.iscoroutinefunction(loop.sock_recv)
    assert inspect.iscoroutinefunction(loop.sock_sendall)


def test_recv_zero_bytes(loop, socketpair):
    a, b = socketpair
    b.send(b'abc')
    assert loop.run_until_complete(loop.sock_recv(a, 0)) == b''
    assert a.recv(10) == b'abc'


# 256 KiB is where minloop stops receiving through the loop's read buffer.
@pytest.mark.parametrize('size', [1, 100, 65536, 262_144, 262_145, 300_000])
def test_recv_sizes(loop, socketpair, size):
    a, b = socketpair
    payload = bytes(range(256)) * (size // 256 + 1)

    async def main():
        b.send(payload[:size])
        got = await loop.sock_recv(a, size)
        assert payload[:size].startswith(got) and got
    loop.run_until_complete(main())


# ----------------------------------------------------------------------
# Errors: the socket's own, unchanged

def test_recv_on_closed_socket(loop):
    a, b = socket.socketpair()
    a.setblocking(False)
    a.close()
    b.close()
    with pytest.raises(OSError) as info:
        loop.run_until_complete(loop.sock_recv(a, 10))
    assert info.value.errno == 9   # EBADF, as a.recv() raises


@pytest.mark.parametrize('n, exc, match', [
    (-1, ValueError, 'negative buffersize in recv'),
    ('10', TypeError, None),
    (2 ** 70, OverflowError, None),
])
def test_recv_bad_size(loop, socketpair, n, exc, match):
    a, b = socketpair
    b.send(b'data')
    with pytest.raises(exc, match=match):
        loop.run_until_complete(loop.sock_recv(a, n))
    assert a.recv(10) == b'data'   # nothing consumed


def test_recv_into_read_only_buffer(loop, socketpair):
    a, b = socketpair
    b.send(b'data')
    with pytest.raises(TypeError):
        loop.run_until_complete(loop.sock_recv_into(a, b'immutable'))


def test_recv_into_memoryview_slice(loop, socketpair):
    a, b = socketpair
    buf = bytearray(b'.' * 10)

    async def main():
        b.send(b'abc')
        with memoryview(buf) as view:
            n = await loop.sock_recv_into(a, view[4:6])
        assert n == 2
        assert buf == b'....ab....'
        task = asyncio.ensure_future(loop.sock_recv_into(a, buf))
        await asyncio.sleep(0)
        assert await task == 1       # the 'c' left over, without waiting
        assert buf[:1] == b'c'
        task = asyncio.ensure_future(loop.sock_recv_into(a, buf))
        await asyncio.sleep(0)
        assert not task.done()
        b.send(b'xyz')
        assert await task == 3
        assert buf[:3] == b'xyz'
    loop.run_until_complete(main())


def test_recv_peer_closed_gives_eof(loop, socketpair):
    a, b = socketpair

    async def main():
        task = asyncio.ensure_future(loop.sock_recv(a, 10))
        await asyncio.sleep(0)
        b.close()
        assert await task == b''
    loop.run_until_complete(main())


def test_sendall_to_closed_peer(loop, socketpair):
    a, b = socketpair
    b.close()
    with pytest.raises(BrokenPipeError):
        loop.run_until_complete(loop.sock_sendall(a, b'x'))


def test_sendall_peer_closes_while_waiting(loop, socketpair):
    a, b = socketpair

    async def main():
        task = asyncio.ensure_future(loop.sock_sendall(a, b'x' * 10_000_000))
        await asyncio.sleep(0.01)
        assert not task.done()
        b.close()
        with pytest.raises((BrokenPipeError, ConnectionResetError)):
            await task
        assert loop.remove_writer(a.fileno()) is False
    loop.run_until_complete(main())


def test_ssl_socket_rejected(loop):
    ssl = pytest.importorskip('ssl')
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    with ctx.wrap_socket(socket.socket(), do_handshake_on_connect=False) as sock:
        sock.setblocking(False)
        for coro in (loop.sock_recv(sock, 1), loop.sock_sendall(sock, b'x'),
                     loop.sock_recv_into(sock, bytearray(1)),
                     loop.sock_accept(sock),
                     loop.sock_connect(sock, ('127.0.0.1', 1))):
            with pytest.raises(TypeError, match='Socket cannot be of type SSLSocket'):
                loop.run_until_complete(coro)


@pytest.mark.parametrize('op', ['sock_recv', 'sock_recv_into', 'sock_sendall',
                                'sock_connect', 'sock_accept', 'sock_recvfrom',
                                'sock_recvfrom_into', 'sock_sendto'])
def test_socket_with_timeout_rejected_in_debug_mode(loop, op):
    if not hasattr(loop, op):
        pytest.skip(f'{op} is new in 3.11')
    loop.set_debug(True)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        args = {'sock_recv': (1,), 'sock_recv_into': (bytearray(1),),
                'sock_sendall': (b'x',), 'sock_connect': (('127.0.0.1', 1),),
                'sock_accept': (), 'sock_recvfrom': (1,),
                'sock_recvfrom_into': (bytearray(1),),
                'sock_sendto': (b'x', ('127.0.0.1', 1))}[op]
        with pytest.raises(ValueError, match='the socket must be non-blocking'):
            loop.run_until_complete(getattr(loop, op)(sock, *args))


def test_socket_with_timeout_works_outside_debug_mode(loop, socketpair):
    # asyncio only checks in debug mode; otherwise the socket's methods run,
    # honouring its timeout.
    a, b = socketpair
    a.settimeout(5)
    b.send(b'hi')
    assert loop.run_until_complete(loop.sock_recv(a, 10)) == b'hi'
    loop.run_until_complete(loop.sock_sendall(a, b'back'))
    assert b.recv(10) == b'back'
    a.settimeout(0.01)
    with pytest.raises(TimeoutError):
        loop.run_until_complete(loop.sock_recv(a, 10))


def test_socket_subclass_methods_are_used(loop, socketpair):
    calls = []

    class Traced(socket.socket):
        def recv(self, n, *args):
            calls.append(('recv', n))
            return super().recv(n, *args)

        def send(self, data, *args):
            calls.append(('send', len(data)))
            return super().send(data, *args)

    a, b = socketpair
    traced = Traced(fileno=os.dup(a.fileno()))
    with traced:
        traced.setblocking(False)

        async def main():
            await loop.sock_sendall(traced, b'abc')
            task = asyncio.ensure_future(loop.sock_recv(traced, 7))
            await asyncio.sleep(0)
            b.send(b'xyz')
            return await task
        assert loop.run_until_complete(main()) == b'xyz'
    assert calls == [('send', 3), ('recv', 7), ('recv', 7)]
    assert b.recv(10) == b'abc'


# ----------------------------------------------------------------------
# sock_sendall: partial sends, buffers

@pytest.mark.parametrize('kind', ['bytes', 'bytearray', 'memoryview'])
def test_sendall_buffer_kinds_that_block(loop, socketpair, kind):
    a, b = socketpair
    raw = bytes(range(256)) * 20_000       # 5 MB: several waits
    data = {'bytes': raw, 'bytearray': bytearray(raw),
            'memoryview': memoryview(raw)}[kind]

    async def main():
        send = asyncio.ensure_future(loop.sock_sendall(a, data))
        got = bytearray()
        while len(got) < len(raw):
            got += await loop.sock_recv(b, 1 << 20)
        assert await send is None
        assert got == raw
    loop.run_until_complete(main())


def test_sendall_holds_a_bytearray_export_while_waiting(loop, socketpair):
    a, b = socketpair
    data = bytearray(10_000_000)

    async def main():
        send = asyncio.ensure_future(loop.sock_sendall(a, data))
        await asyncio.sleep(0)
        assert not send.done()
        with pytest.raises(BufferError):
            data.extend(b'more')          # asyncio holds memoryview(data)
        send.cancel()
        with pytest.raises(asyncio.CancelledError):
            await send
        await asyncio.sleep(0)
        assert loop.remove_writer(a.fileno()) is False
    loop.run_until_complete(main())
    data.extend(b'more')   # released


def test_sendall_memoryview_of_words(loop, socketpair):
    # A 1-byte-per-item view only: asyncio counts len(data) in items.
    import array
    a, b = socketpair
    data = memoryview(array.array('B', b'bytes in an array'))
    loop.run_until_complete(loop.sock_sendall(a, data))
    assert b.recv(100) == b'bytes in an array'


def test_sendall_empty(loop, socketpair):
    a, b = socketpair
    assert loop.run_until_complete(loop.sock_sendall(a, b'')) is None


# ----------------------------------------------------------------------
# Cancellation and replaced readers/writers

def test_cancelled_sendall_unregisters_the_writer(loop, socketpair):
    a, b = socketpair
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)

    async def main():
        task = asyncio.ensure_future(loop.sock_sendall(a, b'x' * 1_000_000))
        await asyncio.sleep(0)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)
        assert loop.remove_writer(a.fileno()) is False
    loop.run_until_complete(main())


def test_cancelled_accept_unregisters_the_reader(loop):
    listener = socket.create_server(('127.0.0.1', 0))
    listener.setblocking(False)
    with listener:
        async def main():
            task = asyncio.ensure_future(loop.sock_accept(listener))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.sleep(0)
            assert loop.remove_reader(listener.fileno()) is False
        loop.run_until_complete(main())


def test_cancel_with_data_ready_leaves_the_data(loop, socketpair):
    a, b = socketpair

    async def main():
        task = asyncio.ensure_future(loop.sock_recv(a, 100))
        await asyncio.sleep(0)
        b.send(b'unread')
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    loop.run_until_complete(main())
    assert a.recv(100) == b'unread'


def test_reader_replaced_while_recv_waits(loop, socketpair):
    # add_reader() on the fd replaces the pending operation's reader (which
    # then never completes); cancelling the operation leaves the new one.
    a, b = socketpair
    seen = []

    async def main():
        task = asyncio.ensure_future(loop.sock_recv(a, 100))
        await asyncio.sleep(0)
        loop.add_reader(a.fileno(), lambda: seen.append(a.recv(100)))
        b.send(b'for the reader')
        for _ in range(10):
            await asyncio.sleep(0)
            if seen:
                break
        assert seen == [b'for the reader']
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)
        assert loop.remove_reader(a.fileno()) is True
    loop.run_until_complete(main())


def test_sock_op_on_closed_loop(loop, socketpair):
    a, b = socketpair
    loop.close()
    coro = loop.sock_recv(a, 10)
    # The syscall comes first; registering the reader finds the loop closed.
    with pytest.raises(RuntimeError, match='Event loop is closed'):
        coro.send(None)


# ----------------------------------------------------------------------
# connect and accept

def test_connect_resolves_names(loop):
    async def main():
        listener, client = tcp_pair()
        with listener, client:
            port = listener.getsockname()[1]
            await loop.sock_connect(client, ('localhost', port))
            conn, addr = await loop.sock_accept(listener)
            conn.close()
            assert addr == client.getsockname()
    loop.run_until_complete(main())


def test_connect_bad_address(loop):
    async def main():
        with socket.socket() as client:
            client.setblocking(False)
            with pytest.raises((TypeError, ValueError)):
                await loop.sock_connect(client, 'not a tuple')
    loop.run_until_complete(main())


def test_unix_connect_and_accept(loop, tmp_path):
    path = str(tmp_path / 'sock')

    async def main():
        with socket.socket(socket.AF_UNIX) as listener, \
                socket.socket(socket.AF_UNIX) as client:
            listener.bind(path)
            listener.listen()
            listener.setblocking(False)
            client.setblocking(False)
            accepting = asyncio.ensure_future(loop.sock_accept(listener))
            await asyncio.sleep(0)
            assert not accepting.done()
            await loop.sock_connect(client, path)
            conn, _ = await accepting
            with conn:
                assert conn.gettimeout() == 0
                await loop.sock_sendall(client, b'over unix')
                assert await loop.sock_recv(conn, 100) == b'over unix'
    loop.run_until_complete(main())


def test_accept_returns_a_tuple(loop):
    async def main():
        listener, client = tcp_pair()
        with listener, client:
            await loop.sock_connect(client, listener.getsockname())
            await asyncio.sleep(0.01)
            result = await loop.sock_accept(listener)   # ready: no wait
            assert type(result) is tuple and len(result) == 2
            result[0].close()
    loop.run_until_complete(main())


@needs_311
def test_udp_blocked_recvfrom_into_with_nbytes(loop):
    async def main():
        a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with a, b:
            for s in (a, b):
                s.bind(('127.0.0.1', 0))
                s.setblocking(False)
            buf = bytearray(10)
            task = asyncio.ensure_future(loop.sock_recvfrom_into(b, buf, 4))
            await asyncio.sleep(0)
            assert not task.done()
            await loop.sock_sendto(a, b'truncated', b.getsockname())
            nbytes, addr = await task
            assert (nbytes, bytes(buf[:4]), addr) == (4, b'trun', a.getsockname())
            assert loop.remove_reader(b.fileno()) is False
    loop.run_until_complete(main())


def test_fd_of_a_closing_transport_may_be_waited_on(loop):
    # asyncio's check passes for a transport that is closing: the wait goes
    # on (and ends when the data comes).
    async def main():
        listener, client = tcp_pair()
        with listener, client:
            await loop.sock_connect(client, listener.getsockname())
            conn, _ = await loop.sock_accept(listener)
            with conn:
                transport, _ = await loop.create_connection(
                    asyncio.Protocol, sock=client)
                transport.close()
                assert transport.is_closing()
                listener2, a = tcp_pair()
                with listener2, a:
                    await loop.sock_connect(a, listener2.getsockname())
                    b, _ = await loop.sock_accept(listener2)
                    with b:
                        task = asyncio.ensure_future(loop.sock_recv(b, 10))
                        await asyncio.sleep(0)
                        assert not task.done()
                        await loop.sock_sendall(a, b'x')
                        assert await task == b'x'
                await asyncio.sleep(0)
    loop.run_until_complete(main())


def test_an_overridden_transport_check_is_called_when_waiting(loop_factory):
    # The check is the loop's method: a subclass that replaces it is asked
    # (minloop answers the common case itself only for asyncio's own).
    lp = loop_factory()
    asked = []

    class Checking(type(lp)):
        def _ensure_fd_no_transport(self, fd):
            asked.append(fd)
            return super()._ensure_fd_no_transport(fd)

    lp.close()
    lp = Checking()
    try:
        async def main():
            listener, client = tcp_pair()
            with listener, client:
                await lp.sock_connect(client, listener.getsockname())
                conn, _ = await lp.sock_accept(listener)
                with conn:
                    asked.clear()
                    task = asyncio.ensure_future(lp.sock_recv(conn, 10))
                    await asyncio.sleep(0)
                    assert asked == [conn.fileno()]
                    await lp.sock_sendall(client, b'y')
                    assert await task == b'y'
        lp.run_until_complete(main())
    finally:
        lp.close()


def test_fd_owned_by_a_transport_is_refused_when_waiting(loop):
    # asyncio checks only once the operation has to wait for the fd.
    async def main():
        listener, client = tcp_pair()
        with listener, client:
            await loop.sock_connect(client, listener.getsockname())
            conn, _ = await loop.sock_accept(listener)
            with conn:
                transport, _ = await loop.create_connection(
                    asyncio.Protocol, sock=client)
                try:
                    with pytest.raises(RuntimeError, match='is used by transport'):
                        await loop.sock_recv(client, 10)
                    with pytest.raises(RuntimeError, match='is used by transport'):
                        await loop.sock_recv_into(client, bytearray(10))
                finally:
                    transport.close()
                    await asyncio.sleep(0)
    loop.run_until_complete(main())


# ----------------------------------------------------------------------
# What the socket says now, not what it said before: minloop reads a plain
# socket's fd and timeout from the object, and remembers which loop classes
# keep asyncio's transport check; each must follow a change at once.

def test_timeout_set_after_a_wait_is_honoured(loop, socketpair):
    a, b = socketpair

    async def main():
        task = asyncio.ensure_future(loop.sock_recv(a, 10))
        await asyncio.sleep(0)
        b.send(b'one')
        assert await task == b'one'
        # Now a socket with a timeout: its own recv() waits and times out
        # (a non-blocking recv would wait on the loop for ever).
        a.settimeout(0.01)
        with pytest.raises(TimeoutError):
            await loop.sock_recv(a, 10)
        a.settimeout(0.0)
        b.send(b'two')
        assert await loop.sock_recv(a, 10) == b'two'
    loop.run_until_complete(main())


def test_blocking_again_is_rejected_in_debug_mode(loop, socketpair):
    a, b = socketpair
    loop.set_debug(True)
    b.send(b'x')
    assert loop.run_until_complete(loop.sock_recv(a, 10)) == b'x'
    a.setblocking(True)
    with pytest.raises(ValueError, match='the socket must be non-blocking'):
        loop.run_until_complete(loop.sock_recv(a, 10))
    with pytest.raises(ValueError, match='the socket must be non-blocking'):
        loop.run_until_complete(loop.sock_sendall(a, b'y'))


def test_detached_socket_fails_as_its_methods_do(loop, socketpair):
    a, b = socketpair
    b.send(b'x')
    assert loop.run_until_complete(loop.sock_recv(a, 10)) == b'x'
    fd = a.detach()
    try:
        b.send(b'left')
        for op, args in (('sock_recv', (10,)), ('sock_recv_into', (bytearray(4),)),
                         ('sock_sendall', (b'x',))):
            with pytest.raises(OSError) as info:
                loop.run_until_complete(getattr(loop, op)(a, *args))
            assert info.value.errno == 9, op   # EBADF, as a.recv() raises
        assert os.read(fd, 10) == b'left'      # the file was not touched
    finally:
        os.close(fd)


def test_socket_closed_while_recv_waits(loop, socketpair):
    # asyncio's reader stays on the old fd number until the operation ends;
    # closing the socket under it is the caller's business.  The wait ends
    # with the socket's own error once the fd is reported.
    a, b = socketpair

    async def main():
        task = asyncio.ensure_future(loop.sock_recv(a, 10))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        a.close()
        with pytest.raises(OSError) as info:
            await loop.sock_recv(a, 10)
        assert info.value.errno == 9
    loop.run_until_complete(main())


def test_transport_check_patched_onto_the_class_later_is_called(loop_factory):
    # A class that kept asyncio's check, then replaced it: the new one is
    # asked from the next wait on.
    base = loop_factory()
    base.close()
    asked = []

    class Patched(type(base)):
        pass

    lp = Patched()
    try:
        async def main():
            a, b = socket.socketpair()
            with a, b:
                a.setblocking(False)
                b.setblocking(False)
                for n in range(3):
                    if n == 2:
                        def check(self, fd):
                            asked.append(fd)
                        Patched._ensure_fd_no_transport = check
                    task = asyncio.ensure_future(lp.sock_recv(a, 10))
                    await asyncio.sleep(0)
                    b.send(b'%d' % n)
                    assert await task == b'%d' % n
                # (asyncio asks again as it removes its reader)
                assert asked and set(asked) == {a.fileno()}
        lp.run_until_complete(main())
    finally:
        lp.close()


def test_datagram_truncated_to_the_size_asked(loop):
    # recv(n) of a datagram keeps n bytes and drops the rest, as the
    # socket's own recv() does (minloop receives through a larger buffer).
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        a.setblocking(False)

        async def main():
            b.send(b'0123456789')
            b.send(b'abc')
            assert await loop.sock_recv(a, 4) == b'0123'
            assert await loop.sock_recv(a, 4) == b'abc'
            task = asyncio.ensure_future(loop.sock_recv(a, 2))
            await asyncio.sleep(0)
            b.send(b'xyz')
            assert await task == b'xy'
        loop.run_until_complete(main())


def test_sock_recv_beside_a_transport_reading_on_the_same_loop(loop):
    # minloop's sock_recv and its transports receive through one buffer:
    # each must get its own bytes, however their reads interleave.
    class Collect(asyncio.Protocol):
        def __init__(self):
            self.data = bytearray()

        def data_received(self, data):
            self.data += data

    async def main():
        t1, t2 = socket.socketpair()
        s1, s2 = socket.socketpair()
        with t2, s1, s2:
            s1.setblocking(False)
            transport, proto = await loop.connect_accepted_socket(Collect, t1)
            try:
                for i in range(50):
                    t2.send(bytes([i % 256]) * 1000)
                    task = asyncio.ensure_future(loop.sock_recv(s1, 4096))
                    await asyncio.sleep(0)
                    s2.send(bytes([(i + 1) % 256]) * 700)
                    got = await task
                    assert got == bytes([(i + 1) % 256]) * 700
                for _ in range(100):
                    if len(proto.data) == 50_000:
                        break
                    await asyncio.sleep(0.001)
                assert proto.data == b''.join(bytes([i % 256]) * 1000 for i in range(50))
            finally:
                transport.close()
                await asyncio.sleep(0)
    loop.run_until_complete(main())


def test_recv_of_alternating_sizes(loop, socketpair):
    # minloop receives large reads straight into the result and small ones
    # through its read buffer, switching by the size the last one brought:
    # every switch must keep the bytes and their order.
    a, b = socketpair
    sizes = [40_000, 100, 20_000, 1, 16_385, 16_384, 300, 60_000, 5]
    stream = bytes(range(256)) * (sum(sizes) // 256 + 1)

    async def main():
        pos = 0
        for size in sizes:
            b.send(stream[pos:pos + size])
            got = bytearray()
            while len(got) < size:
                got += await loop.sock_recv(a, 262_144)
            assert bytes(got) == stream[pos:pos + size]
            pos += size
    loop.run_until_complete(main())
