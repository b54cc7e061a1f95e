"""The contexts a connection's protocol callbacks run in, on both loops.

From 3.15 asyncio gives each stream connection one context: for
create_connection() and its kin a copy of the caller's, taken before the
protocol factory runs; for a server's connections a copy each of the
context the Server was created in (copied when it is made, not when it
starts serving).  Every protocol callback the socket transport schedules --
connection_made, the reader and writer callbacks (data_received,
get_buffer/buffer_updated, eof_received, resume_writing), connection_lost --
runs in that one object, so what one callback sets, the later ones see.

Before 3.15 each ran in a copy of the context current when it was scheduled:
connection_made and the reader in copies of the transport's creator's,
connection_lost in a copy of whoever closed the transport, a writer in a
copy of whoever wrote.

Datagram transports keep the old rule on every version.  These tests ask
the running asyncio which rule it follows (CONNECTION_CONTEXT) and expect
that of both loops.
"""

import asyncio
import contextvars
import inspect
import os
import socket
import ssl
import tempfile

import pytest
from asyncio import selector_events

# asyncio's loop takes a connection's context where it makes its transports
# (3.15).
CONNECTION_CONTEXT = 'context' in inspect.signature(
    selector_events.BaseSelectorEventLoop._make_socket_transport).parameters

CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tls_certs")

HOST = '127.0.0.1'
TIMEOUT = 10


def shared(then, before):
    """What a callback sees: `then` where the connection has one context,
    `before` where each callback has a copy of its own."""
    return then if CONNECTION_CONTEXT else before


@pytest.fixture
def var():
    """A fresh variable per test (each test sets it only inside its own
    task, so pytest's context never holds a value of it anyway)."""
    return contextvars.ContextVar('var', default='unset')


@pytest.fixture(params=['tcp', 'unix'])
def family(request):
    return request.param


def run(loop, coro):
    reported = []
    loop.set_exception_handler(lambda lp, context: reported.append(context))
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, TIMEOUT))
    finally:
        loop.run_until_complete(asyncio.sleep(0.01))
        loop.set_exception_handler(None)
        assert not reported, reported


class Recorder(asyncio.Protocol):
    """Each callback records what the variable holds, then sets it to its
    own name: the next callback tells whose value it sees."""

    def __init__(self, var, seen, tag=''):
        self.var = var
        self.seen = seen
        self.tag = tag
        self.transport = None
        self.made = asyncio.get_running_loop().create_future()
        self.lost = asyncio.get_running_loop().create_future()

    def see(self, event, value=None):
        self.seen.append((event + self.tag, self.var.get()))
        self.var.set(value or event + self.tag)

    def connection_made(self, transport):
        self.transport = transport
        self.see('made')
        self.made.set_result(None)

    def data_received(self, data):
        self.see('data')

    def eof_received(self):
        self.see('eof')   # returns None: the transport closes

    def connection_lost(self, exc):
        self.see('lost')
        self.lost.set_result(None)


def recording_factory(var, seen, protocols, protocol=Recorder):
    """A protocol factory that records the value it sees and sets its own,
    numbering its protocols."""
    def factory():
        n = len(protocols)
        seen.append((f'factory{n}', var.get()))
        var.set(f'factory{n}')
        proto = protocol(var, seen, str(n))
        protocols.append(proto)
        return proto
    return factory


class Endpoints:
    """A listening address of either family, and the loop calls that
    serve on it and connect to it."""

    def __init__(self, loop, family, tmpdir):
        self.loop = loop
        self.family = family
        self.path = os.path.join(tmpdir, 'sock')
        self.address = None

    async def create_server(self, factory, **kwargs):
        if self.family == 'tcp':
            server = await self.loop.create_server(factory, HOST, 0, **kwargs)
        else:
            server = await self.loop.create_unix_server(factory, self.path, **kwargs)
        self.address = server.sockets[0].getsockname()
        return server

    def listener(self):
        if self.family == 'tcp':
            sock = socket.create_server((HOST, 0))
        else:
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(self.path)
            sock.listen()
        sock.setblocking(False)
        self.address = sock.getsockname()
        return sock

    async def create_connection(self, factory):
        if self.family == 'tcp':
            return await self.loop.create_connection(factory, *self.address)
        return await self.loop.create_unix_connection(factory, self.address)

    async def raw_client(self):
        sock = socket.socket(socket.AF_INET if self.family == 'tcp' else socket.AF_UNIX)
        sock.setblocking(False)
        await self.loop.sock_connect(sock, self.address)
        return sock


