"""The loop's sock_* coroutines on real sockets, on both loops: data arrives
intact, EAGAIN waits on the fd, cancellation unregisters it, and asyncio's
errors for blocking sockets in debug mode."""

import asyncio
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
