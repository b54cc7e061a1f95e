"""A stream transport's get_extra_info(), `_extra` and loop._transports.

minloop keeps no `_extra` dict and no weak-reference entry per connection
(stream.pyx's get_extra_info, src/fd_table.h's "Owners"): what the program
can see must be asyncio's all the same, for every key, before and after
close, and for the fd a transport owns -- whichever way the transport was
made (accepted, connected, given an extra dict), re-initialised, collected
in a cycle, or replaced on its fd number by a newer one.  Both loops.
"""

import asyncio
import gc
import socket
import warnings
import weakref

import pytest


class Proto(asyncio.Protocol):
    def __init__(self, loop):
        self.made = loop.create_future()
        self.lost = loop.create_future()

    def connection_made(self, transport):
        self.transport = transport
        self.made.set_result(transport)

    def connection_lost(self, exc):
        if not self.lost.done():
            self.lost.set_result(exc)


KEYS = ('socket', 'sockname', 'peername', 'nope', 'sslcontext', 'peercert')


def snapshot(tr):
    """What get_extra_info() says for each key, the socket as its numbers."""
    out = {}
    for key in KEYS:
        value = tr.get_extra_info(key, 'default')
        if key == 'socket':
            assert isinstance(value, asyncio.trsock.TransportSocket)
            assert tr.get_extra_info('socket') is value   # the same every time
            value = (value.fileno(), value.family, value.type)
        out[key] = value
    return out