@pytest.fixture
def endpoints(loop, family):
    with tempfile.TemporaryDirectory() as tmpdir:
        yield Endpoints(loop, family, tmpdir)


async def read_to_eof(loop, sock):
    while await loop.sock_recv(sock, 65536):
        pass


# --- the order of one connection's callbacks ------------------------------------


def test_server_connection_callbacks(loop, var, endpoints):
    """A server's connection: the factory sees the server's creator's
    value; from 3.15 each callback sees what the one before it set."""
    seen, protocols = [], []

    async def main():
        var.set('server')
        server = await endpoints.create_server(recording_factory(var, seen, protocols))
        client = await endpoints.raw_client()
        await protocols_made(protocols, 1)
        await loop.sock_sendall(client, b'x')
        client.shutdown(socket.SHUT_WR)
        await protocols[0].lost
        await read_to_eof(loop, client)
        client.close()
        server.close()
        await server.wait_closed()
        assert var.get() == 'server'

    run(loop, main())
    assert seen == [('factory0', 'server'), ('made0', 'factory0'),
                    ('data0', shared('made0', 'factory0')),
                    ('eof0', 'data0'), ('lost0', 'eof0')]


async def protocols_made(protocols, count):
    while len(protocols) < count:
        await asyncio.sleep(0.001)
    for proto in protocols:
        await proto.made


def test_client_connection_callbacks(loop, var, endpoints):
    """create_connection(): the factory runs in the caller's context; from
    3.15 the connection's context is a copy of the caller's taken before it
    runs, so connection_made does not see what the factory set."""
    seen, protocols = [], []

    async def main():
        var.set('client')
        listener = endpoints.listener()
        transport, proto = await endpoints.create_connection(
            recording_factory(var, seen, protocols))
        assert var.get() == 'factory0'   # the caller's own context
        conn, _ = await loop.sock_accept(listener)
        await loop.sock_sendall(conn, b'y')
        conn.shutdown(socket.SHUT_WR)
        await proto.lost
        await read_to_eof(loop, conn)
        conn.close()
        listener.close()

    run(loop, main())
    assert seen == [('factory0', 'client'), ('made0', shared('client', 'factory0')),
                    ('data0', shared('made0', 'factory0')),
                    ('eof0', 'data0'), ('lost0', 'eof0')]


def test_accepted_socket_callbacks(loop, var, endpoints):
    """connect_accepted_socket() is a client's path: a copy of the caller's
    context."""
    seen, protocols = [], []

    async def main():
        var.set('caller')
        listener = endpoints.listener()
        client = await endpoints.raw_client()
        conn, _ = await loop.sock_accept(listener)
        transport, proto = await loop.connect_accepted_socket(
            recording_factory(var, seen, protocols), conn)
        await loop.sock_sendall(client, b'z')
        client.shutdown(socket.SHUT_WR)
        await proto.lost
        client.close()
        listener.close()

    run(loop, main())
    assert seen == [('factory0', 'caller'), ('made0', shared('caller', 'factory0')),
                    ('data0', shared('made0', 'factory0')),
                    ('eof0', 'data0'), ('lost0', 'eof0')]


# --- what the program does from outside the callbacks ----------------------------


def test_close_from_outside_the_connection(loop, var, endpoints):
    """connection_lost after close() made by other code: from 3.15 in the
    connection's context, before in a copy of the closer's."""
    seen, protocols = [], []

    async def main():
        server = await endpoints.create_server(recording_factory(var, seen, protocols))
        client = await endpoints.raw_client()
        await protocols_made(protocols, 1)
        var.set('main')
        protocols[0].transport.close()
        await protocols[0].lost
        await read_to_eof(loop, client)
        client.close()
        server.close()
        await server.wait_closed()

    run(loop, main())
    assert seen[-1] == ('lost0', shared('made0', 'main'))


def test_abort_from_outside_the_connection(loop, var, endpoints):
    seen, protocols = [], []

    async def main():
        server = await endpoints.create_server(recording_factory(var, seen, protocols))
        client = await endpoints.raw_client()
        await protocols_made(protocols, 1)
        var.set('main')
        protocols[0].transport.abort()
        await protocols[0].lost
        client.close()
        server.close()
        await server.wait_closed()

    run(loop, main())
    assert seen[-1] == ('lost0', shared('made0', 'main'))


