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


# --- bad and odd arguments: asyncio calls socket.getaddrinfo(host, port,
# family, type, proto, flags) in its executor, so whatever that call returns
# or raises (type and message) is the answer, IP literal or not.

H4 = '127.0.0.1'
BAD_GETADDRINFO = [
    # flags: out of range, wrong types
    (H4, 80, {'flags': -1}),
    (H4, 80, {'flags': 1 << 40}),
    (H4, 80, {'flags': 0x7fff_ffff}),
    (H4, 80, {'flags': 'x'}),
    (H4, 80, {'flags': None}),
    (H4, 80, {'flags': 1.0}),
    ('::1', '443', {'flags': -1}),
    (None, 0, {'flags': -1}),
    (H4, 80, {'flags': socket.AI_CANONNAME}),
    (H4, 80, {'flags': socket.AI_NUMERICHOST | socket.AI_NUMERICSERV}),
    (H4, 80, {'family': socket.AF_INET6, 'flags': socket.AI_V4MAPPED}),
    # family
    (H4, 80, {'family': -1}),
    (H4, 80, {'family': 999}),
    (H4, 80, {'family': socket.AF_UNIX}),
    (H4, 80, {'family': socket.AF_INET6}),
    ('::1', 80, {'family': socket.AF_INET}),
    ('::ffff:127.0.0.1', 80, {'family': socket.AF_INET}),
    (H4, 80, {'family': 'x'}),
    (H4, 80, {'family': 1 << 70}),
    (H4, 80, {'family': 2.0}),
    # type
    (H4, 80, {'type': -1}),
    (H4, 80, {'type': 999}),
    (H4, 80, {'type': 'x'}),
    (H4, 80, {'type': 1 << 70}),
    # proto
    (H4, 80, {'proto': -1}),
    (H4, 80, {'proto': 999}),
    (H4, 80, {'proto': 'x'}),
    (H4, 80, {'type': socket.SOCK_STREAM, 'proto': socket.IPPROTO_UDP}),
    # port: huge, negative, other types, other scripts' digits
    (H4, 70000, {}),
    (H4, 65535, {}),
    (H4, -1, {}),
    (H4, 2 ** 63, {}),
    (H4, 1 << 70, {}),
    (H4, True, {}),
    (H4, '80', {}),
    (H4, b'80', {}),
    (H4, '', {}),
    (H4, b'', {}),
    (H4, '-1', {}),
    (H4, '99999999999999999999', {}),
    (H4, '8 0', {}),
    (H4, '\u0663', {}),            # ARABIC-INDIC DIGIT THREE: str.isdigit() is True
    (H4, '\uff18\uff10', {}),      # FULLWIDTH 80
    (H4, b'\xff', {}),
    (H4, 80.0, {}),
    (H4, [80], {}),
    (H4, 'http', {'type': socket.SOCK_STREAM}),
    (H4, None, {}),
    # host: bytes, None, empty, wrong types, not-quite literals, IDNA
    (b'127.0.0.1', 80, {}),
    (b'::1', 80, {}),
    (b'\xff', 80, {}),
    (None, 80, {}),
    (None, None, {}),
    ('', 80, {}),
    (b'', 80, {}),
    (1234, 80, {}),
    (bytearray(b'127.0.0.1'), 80, {}),
    ('127.0.0.1\x00', 80, {}),
    ('127.1', 80, {}),
    ('0x7f.0.0.1', 80, {}),
    ('fe80::1%1', 80, {}),
    ('\u0661\u0662\u0667.0.0.1', 80, {}),      # ARABIC-INDIC 127
    ('x' * 64 + '.invalid', 80, {}),           # IDNA: label too long
    ('a..b', 80, {}),                          # IDNA: empty label
    ('\udcff', 80, {}),                        # IDNA: not encodable
    ('b\u00fccher.invalid', 80, {}),           # IDNA: encodes, never resolves
]


def outcome(call):
    """('ok', result) or ('raise', exception type, message) of call()."""
    try:
        return ('ok', call())
    except Exception as exc:
        return ('raise', type(exc), str(exc))


def _gai_id(case):
    host, port, kwargs = case
    return f'{host!r}-{port!r}-{kwargs}'


@pytest.mark.parametrize('case', BAD_GETADDRINFO, ids=[_gai_id(c) for c in BAD_GETADDRINFO])
def test_getaddrinfo_arguments_as_asyncio(loop, case):
    host, port, kwargs = case
    args = (kwargs.get('family', 0), kwargs.get('type', 0),
            kwargs.get('proto', 0), kwargs.get('flags', 0))
    expected = outcome(lambda: socket.getaddrinfo(host, port, *args))
    got = outcome(lambda: loop.run_until_complete(
        loop.getaddrinfo(host, port, **kwargs)))
    assert got == expected


