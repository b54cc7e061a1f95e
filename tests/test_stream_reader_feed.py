"""asyncio's streams over the socket transport, as asyncio's loop runs them.

minloop feeds an asyncio.StreamReaderProtocol's reader itself
(minloop/stream_reader.pyx) instead of calling its data_received(): these
tests hold it to what asyncio's own code does, on both loops.  Those that
replace a method check that the replacement is called (the fast path must
step aside); the others would hang, lose data or see other reader state if
the fast path did less than asyncio's code.
"""

import asyncio
import gc
import socket
import weakref

import pytest


def _pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    return a, b


def run(loop, coro_fn, *, limit=2 ** 16, protocol_class=None, reader_class=None):
    """Run coro_fn(reader, writer, peer) over a socketpair on loop: reader
    and writer are asyncio's streams over one end, peer the other socket."""
    a, b = _pair()

    async def main():
        reader = (reader_class or asyncio.StreamReader)(limit=limit, loop=loop)
        protocol = (protocol_class or asyncio.StreamReaderProtocol)(reader, loop=loop)
        transport, _ = await loop.create_connection(lambda: protocol, sock=a)
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        try:
            return await asyncio.wait_for(coro_fn(reader, writer, b), 5)
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except Exception:
                pass   # the error that closed the transport (a test's)

    try:
        return loop.run_until_complete(main())
    finally:
        b.close()


async def send(loop, peer, *chunks):
    """Send each chunk, letting the loop run between them."""
    for chunk in chunks:
        await loop.sock_sendall(peer, chunk)
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("size", [1, 1024, 65536, 300_000])
def test_read_sizes(loop, size):
    payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)

    async def go(reader, writer, peer):
        sender = loop.create_task(loop.sock_sendall(peer, payload))
        got = bytearray()
        while len(got) < size:
            got += await reader.read(size)
        await sender
        return bytes(got), len(reader._buffer)

    assert run(loop, go) == (payload, 0)


def test_readexactly_readuntil_readline_over_split_data(loop):
    async def go(reader, writer, peer):
        sender = loop.create_task(send(loop, peer, b"ab", b"cd\nef", b"g|hi", b"jk", b"\nrest"))
        line = await reader.readline()
        exact = await reader.readexactly(3)
        until = await reader.readuntil(b"|")
        line2 = await reader.readline()
        await sender
        peer.shutdown(socket.SHUT_WR)
        rest = await reader.read()
        return line, exact, until, line2, rest, reader.at_eof()

    assert run(loop, go) == (b"abcd\n", b"efg", b"|", b"hijk\n", b"rest", True)


def test_limit_overrun_pauses_and_resumes_reading(loop):
    async def go(reader, writer, peer):
        await send(loop, peer, b"x" * 100)
        # 100 > 2 * limit: feed_data() paused the transport.
        paused = (reader._paused, writer.transport.is_reading(), len(reader._buffer))
        data = await reader.read(1000)
        resumed = (reader._paused, writer.transport.is_reading())
        await send(loop, peer, b"y" * 10)
        small = (reader._paused, writer.transport.is_reading(), bytes(reader._buffer))
        return paused, data, resumed, small

    assert run(loop, go, limit=16) == (
        (True, False, 100), b"x" * 100, (False, True), (False, True, b"y" * 10))


def test_pause_reading_not_implemented_forgets_the_transport(loop):
    class Transport:
        # What feed_data() calls pause_reading() on: the reader's transport.
        def pause_reading(self):
            raise NotImplementedError

    async def go(reader, writer, peer):
        reader._transport = Transport()
        await send(loop, peer, b"x" * 100)
        return reader._transport, reader._paused, writer.transport.is_reading()

    assert run(loop, go, limit=16) == (None, False, True)


def test_eof(loop):
    async def go(reader, writer, peer):
        await send(loop, peer, b"last")
        peer.shutdown(socket.SHUT_WR)
        return await reader.read(), await reader.read(), reader.at_eof()

    assert run(loop, go) == (b"last", b"", True)


def test_waiter_cancelled_before_data_arrives(loop):
    async def go(reader, writer, peer):
        reading = loop.create_task(reader.read(10))
        await asyncio.sleep(0.01)
        waiter = reader._waiter
        reading.cancel()
        await send(loop, peer, b"data")
        state = (waiter.cancelled(), reader._waiter, bytes(reader._buffer))
        return reading.cancelled(), state, await reader.read(10)

    cancelled, (waiter_cancelled, waiter_now, buffered), data = run(loop, go)
    assert (cancelled, waiter_cancelled, waiter_now, buffered, data) == (
        True, True, None, b"data", b"data")