def test_reading_resumed_from_outside_the_connection(loop, var, endpoints):
    """resume_reading() installs the reader again: from 3.15 it runs in the
    connection's context, before in a copy of the resumer's."""
    seen, protocols = [], []

    async def main():
        server = await endpoints.create_server(recording_factory(var, seen, protocols))
        client = await endpoints.raw_client()
        await protocols_made(protocols, 1)
        var.set('main')
        transport = protocols[0].transport
        transport.pause_reading()
        transport.resume_reading()
        await loop.sock_sendall(client, b'x')
        client.shutdown(socket.SHUT_WR)
        await protocols[0].lost
        client.close()
        server.close()
        await server.wait_closed()

    run(loop, main())
    assert seen[2:] == [('data0', shared('made0', 'main')), ('eof0', 'data0'),
                        ('lost0', 'eof0')]


class Writer(Recorder):
    """Records pause_writing and resume_writing too."""

    def __init__(self, *args):
        super().__init__(*args)
        self.paused = False
        self.resumed = asyncio.get_running_loop().create_future()

    def pause_writing(self):
        self.paused = True
        self.see('pause')

    def resume_writing(self):
        self.see('resume')
        self.resumed.set_result(None)


def test_writing_resumed_in_the_connection_context(loop, var, endpoints):
    """The writer a blocked write() installs: from 3.15 in the connection's
    context (resume_writing sees what connection_made set), before in a
    copy of the writer's caller's.  pause_writing() is called by write()
    itself, in the caller's context, on every version."""
    seen, protocols = [], []

    async def main():
        listener = endpoints.listener()
        transport, proto = await endpoints.create_connection(
            recording_factory(var, seen, protocols, Writer))
        conn, _ = await loop.sock_accept(listener)
        await proto.made
        var.set('main')
        chunk = b'w' * (1 << 20)
        for _ in range(256):
            transport.write(chunk)
            if proto.paused:
                break
        assert proto.paused
        var.set('main')
        reader = asyncio.ensure_future(read_to_eof(loop, conn))
        await proto.resumed
        transport.close()
        await proto.lost
        await reader
        conn.close()
        listener.close()

    run(loop, main())
    events = dict(seen)
    assert events['pause0'] == 'main'
    assert events['resume0'] == shared('made0', 'main')


# --- one server, many connections ----------------------------------------------


def test_server_connections_are_isolated(loop, var, endpoints):
    """Each accepted connection has a context of its own: what one sets,
    the next connection's factory and callbacks do not see, nor does the
    server's creator."""
    seen, protocols = [], []

    async def main():
        var.set('server')
        server = await endpoints.create_server(recording_factory(var, seen, protocols))
        first = await endpoints.raw_client()
        await protocols_made(protocols, 1)
        second = await endpoints.raw_client()
        await protocols_made(protocols, 2)
        # Interleaved: the second connection's data first.
        for client in (second, first):
            await loop.sock_sendall(client, b'x')
            client.shutdown(socket.SHUT_WR)
        await protocols[1].lost
        await protocols[0].lost
        for client in (first, second):
            await read_to_eof(loop, client)
            client.close()
        server.close()
        await server.wait_closed()
        assert var.get() == 'server'

    run(loop, main())
    for n in '01':
        mine = [event for event in seen if event[0].endswith(n)]
        assert mine == [(f'factory{n}', 'server'), (f'made{n}', f'factory{n}'),
                        (f'data{n}', shared(f'made{n}', f'factory{n}')),
                        (f'eof{n}', f'data{n}'), (f'lost{n}', f'eof{n}')]


def test_server_context_is_taken_when_the_server_is_made(loop, var, endpoints):
    """start_serving=False, then start_serving() later: from 3.15 the
    connections copy the context the Server was made in; before, the one
    current when it started serving."""
    seen, protocols = [], []

    async def main():
        var.set('created')
        server = await endpoints.create_server(
            recording_factory(var, seen, protocols), start_serving=False)
        var.set('started')
        await server.start_serving()
        client = await endpoints.raw_client()
        await protocols_made(protocols, 1)
        client.close()
        await protocols[0].lost
        server.close()
        await server.wait_closed()

    run(loop, main())
    assert seen[0] == ('factory0', shared('created', 'started'))


class BufferedRecorder(Recorder, asyncio.BufferedProtocol):
    def get_buffer(self, sizehint):
        self.see('get_buffer')
        return bytearray(1024)

    def buffer_updated(self, nbytes):
        self.see('updated')


