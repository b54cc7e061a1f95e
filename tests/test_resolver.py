"""loop.getaddrinfo / getnameinfo give socket's answers, on both loops."""

import socket

import pytest


CASES = [
    ('127.0.0.1', 80, {}),
    ('127.0.0.1', '8080', {'type': socket.SOCK_STREAM}),
    (b'127.0.0.1', 0, {'family': socket.AF_INET}),
    ('::1', 443, {'family': socket.AF_INET6, 'proto': socket.IPPROTO_TCP}),
    (None, 0, {'flags': socket.AI_PASSIVE, 'type': socket.SOCK_STREAM}),
    ('localhost', 80, {'type': socket.SOCK_STREAM}),     # a name: the executor
]


@pytest.mark.parametrize('host,port,kwargs', CASES)
def test_getaddrinfo_matches_socket(loop, host, port, kwargs):
    expected = socket.getaddrinfo(host, port, **kwargs)
    got = loop.run_until_complete(loop.getaddrinfo(host, port, **kwargs))
    assert got == expected


def test_getaddrinfo_errors_as_socket(loop):
    with pytest.raises(socket.gaierror):
        loop.run_until_complete(loop.getaddrinfo('127.0.0.1', 'no-such-service-x'))
    with pytest.raises(socket.gaierror):
        loop.run_until_complete(
            loop.getaddrinfo('::1', 80, family=socket.AF_INET))


def test_ip_literals_resolve_inline_minloop_only(loop, loop_kind):
    """minloop answers IP literals inline: no thread pool is even created."""
    if loop_kind != 'minloop':
        pytest.skip('asyncio resolves every address in its executor')
    loop.run_until_complete(loop.getaddrinfo('10.1.2.3', 5432))
    loop.run_until_complete(loop.getaddrinfo('fe80::1', '5432'))
    assert loop._default_executor is None
    loop.run_until_complete(loop.getaddrinfo('localhost', 5432))
    assert loop._default_executor is not None


def test_getnameinfo_matches_socket(loop):
    flags = socket.NI_NUMERICHOST | socket.NI_NUMERICSERV
    got = loop.run_until_complete(loop.getnameinfo(('127.0.0.1', 8080), flags))
    assert got == socket.getnameinfo(('127.0.0.1', 8080), flags)