async def accepted_pair(loop):
    """(server-side transport of an accepted connection, its protocol, the
    client socket, the server)."""
    protos = []

    def factory():
        protos.append(Proto(loop))
        return protos[-1]

    server = await loop.create_server(factory, '127.0.0.1', 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.create_connection(('127.0.0.1', port))
    client.setblocking(False)
    while not protos:
        await asyncio.sleep(0.001)
    tr = await protos[0].made
    return tr, protos[0], client, server


def expected(sock, peer):
    return {'socket': (sock.fileno(), sock.family, sock.type),
            'sockname': sock.getsockname(), 'peername': peer,
            'nope': 'default', 'sslcontext': 'default', 'peercert': 'default'}


def test_accepted_connection_every_key_before_and_after_close(loop):
    async def main():
        tr, proto, client, server = await accepted_pair(loop)
        sock = tr.get_extra_info('socket')
        before = snapshot(tr)
        assert before == expected(sock, client.getsockname())
        tr.close()
        await proto.lost
        after = snapshot(tr)
        before['socket'] = (-1, sock.family, sock.type)   # closed, as asyncio's
        assert after == before
        # asyncio's dict, in asyncio's order (the constructor got 'peername').
        assert list(tr._extra) == ['peername', 'socket', 'sockname']
        assert tr._extra['socket'] is tr.get_extra_info('socket')
        client.close()
        server.close()
        await server.wait_closed()
    loop.run_until_complete(main())


def test_connected_transport_every_key_and_extra_order(loop):
    async def main():
        listener = socket.create_server(('127.0.0.1', 0))
        port = listener.getsockname()[1]
        tr, proto = await loop.create_connection(lambda: Proto(loop), '127.0.0.1', port)
        peer, _ = listener.accept()
        sock = tr.get_extra_info('socket')
        assert snapshot(tr) == expected(sock, ('127.0.0.1', port))
        # Read before close this time: the dict made then is the answer after.
        assert list(tr._extra) == ['socket', 'sockname', 'peername']
        first = snapshot(tr)
        tr.close()
        await proto.lost
        first['socket'] = (-1, sock.family, sock.type)
        assert snapshot(tr) == first
        peer.close()
        listener.close()
    loop.run_until_complete(main())


def test_extra_dict_given_is_the_dict_filled_as_asyncio_fills_it(loop, socketpair):
    a, b = socketpair
    extra = {'peername': 'given', 'mine': 1}
    proto = Proto(loop)
    tr = loop._make_socket_transport(a, proto, extra=extra)
    loop.run_until_complete(proto.made)
    assert tr._extra is extra
    assert list(extra) == ['peername', 'mine', 'socket', 'sockname']
    assert tr.get_extra_info('peername') == 'given'
    assert tr.get_extra_info('mine') == 1
    assert tr.get_extra_info('sockname') == a.getsockname()
    assert tr.get_extra_info('socket') is extra['socket']
    tr.close()
    loop.run_until_complete(proto.lost)


def test_extra_is_writable_and_then_the_answer(loop, socketpair):
    a, b = socketpair
    proto = Proto(loop)
    tr = loop._make_socket_transport(a, proto)
    loop.run_until_complete(proto.made)
    tr._extra['added'] = 5
    assert tr.get_extra_info('added') == 5
    tr._extra['sockname'] = 'changed'
    assert tr.get_extra_info('sockname') == 'changed'
    tr._extra = {'only': 1}
    assert tr.get_extra_info('only') == 1
    assert tr.get_extra_info('socket') is None
    tr.close()
    loop.run_until_complete(proto.lost)


class Equal:
    """Equal to 'peername', as a dict key may be."""

    def __hash__(self):
        return hash('peername')

    def __eq__(self, other):
        return other == 'peername'


def test_keys_that_are_not_str_get_a_dicts_answer(loop, socketpair):
    a, b = socketpair
    proto = Proto(loop)
    tr = loop._make_socket_transport(a, proto)
    loop.run_until_complete(proto.made)
    with pytest.raises(TypeError):
        tr.get_extra_info([])
    assert tr.get_extra_info(Equal()) == tr.get_extra_info('peername')
    assert tr.get_extra_info(3, 'd') == 'd'
    tr.close()
    loop.run_until_complete(proto.lost)


def test_transport_fd_is_refused_while_open_allowed_once_closing(loop):
    async def main():
        tr, proto, client, server = await accepted_pair(loop)
        fd = tr.get_extra_info('socket').fileno()
        assert loop._transports[fd] is tr
        assert fd in loop._transports
        for method in (loop.add_reader, loop.add_writer):
            with pytest.raises(RuntimeError, match=f'File descriptor {fd} is used by transport'):
                method(fd, lambda: None)
        for method in (loop.remove_reader, loop.remove_writer):
            with pytest.raises(RuntimeError, match='is used by transport'):
                method(fd)
        # A file object with that fd is refused the same way.
        with pytest.raises(RuntimeError, match='is used by transport'):
            loop.add_reader(tr.get_extra_info('socket'), lambda: None)
        tr.close()
        # Closing: the entry stays (asyncio's lives while the transport
        # does), but no longer refuses.
        assert loop._transports[fd] is tr
        await proto.lost
        assert loop._transports.get(fd) is tr
        client.close()
        server.close()
        await server.wait_closed()
        return weakref.ref(tr), fd
    ref, fd = loop.run_until_complete(main())
    gc.collect()
    assert ref() is None
    assert fd not in loop._transports
    with pytest.raises(KeyError):
        loop._transports[fd]


def test_sock_methods_refuse_a_transports_socket(loop, socketpair):
    a, b = socketpair
    proto = Proto(loop)
    tr = loop._make_socket_transport(a, proto)
    loop.run_until_complete(proto.made)
    with pytest.raises(RuntimeError, match='is used by transport'):
        loop.run_until_complete(loop.sock_recv(a, 10))
    tr.close()
    loop.run_until_complete(proto.lost)


def test_newer_transport_on_the_same_fd_keeps_its_entry(loop):
    """A closed transport still held, its fd number taken by a new one: the
    mapping names the new one, and the old one's death leaves it there."""
    async def main():
        a1, b1 = socket.socketpair()
        p1 = Proto(loop)
        old = loop._make_socket_transport(a1, p1)
        await p1.made
        fd = a1.fileno()
        old.close()
        await p1.lost
        b1.close()
        a2, b2 = socket.socketpair()
        if a2.fileno() != fd:
            a2.close()
            b2.close()
            pytest.skip('the fd number was not reused')
        p2 = Proto(loop)
        new = loop._make_socket_transport(a2, p2)
        await p2.made
        assert loop._transports[fd] is new
        return old, new, p2, b2, fd
    old, new, p2, b2, fd = loop.run_until_complete(main())
    del old
    gc.collect()
    assert loop._transports[fd] is new
    with pytest.raises(RuntimeError, match='is used by transport'):
        loop.add_reader(fd, lambda: None)
    new.close()
    loop.run_until_complete(p2.lost)
    b2.close()


def test_mapping_set_and_delete(loop, socketpair):
    a, b = socketpair
    proto = Proto(loop)
    tr = loop._make_socket_transport(a, proto)
    loop.run_until_complete(proto.made)
    fd = a.fileno()
    assert dict(loop._transports) == {fd: tr}
    assert len(loop._transports) == 1
    # As asyncio's _sendfile_native does around its send.
    del loop._transports[fd]
    assert fd not in loop._transports
    with pytest.raises(KeyError):
        del loop._transports[fd]
    loop.add_writer(fd, lambda: None)      # not refused while out of the map
    loop.remove_writer(fd)
    loop._transports[fd] = tr
    assert loop._transports[fd] is tr
    with pytest.raises(RuntimeError, match='is used by transport'):
        loop.add_reader(fd, lambda: None)
    other = Proto(loop)                    # any object, held weakly
    loop._transports[fd] = other
    assert loop._transports[fd] is other
    del other
    gc.collect()
    assert fd not in loop._transports
    tr.close()
    loop.run_until_complete(proto.lost)


def test_transport_collected_in_a_cycle_leaves_the_mapping(loop, socketpair):
    """Unclosed and paused (no reader holds it), in a cycle with its
    protocol: the collector finalizes it (ResourceWarning, socket closed)
    and the mapping forgets it."""
    a, b = socketpair
    proto = Proto(loop)
    tr = loop._make_socket_transport(a, proto)
    loop.run_until_complete(proto.made)
    fd = a.fileno()
    tr.pause_reading()
    proto.cycle = proto          # and proto.transport -> tr -> proto
    ref = weakref.ref(tr)
    del tr, proto
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) for w in caught)
    assert fd not in loop._transports
    assert a.fileno() == -1
    # The warning's source is the transport (3.15's recorded warnings keep
    # it): it goes with them.
    del caught
    gc.collect()
    assert ref() is None