def test_getaddrinfo_bad_flags_on_ip_literal_raise(loop):
    """The case that minloop's inline path once accepted (flags=-1 was or'ed
    with AI_NUMERICHOST | AI_NUMERICSERV): asyncio's answer is gaierror."""
    with pytest.raises(socket.gaierror) as info:
        loop.run_until_complete(loop.getaddrinfo('127.0.0.1', 80, flags=-1))
    assert info.value.errno == socket.EAI_BADFLAGS
    with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
        loop.run_until_complete(loop.getaddrinfo('127.0.0.1', 80, flags='x'))


def test_getaddrinfo_non_ascii_digit_port_is_a_service_name(loop):
    """'\\u0663'.isdigit() is True, yet the C library takes it for a service
    name: EAI_SERVICE, not the EAI_NONAME that AI_NUMERICSERV gives."""
    with pytest.raises(socket.gaierror) as info:
        loop.run_until_complete(loop.getaddrinfo('127.0.0.1', '\u0663'))
    assert info.value.errno == socket.EAI_SERVICE


def test_getaddrinfo_in_debug_mode_logs_every_lookup(loop, caplog):
    """asyncio's debug mode logs each lookup (_getaddrinfo_debug), IP
    literals included."""
    loop.set_debug(True)
    with caplog.at_level('DEBUG', logger='asyncio'):
        loop.run_until_complete(loop.getaddrinfo('127.0.0.1', 80))
    assert any(r.getMessage().startswith('Getting address info 127.0.0.1:80')
               for r in caplog.records), caplog.text


BAD_GETNAMEINFO = [
    (('127.0.0.1', 80), socket.NI_NUMERICHOST | socket.NI_NUMERICSERV),
    (('127.0.0.1', 80), -1),
    (('127.0.0.1', 80), 1 << 40),
    (('127.0.0.1', 80), 'x'),
    (('127.0.0.1', 80), None),
    (('127.0.0.1',), 0),
    (('127.0.0.1', 80, 0, 0, 0), 0),
    ('127.0.0.1', 0),
    (['127.0.0.1', 80], 0),
    ((b'127.0.0.1', 80), 0),
    ((None, 80), 0),
    (('127.0.0.1', 1 << 70), socket.NI_NUMERICHOST),
    (('127.0.0.1', -1), socket.NI_NUMERICHOST),
    (('127.0.0.1', 70000), socket.NI_NUMERICHOST),
    (('127.0.0.1', '80'), socket.NI_NUMERICHOST),
    (('::1', 80, 0, 0), socket.NI_NUMERICHOST | socket.NI_NUMERICSERV),
    (('::1', 80, 1 << 40, 0), socket.NI_NUMERICHOST),
    (('::1', 80, 0, -1), socket.NI_NUMERICHOST),
    (('fe80::1%1', 80), socket.NI_NUMERICHOST | socket.NI_NUMERICSERV),
    (('', 80), socket.NI_NUMERICHOST),
    (('x' * 64 + '.invalid', 80), socket.NI_NUMERICHOST),
]


@pytest.mark.parametrize('sockaddr,flags', BAD_GETNAMEINFO,
                         ids=[f'{a!r}-{f!r}' for a, f in BAD_GETNAMEINFO])
def test_getnameinfo_arguments_as_asyncio(loop, sockaddr, flags):
    expected = outcome(lambda: socket.getnameinfo(sockaddr, flags))
    got = outcome(lambda: loop.run_until_complete(loop.getnameinfo(sockaddr, flags)))
    assert got == expected


def test_getnameinfo_missing_and_extra_arguments(loop):
    """getnameinfo(sockaddr, flags=0) is the signature on both loops."""
    with pytest.raises(TypeError):
        loop.getnameinfo()
    coro = loop.getnameinfo(('127.0.0.1', 80))
    assert loop.run_until_complete(coro) == socket.getnameinfo(('127.0.0.1', 80), 0)


def test_getaddrinfo_after_shutdown_default_executor(loop):
    """asyncio's getaddrinfo goes through run_in_executor, which refuses once
    the default executor was shut down: IP literals too."""
    async def main():
        await loop.shutdown_default_executor()
        with pytest.raises(RuntimeError, match='Executor shutdown has been called'):
            await loop.getaddrinfo('127.0.0.1', 80)
        with pytest.raises(RuntimeError, match='Executor shutdown has been called'):
            await loop.getaddrinfo('127.0.0.1', 80, flags=-1)   # checked first
        with pytest.raises(RuntimeError, match='Executor shutdown has been called'):
            await loop.getaddrinfo('localhost', 80)

    loop.run_until_complete(main())


def test_getaddrinfo_of_a_closed_loop(loop, loop_factory):
    """A closed loop's getaddrinfo() awaited on another loop: 'Event loop is
    closed', before any argument is looked at."""
    closed = loop_factory()
    closed.close()
    for args in [('127.0.0.1', 80), ('localhost', 80), ('127.0.0.1', 80.0)]:
        with pytest.raises(RuntimeError, match='Event loop is closed'):
            loop.run_until_complete(closed.getaddrinfo(*args))
    with pytest.raises(RuntimeError, match='Event loop is closed'):
        loop.run_until_complete(closed.getnameinfo(('127.0.0.1', 80)))
