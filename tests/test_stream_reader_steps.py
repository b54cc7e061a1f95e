"""readline(), readexactly() and read(n) of asyncio's StreamReader on the
socket transport, as asyncio's loop runs them.

On minloop the transport gives asyncio's own reader a subclass whose three
coroutines run compiled steps (minloop/stream_reader.pyx,
stream_reader_class.py).  These tests hold it to what asyncio's code does,
on both loops: the results and the reader's state at each point, the
exceptions with their messages and context, and asyncio's own methods (or a
replacement of one) called whenever the steps must step aside.
"""

import asyncio
import socket
import sys
import sysconfig

import pytest

# run(loop, go): go(reader, writer, peer) over a socketpair, the reader made
# through create_connection() (so minloop's transport adopts it).
from test_stream_reader_feed import run, send


def test_reader_stays_an_asyncio_stream_reader(loop):
    async def go(reader, writer, peer):
        return isinstance(reader, asyncio.StreamReader), repr(reader).startswith("<StreamReader")

    assert run(loop, go) == (True, True)


def _stepped(loop):
    # Whether readers can run the steps: minloop's loop, with the GIL.
    return (type(loop).__module__.startswith("minloop")
            and not sysconfig.get_config_var("Py_GIL_DISABLED"))


def test_which_coroutines_have_steps(loop):
    # What the rest of this file reaches: on minloop before 3.15 a reader
    # made as asyncio's class is given the subclass, whose readline(),
    # readexactly() and read(n) run the steps.  Not on 3.15, where that
    # reassigned class costs asyncio's own methods more than the steps save
    # (py_compat.h, MINLOOP_STEPS_STREAM_READS): the reader keeps asyncio's
    # class (start_server()'s are made as the subclass: tested below).
    async def go(reader, writer, peer):
        return type(reader) is asyncio.StreamReader, [
            getattr(type(reader), name) is not getattr(asyncio.StreamReader, name)
            for name in ("readline", "readexactly", "read")]

    stepped = _stepped(loop) and sys.version_info < (3, 15)
    assert run(loop, go) == (not stepped, [stepped] * 3)


def test_readline_over_split_data_then_eof(loop):
    async def go(reader, writer, peer):
        sender = loop.create_task(send(loop, peer, b"ab", b"c\nde", b"f\n\n", b"tail"))
        got = [await reader.readline() for _ in range(3)]
        await sender
        peer.shutdown(socket.SHUT_WR)
        got.append(await reader.readline())   # the partial line at EOF
        got.append(await reader.readline())   # then nothing
        return got, bytes(reader._buffer), reader._waiter

    assert run(loop, go) == ([b"abc\n", b"def\n", b"\n", b"tail", b""], b"", None)


def test_readexactly_and_read_over_split_data(loop):
    async def go(reader, writer, peer):
        sender = loop.create_task(send(loop, peer, b"12", b"345", b"6789"))
        exact = await reader.readexactly(4)
        some = await reader.read(100)
        await sender
        rest = await reader.read(100)
        peer.shutdown(socket.SHUT_WR)
        with pytest.raises(asyncio.IncompleteReadError) as e:
            await reader.readexactly(1)
        zero = await reader.readexactly(0), await reader.read(0)
        return exact, some + rest, e.value.partial, e.value.expected, zero, await reader.read(5)

    assert run(loop, go) == (b"1234", b"56789", b"", 1, (b"", b""), b"")


def test_read_of_more_than_fits_in_an_index(loop):
    async def go(reader, writer, peer):
        await send(loop, peer, b"abc")
        return await reader.read(2 ** 70)

    assert run(loop, go) == b"abc"


def test_readexactly_eof_gives_what_came(loop):
    async def go(reader, writer, peer):
        await send(loop, peer, b"abc")
        peer.shutdown(socket.SHUT_WR)
        with pytest.raises(asyncio.IncompleteReadError) as e:
            await reader.readexactly(10)
        return e.value.partial, e.value.expected, bytes(reader._buffer)

    assert run(loop, go) == (b"abc", 10, b"")


def test_readexactly_negative(loop):
    async def go(reader, writer, peer):
        with pytest.raises(ValueError, match="readexactly size can not be less than zero"):
            await reader.readexactly(-1)
        return True

    assert run(loop, go)


