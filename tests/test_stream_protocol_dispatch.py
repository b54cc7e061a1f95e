"""How the stream transport reaches its protocol, as asyncio does.

Two regressions found by running real programs on minloop:
* a protocol factory runs in a fresh copy of the server's context for each
  connection (asyncio sets each connection up in a task of its own), so a
  context variable set for one connection is not seen by the next;
* data_received is looked up on every read, so a protocol that replaces it
  (a state machine, a test's mock) gets the data in the new handler.
"""

import asyncio
import contextvars

var = contextvars.ContextVar("var", default=None)


def test_protocol_factory_runs_in_a_fresh_context_per_connection(loop):
    seen = []
    made = []

    class P(asyncio.Protocol):
        def __init__(self):
            seen.append(var.get())
            made.append(None)
            var.set(len(made))

        def connection_made(self, transport):
            # The factory's context is the connection's context.
            seen.append(("made", var.get()))
            transport.close()

    async def main():
        server = await loop.create_server(P, "127.0.0.1", 0)
        for _ in range(3):
            r, w = await asyncio.open_connection(*server.sockets[0].getsockname())
            await r.read()
            w.close()
            await w.wait_closed()
        server.close()
        await server.wait_closed()

    loop.run_until_complete(main())
    assert seen == [None, ("made", 1), None, ("made", 2), None, ("made", 3)]


def test_replaced_data_received_gets_the_data(loop):
    got = []

    class P(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport
            self.data_received = self.body_received

        def data_received(self, data):  # replaced before any data arrives
            got.append(("initial", data))

        def body_received(self, data):
            got.append(("body", data))
            self.transport.close()

    async def main():
        server = await loop.create_server(P, "127.0.0.1", 0)
        r, w = await asyncio.open_connection(*server.sockets[0].getsockname())
        w.write(b"x")
        await asyncio.wait_for(r.read(), 5)
        w.close()
        await w.wait_closed()
        server.close()
        await server.wait_closed()

    loop.run_until_complete(main())
    assert got == [("body", b"x")]