def test_cancelled_waiter_is_dropped_not_set(loop):
    # A waiter cancelled while still the reader's (its reader task has not
    # run since): feed_data() drops it without setting a result.
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    async def go(reader, writer, peer):
        waiter = reader._waiter = loop.create_future()
        waiter.cancel()
        await send(loop, peer, b"data")
        return reader._waiter, bytes(reader._buffer), writer.transport.is_closing()

    assert run(loop, go) == (None, b"data", False)
    assert contexts == []


@pytest.mark.parametrize("method", ["cancelled", "set_result"])
def test_waiter_methods_of_its_own_are_called(loop, method):
    # feed_data() wakes the waiter with waiter.cancelled() and
    # waiter.set_result(None): a future with an attribute of its own under
    # either name has that called, not Future's method.
    calls = []

    async def go(reader, writer, peer):
        waiter = reader._waiter = loop.create_future()
        real = getattr(waiter, method)

        def own(*args):
            calls.append(args)
            return real(*args)

        setattr(waiter, method, own)
        await send(loop, peer, b"data")
        return reader._waiter, waiter.done(), bytes(reader._buffer)

    assert run(loop, go) == (None, True, b"data")
    assert calls == [()] if method == "cancelled" else [(None,)]


def test_protocol_subclass_gets_data_received(loop):
    calls = []

    class Protocol(asyncio.StreamReaderProtocol):
        def data_received(self, data):
            calls.append(data)
            super().data_received(data)

    async def go(reader, writer, peer):
        await send(loop, peer, b"one", b"two")
        return await reader.read(10)

    assert run(loop, go, protocol_class=Protocol) == b"onetwo"
    assert calls == [b"one", b"two"]


def test_reader_subclass_gets_feed_data(loop):
    calls = []

    class Reader(asyncio.StreamReader):
        def feed_data(self, data):
            calls.append(data)
            super().feed_data(data)

    async def go(reader, writer, peer):
        await send(loop, peer, b"one")
        return await reader.read(10)

    assert run(loop, go, reader_class=Reader) == b"one"
    assert calls == [b"one"]


@pytest.mark.parametrize("target,name", [
    ("protocol", "data_received"), ("reader", "feed_data"), ("reader", "_wakeup_waiter")])
def test_instance_override_is_called(loop, target, name):
    calls = []

    async def go(reader, writer, peer):
        obj = writer._protocol if target == "protocol" else reader
        original = getattr(obj, name)

        def replacement(*args):
            calls.append(args)
            return original(*args)

        await send(loop, peer, b"before")
        setattr(obj, name, replacement)
        await send(loop, peer, b"after")
        delattr(obj, name)
        await send(loop, peer, b"again")
        return await reader.read(100)

    assert run(loop, go) == b"beforeafteragain"
    assert calls == ([()] if name == "_wakeup_waiter" else [(b"after",)])


def test_waiter_wakeup_override_is_called_while_reading(loop):
    calls = []

    async def go(reader, writer, peer):
        original = reader._wakeup_waiter

        def replacement():
            calls.append(reader._waiter is not None)
            original()

        reader._wakeup_waiter = replacement
        reading = loop.create_task(reader.read(10))
        await asyncio.sleep(0.01)
        await send(loop, peer, b"data")
        return await reading, list(calls)

    assert run(loop, go) == (b"data", [True])


@pytest.mark.parametrize("cls,name", [
    ("StreamReaderProtocol", "data_received"), ("StreamReader", "feed_data"),
    ("StreamReader", "_wakeup_waiter")])
def test_class_patch_is_called(loop, monkeypatch, cls, name):
    calls = []
    klass = getattr(asyncio, cls)
    original = getattr(klass, name)

    def replacement(self, *args):
        calls.append(args)
        return original(self, *args)

    async def go(reader, writer, peer):
        await send(loop, peer, b"before")
        monkeypatch.setattr(klass, name, replacement)
        await send(loop, peer, b"after")
        monkeypatch.undo()
        await send(loop, peer, b"again")
        return await reader.read(100)

    assert run(loop, go) == b"beforeafteragain"
    assert calls == ([()] if name == "_wakeup_waiter" else [(b"after",)])


def test_data_after_feed_eof(loop):
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    async def go(reader, writer, peer):
        reader.feed_eof()
        await send(loop, peer, b"late")
        return bytes(reader._buffer), writer.transport.is_closing()

    buffered, closing = run(loop, go)
    if __debug__:
        # feed_data()'s assert: data_received() failed, the transport closed.
        assert (buffered, closing) == (b"", True)
        assert [type(c.get("exception")) for c in contexts] == [AssertionError]
        assert contexts[0]["message"] == "Fatal error: protocol.data_received() call failed."
        assert str(contexts[0]["exception"]) == "feed_data after feed_eof"
    else:
        assert (buffered, closing, contexts) == (b"late", False, [])