def test_readline_over_the_limit_without_a_newline(loop):
    async def go(reader, writer, peer):
        await send(loop, peer, b"x" * 30)
        with pytest.raises(ValueError) as e:
            await reader.readline()
        context = e.value.__context__
        return (str(e.value), type(context), context.consumed, bytes(reader._buffer))

    assert run(loop, go, limit=16) == (
        "Separator is not found, and chunk exceed the limit",
        asyncio.LimitOverrunError, 30, b"")


def test_readline_over_the_limit_with_a_newline(loop):
    async def go(reader, writer, peer):
        await send(loop, peer, b"y" * 20 + b"\nnext\n")
        with pytest.raises(ValueError) as e:
            await reader.readline()
        return str(e.value), e.value.__context__.consumed, await reader.readline()

    assert run(loop, go, limit=16) == (
        "Separator is found, but chunk is longer than limit", 20, b"next\n")


def test_limit_overrun_resumes_reading(loop):
    async def go(reader, writer, peer):
        await send(loop, peer, b"z" * 200)
        for _ in range(50):
            if reader._paused:
                break
            await asyncio.sleep(0.01)
        paused = reader._paused
        with pytest.raises(ValueError):
            await reader.readline()
        return paused, reader._paused

    assert run(loop, go, limit=16) == (True, False)


def test_exception_set_while_waiting(loop):
    async def go(reader, writer, peer):
        reading = loop.create_task(reader.readline())
        await asyncio.sleep(0.01)
        reader.set_exception(ConnectionResetError("gone"))
        with pytest.raises(ConnectionResetError, match="gone"):
            await reading
        return reader._waiter

    assert run(loop, go) is None


def test_incomplete_read_set_while_waiting_is_a_partial_line(loop):
    # readline() catches what its wait raises, as it catches readuntil()'s.
    async def go(reader, writer, peer):
        reading = loop.create_task(reader.readline())
        await asyncio.sleep(0.01)
        reader.set_exception(asyncio.IncompleteReadError(b"part", None))
        return await reading

    assert run(loop, go) == b"part"


def test_line_fed_before_an_exception_is_still_returned(loop):
    # asyncio looks at _exception only as readline() starts: a line that
    # woke the reader is returned though an exception came after it.
    async def go(reader, writer, peer):
        reading = loop.create_task(reader.readline())
        await asyncio.sleep(0.01)
        reader.feed_data(b"line\n")
        reader.set_exception(ConnectionResetError("later"))
        line = await reading
        with pytest.raises(ConnectionResetError):
            await reader.readline()
        return line

    assert run(loop, go) == b"line\n"


@pytest.mark.parametrize("method, args, name", [
    ("readline", (), "readuntil"), ("readexactly", (3,), "readexactly"),
    ("read", (3,), "read")])
def test_second_waiter_is_refused(loop, method, args, name):
    async def go(reader, writer, peer):
        first = loop.create_task(getattr(reader, method)(*args))
        await asyncio.sleep(0.01)
        with pytest.raises(RuntimeError) as e:
            await getattr(reader, method)(*args)
        await send(loop, peer, b"abc\n")
        return str(e.value), await first

    message, got = run(loop, go)
    assert message == (f"{name}() called while another coroutine is already "
                       "waiting for incoming data")
    assert got == (b"abc\n" if method == "readline" else b"abc")


def test_cancelled_read_clears_the_waiter(loop):
    async def go(reader, writer, peer):
        reading = loop.create_task(reader.readexactly(4))
        await asyncio.sleep(0.01)
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        waiter = reader._waiter
        await send(loop, peer, b"data")
        return waiter, await reader.readexactly(4)

    assert run(loop, go) == (None, b"data")


@pytest.mark.parametrize("name", ["readline", "readuntil", "readexactly", "read",
                                  "_wait_for_data", "_maybe_resume_transport"])