def test_reinitialised_transport_keeps_the_first_fds_entry(loop):
    a1, b1 = socket.socketpair()
    a2, b2 = socket.socketpair()
    proto = Proto(loop)
    tr = loop._make_socket_transport(a1, proto)
    loop.run_until_complete(proto.made)
    proto2 = Proto(loop)
    type(tr).__init__(tr, loop, a2, proto2)
    loop.run_until_complete(proto2.made)
    assert loop._transports[a1.fileno()] is tr
    assert loop._transports[a2.fileno()] is tr
    ref = weakref.ref(tr)
    tr.close()
    loop.run_until_complete(proto2.lost)
    # The first socket's reader still holds it (on both loops).
    loop._remove_reader(a1.fileno())
    del tr, proto, proto2
    gc.collect()
    assert ref() is None
    assert a1.fileno() not in loop._transports
    for s in (a1, b1, a2, b2):
        s.close()


def test_no_extra_dict_until_asked(loop_kind, loop, socketpair, minloop_only):
    """minloop's promise: an idle connection holds no _extra dict."""
    a, b = socketpair
    proto = Proto(loop)
    tr = loop._make_socket_transport(a, proto)
    loop.run_until_complete(proto.made)
    raw_slot = asyncio.BaseTransport._extra   # asyncio's own slot descriptor
    assert raw_slot.__get__(tr) is None
    tr.get_extra_info('peername')
    tr.get_extra_info('socket')
    assert raw_slot.__get__(tr) is None
    assert isinstance(tr._extra, dict)
    assert raw_slot.__get__(tr) is tr._extra
    tr.close()
    loop.run_until_complete(proto.lost)


@pytest.mark.parametrize('paused', [False, True])
def test_unclosed_loop_and_transport_collected_together(loop_factory, paused):
    """A loop dropped unclosed with a live transport (reading, or paused):
    one garbage cycle.  The collector takes both, the transport's socket is
    closed, and nothing touches freed memory (run under PYTHONMALLOC=debug
    and ASan too)."""
    lp = loop_factory()
    lp.set_debug(False)
    a, b = socket.socketpair()
    proto = Proto(lp)
    tr = lp._make_socket_transport(a, proto)
    lp.run_until_complete(proto.made)
    if paused:
        tr.pause_reading()
    mapping_ref = weakref.ref(tr)
    loop_ref = weakref.ref(lp)
    del tr, proto, lp
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', ResourceWarning)
        for _ in range(3):
            gc.collect()
    assert loop_ref() is None
    assert mapping_ref() is None
    assert a.fileno() == -1
    b.close()