def test_buffered_protocol_callbacks(loop, var, endpoints):
    seen, protocols = [], []

    async def main():
        server = await endpoints.create_server(
            recording_factory(var, seen, protocols, BufferedRecorder))
        client = await endpoints.raw_client()
        await protocols_made(protocols, 1)
        await loop.sock_sendall(client, b'x')
        client.shutdown(socket.SHUT_WR)
        await protocols[0].lost
        client.close()
        server.close()
        await server.wait_closed()

    run(loop, main())
    assert seen[1:] == [('made0', 'factory0'),
                        ('get_buffer0', shared('made0', 'factory0')),
                        ('updated0', 'get_buffer0'),
                        # The read that finds EOF asks for a buffer too.
                        ('get_buffer0', 'updated0'),
                        ('eof0', 'get_buffer0'), ('lost0', 'eof0')]


# --- TLS and datagrams ---------------------------------------------------------


def test_tls_client_connection_context(loop, var):
    """TLS over the connection's socket transport: the application's
    protocol is called from the TLS protocol's callbacks, so from 3.15 it
    sees the context of the create_connection() caller, copied before the
    factory ran."""
    seen, protocols = [], []
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(os.path.join(CERTS, 'server.pem'))
    client_ctx = ssl.create_default_context(cafile=os.path.join(CERTS, 'ca.pem'))

    async def main():
        async def handler(reader, writer):
            writer.write(b'y')
            await writer.drain()
            await reader.read()
            writer.close()

        server = await asyncio.start_server(handler, HOST, 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        var.set('client')
        transport, proto = await loop.create_connection(
            recording_factory(var, seen, protocols), HOST, port,
            ssl=client_ctx, server_hostname='localhost')
        while len(seen) < 3:
            await asyncio.sleep(0.001)
        transport.close()
        await proto.lost
        server.close()
        await server.wait_closed()

    run(loop, main())
    assert seen[:3] == [('factory0', 'client'), ('made0', shared('client', 'factory0')),
                        ('data0', 'made0')]


def test_tls_server_connections_are_isolated(loop, var):
    seen, protocols = [], []
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(os.path.join(CERTS, 'server.pem'))
    client_ctx = ssl.create_default_context(cafile=os.path.join(CERTS, 'ca.pem'))

    async def main():
        var.set('server')
        server = await loop.create_server(
            recording_factory(var, seen, protocols), HOST, 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        writers = []
        for _ in range(2):
            reader, writer = await asyncio.open_connection(
                HOST, port, ssl=client_ctx, server_hostname='localhost')
            writers.append(writer)
            await protocols_made(protocols, len(writers))
        for writer in reversed(writers):
            writer.write(b'x')
            await writer.drain()
        while sum(event[0].startswith('data') for event in seen) < 2:
            await asyncio.sleep(0.001)
        for writer in writers:
            writer.close()
        for proto in protocols:
            await proto.lost
        server.close()
        await server.wait_closed()
        assert var.get() == 'server'

    run(loop, main())
    for n in '01':
        mine = [event for event in seen if event[0].endswith(n)]
        assert mine[:3] == [(f'factory{n}', 'server'), (f'made{n}', f'factory{n}'),
                            (f'data{n}', f'made{n}')]


class DatagramRecorder(asyncio.DatagramProtocol):
    def __init__(self, var, seen):
        self.var = var
        self.seen = seen
        self.received = asyncio.get_running_loop().create_future()

    def connection_made(self, transport):
        self.seen.append(('made', self.var.get()))
        self.var.set('made')

    def datagram_received(self, data, addr):
        self.seen.append(('datagram', self.var.get()))
        self.var.set('datagram')
        if not self.received.done():
            self.received.set_result(None)

    def connection_lost(self, exc):
        self.seen.append(('lost', self.var.get()))


def test_datagram_callbacks_keep_their_own_copies(loop, var):
    """Datagram transports have no connection context, on any version:
    each callback runs in a copy of its scheduler's context."""
    seen = []

    async def main():
        var.set('main')
        transport, proto = await loop.create_datagram_endpoint(
            lambda: DatagramRecorder(var, seen), local_addr=(HOST, 0))
        addr = transport.get_extra_info('sockname')
        sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sender.sendto(b'x', addr)
        await proto.received
        sender.close()
        var.set('closer')
        transport.close()
        await asyncio.sleep(0.01)

    run(loop, main())
    assert seen == [('made', 'main'), ('datagram', 'main'), ('lost', 'closer')]