def test_buffer_that_cannot_resize_fails_as_extend_does(loop):
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    async def go(reader, writer, peer):
        view = memoryview(reader._buffer)   # an export: no resize
        await send(loop, peer, b"data")
        view.release()
        return bytes(reader._buffer), writer.transport.is_closing()

    assert run(loop, go) == (b"", True)
    assert [type(c["exception"]) for c in contexts] == [BufferError]
    assert str(contexts[0]["exception"]) == (
        "Existing exports of data: object cannot be re-sized")


def test_reader_gone(loop):
    # The protocol holds its reader weakly: data for a reader nobody keeps
    # is dropped.
    async def go(reader, writer, peer):
        protocol = writer._protocol
        protocol._stream_reader_wr = None
        await send(loop, peer, b"nobody")
        return bytes(reader._buffer), writer.transport.is_closing()

    assert run(loop, go) == (b"", False)


def test_reader_collected(loop):
    # The weak reference died: the data goes nowhere, as in data_received().
    async def go(reader, writer, peer):
        other = asyncio.StreamReader(loop=loop)
        writer._protocol._stream_reader_wr = weakref.ref(other)
        del other
        gc.collect()
        await send(loop, peer, b"nobody")
        return bytes(reader._buffer), writer.transport.is_closing()

    assert run(loop, go) == (b"", False)


def test_reader_swapped(loop):
    async def go(reader, writer, peer):
        await send(loop, peer, b"first")
        other = asyncio.StreamReader(loop=loop)
        writer._protocol._stream_reader_wr = weakref.ref(other)
        await send(loop, peer, b"second")
        return bytes(reader._buffer), bytes(other._buffer)

    assert run(loop, go) == (b"first", b"second")


def test_instance_dict_replaced(loop):
    # A __dict__ assigned after the connection started is the one read.
    async def go(reader, writer, peer):
        await send(loop, peer, b"one")
        old = reader.__dict__
        reader.__dict__ = dict(old, _buffer=bytearray())
        reading = loop.create_task(reader.read(100))
        await asyncio.sleep(0.01)
        await send(loop, peer, b"two")
        return bytes(old["_buffer"]), await reading

    assert run(loop, go) == (b"one", b"two")


def test_missing_attribute_fails_as_feed_data_does(loop):
    # feed_data() extends the buffer and wakes the waiter before it reads
    # _limit: the read gets its data, then the transport closes.
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    async def go(reader, writer, peer):
        del reader._limit
        reading = loop.create_task(reader.read(100))
        await asyncio.sleep(0.01)
        await send(loop, peer, b"data")
        return await reading, writer.transport.is_closing()

    assert run(loop, go) == (b"data", True)
    assert [type(c["exception"]) for c in contexts] == [AttributeError]
    assert "_limit" in str(contexts[0]["exception"])


@pytest.mark.parametrize("limit,pauses", [
    (2 ** 70, False), (-(2 ** 70), True), (10.5, True), (21, False), (20, True)])
def test_limit_of_any_number(loop, limit, pauses):
    # 2 * limit compared with the 42 bytes buffered, as feed_data() does.
    async def go(reader, writer, peer):
        reader._limit = limit
        await send(loop, peer, b"x" * 42)
        return reader._paused, writer.transport.is_reading()

    assert run(loop, go) == (pauses, not pauses)


def test_paused_not_a_bool(loop):
    async def go(reader, writer, peer):
        reader._limit = 1
        reader._paused = 0      # falsy: feed_data() pauses and sets True
        await send(loop, peer, b"xyz")
        return reader._paused, writer.transport.is_reading()

    assert run(loop, go) == (True, False)


def test_class_setattr_sees_the_waiter_cleared(loop, monkeypatch):
    # A class that takes over attribute assignment: _wakeup_waiter()'s
    # `self._waiter = None` goes through it.
    seen = []

    def __setattr__(self, name, value):
        seen.append((name, value))
        object.__setattr__(self, name, value)

    async def go(reader, writer, peer):
        reading = loop.create_task(reader.read(100))
        await asyncio.sleep(0.01)
        monkeypatch.setattr(asyncio.StreamReader, "__setattr__", __setattr__,
                            raising=False)
        await send(loop, peer, b"data")
        monkeypatch.undo()
        return await reading

    assert run(loop, go) == b"data"
    # Once in _wakeup_waiter(), once as the read's _wait_for_data() ends.
    assert seen == [("_waiter", None), ("_waiter", None)]