def test_class_patch_is_called(loop, monkeypatch, name):
    calls = []
    original = getattr(asyncio.StreamReader, name)

    if name in ("_maybe_resume_transport",):
        def replacement(self, *args):
            calls.append(name)
            return original(self, *args)
    else:
        async def replacement(self, *args):
            calls.append(name)
            return await original(self, *args)

    async def go(reader, writer, peer):
        monkeypatch.setattr(asyncio.StreamReader, name, replacement)
        sender = loop.create_task(send(loop, peer, b"one\n", b"two\n", b"3"))
        got = [await reader.readline(), await reader.readexactly(4), await reader.read(1)]
        await sender
        monkeypatch.undo()
        return got

    assert run(loop, go) == [b"one\n", b"two\n", b"3"]
    assert name in calls


@pytest.mark.parametrize("name", ["readuntil", "_wait_for_data", "_maybe_resume_transport"])
def test_instance_override_is_called(loop, name):
    calls = []

    async def go(reader, writer, peer):
        original = getattr(reader, name)
        if name == "_maybe_resume_transport":
            def replacement(*args):
                calls.append(name)
                return original(*args)
        else:
            async def replacement(*args):
                calls.append(name)
                return await original(*args)
        setattr(reader, name, replacement)
        sender = loop.create_task(send(loop, peer, b"one\n", b"two"))
        got = [await reader.readline(), await reader.readexactly(3)]
        await sender
        return got

    assert run(loop, go) == [b"one\n", b"two"]
    assert name in calls


def test_read_to_eof(loop):
    async def go(reader, writer, peer):
        sender = loop.create_task(send(loop, peer, b"a" * 1000, b"b" * 1000))
        await sender
        peer.shutdown(socket.SHUT_WR)
        return await reader.read()

    assert run(loop, go) == b"a" * 1000 + b"b" * 1000


def test_start_server_streams(loop):
    async def main():
        async def handle(reader, writer):
            while line := await reader.readline():
                writer.write(line.upper())
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        got = []
        for word in (b"alpha\n", b"beta\n"):
            writer.write(word)
            got.append(await reader.readline())
        writer.close()
        await writer.wait_closed()
        server.close()
        await server.wait_closed()
        return got

    assert loop.run_until_complete(asyncio.wait_for(main(), 5)) == [b"ALPHA\n", b"BETA\n"]


def _served_reader(loop, handle_reader, *, unix_path=None, lines=(b"one\n",)):
    """Start a server (TCP, or Unix at unix_path), send it lines, and return
    what handle_reader(reader) returned in the connection's handler."""
    async def main():
        results = []

        async def handle(reader, writer):
            results.append(await handle_reader(reader))
            writer.close()

        if unix_path:
            server = await asyncio.start_unix_server(handle, unix_path)
            reader, writer = await asyncio.open_unix_connection(unix_path)
        else:
            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for line in lines:
            writer.write(line)
        await reader.read()      # the handler's close
        writer.close()
        await writer.wait_closed()
        server.close()
        await server.wait_closed()
        return results[0]

    return loop.run_until_complete(asyncio.wait_for(main(), 5))


@pytest.mark.parametrize("unix", [False, True])
def test_start_server_readers_are_made_with_steps(loop, unix, tmp_path):
    # start_server()'s readers are made as the subclass (minloop's
    # _start_serving()), on 3.15 too, where readline() alone has steps.
    async def handle_reader(reader):
        return (type(reader) is asyncio.StreamReader, isinstance(reader, asyncio.StreamReader),
                [getattr(type(reader), name) is not getattr(asyncio.StreamReader, name)
                 for name in ("readline", "readexactly", "read")],
                await reader.readline(), await reader.readexactly(2), await reader.read(10))

    stepped = _stepped(loop)
    reads = stepped and sys.version_info < (3, 15)
    path = str(tmp_path / "s") if unix else None
    assert _served_reader(loop, handle_reader, unix_path=path, lines=(b"ab\n", b"cdef")) == (
        not stepped, True, [stepped, reads, reads], b"ab\n", b"cd", b"ef")


def test_start_server_uses_a_replaced_stream_reader_class(loop, monkeypatch):
    # A program that put its own class in asyncio.streams gets it, as asyncio
    # gives it (the loop must not make the reader its own way then).
    class Mine(asyncio.StreamReader):
        pass

    monkeypatch.setattr(asyncio.streams, "StreamReader", Mine)

    async def handle_reader(reader):
        return type(reader) is Mine, await reader.readline()

    assert _served_reader(loop, handle_reader) == (True, b"one\n")

