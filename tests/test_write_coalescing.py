"""The stream transport's writes within one iteration, on both loops.

minloop holds the writes the callbacks of an iteration's batch make to a
transport until the batch ends and sends them together (stream.pyx, "Write
coalescing"); asyncio sends each at once.  Everything a program can see must be asyncio's all the same: the
bytes and their order, get_write_buffer_size(), pause_writing() and
resume_writing(), errors reaching connection_lost(), and what close(),
abort() and write_eof() do with bytes written just before.  Only the number
of send calls differs, which the last tests count on a SOCK_SEQPACKET pair
(each send is one record there).
"""

import asyncio
import os
import select
import socket
import tempfile
import threading
import warnings

import pytest


class Recorder(asyncio.Protocol):
    def __init__(self):
        self.events = []
        self.data = bytearray()
        self.lost = None
        self.lost_exc = None

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.data += data

    def pause_writing(self):
        self.events.append("pause")

    def resume_writing(self):
        self.events.append("resume")

    def connection_lost(self, exc):
        self.lost = True
        self.lost_exc = exc


def tcp_pair():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        peer = socket.create_connection(listener.getsockname())
        ours, _ = listener.accept()
    return ours, peer


def accepted(loop, factory=Recorder, family=socket.AF_UNIX):
    """(transport, protocol, peer): a transport over one end of a connected
    pair (a socketpair, or TCP over loopback); the peer is the other end,
    blocking."""
    ours, peer = socket.socketpair() if family == socket.AF_UNIX else tcp_pair()
    tr, proto = loop.run_until_complete(loop.connect_accepted_socket(factory, ours))
    return tr, proto, peer


def in_one_callback(loop, fn):
    """Run fn() in one callback, then the loop until that callback is over."""
    done = loop.create_future()

    def step():
        try:
            done.set_result(fn())
        except BaseException as exc:
            done.set_exception(exc)

    loop.call_soon(step)
    return loop.run_until_complete(done)


def read_to_eof(peer, timeout=10):
    peer.settimeout(timeout)
    got = bytearray()
    while True:
        chunk = peer.recv(65536)
        if not chunk:
            return bytes(got)
        got += chunk


def read_now(peer):
    """What the peer can read without waiting (the bytes sent so far)."""
    got = bytearray()
    peer.setblocking(False)
    try:
        while select.select([peer], [], [], 0)[0]:
            chunk = peer.recv(65536)
            if not chunk:
                break
            got += chunk
    finally:
        peer.setblocking(True)
    return bytes(got)


def finish(loop, tr, peer):
    if not tr.is_closing():
        tr.close()
    peer.close()
    loop.run_until_complete(asyncio.sleep(0.01))


# --- order and content -------------------------------------------------------


def test_many_writes_in_one_callback_arrive_in_order(loop):
    tr, proto, peer = accepted(loop)
    reader = threading.Thread(target=lambda: got.append(read_to_eof(peer)))
    got = []
    expected = bytearray()

    def write_them():
        for i in range(1000):
            chunk = b"%05d;" % i
            kind = i % 5
            if kind == 0:
                tr.write(chunk)
            elif kind == 1:
                tr.write(bytearray(chunk))
            elif kind == 2:
                tr.write(memoryview(chunk))
            elif kind == 3:
                tr.writelines([chunk[:2], bytearray(chunk[2:])])
            else:
                tr.write(chunk * 50)   # larger ones too
                chunk = chunk * 50
            expected.extend(chunk)
        tr.close()

    reader.start()
    in_one_callback(loop, write_them)
    loop.run_until_complete(asyncio.sleep(0.05))
    reader.join(10)
    assert got == [bytes(expected)]
    assert proto.lost and proto.lost_exc is None
    peer.close()


def test_a_mutable_buffer_written_after_a_held_write_is_copied(loop):
    tr, proto, peer = accepted(loop)

    def write_them():
        tr.write(b"a")
        buf = bytearray(b"b")
        tr.write(buf)
        buf[:] = b"X"
        view = memoryview(bytearray(b"c"))
        tr.writelines([view])
        view[:] = b"Y"

    in_one_callback(loop, write_them)
    assert read_now(peer) == b"abc"
    finish(loop, tr, peer)


# --- nothing is held past the iteration -------------------------------------


def test_bytes_an_iteration_wrote_have_left_when_the_next_one_runs(loop):
    tr, proto, peer = accepted(loop)
    seen = []
    loop.call_soon(tr.write, b"first")
    loop.call_soon(tr.write, b" second")
    # Scheduled by a callback of the same iteration: runs in the next one.
    loop.call_soon(loop.call_soon, lambda: seen.append(read_now(peer)))
    loop.call_soon(tr.write, b" third")
    loop.run_until_complete(asyncio.sleep(0))
    loop.run_until_complete(asyncio.sleep(0))
    assert seen == [b"first second third"]
    assert read_now(peer) == b""
    finish(loop, tr, peer)


def test_each_iteration_sends_what_it_wrote(loop):
    tr, proto, peer = accepted(loop)
    seen = []

    def write(data, then):
        tr.write(data)
        if then:
            loop.call_soon(write, *then)   # the next iteration
        else:
            seen.append(read_now(peer))

    loop.call_soon(write, b"one", (b"two", (b"three", ())))
    loop.call_soon(lambda: seen.append(read_now(peer)))   # same iteration as "one"
    loop.run_until_complete(asyncio.sleep(0.01))
    assert b"".join(seen) + read_now(peer) == b"onetwothree"
    assert b"two" in seen[-1]   # left as its iteration ended
    finish(loop, tr, peer)


def test_what_carried_callbacks_wrote_has_left_when_the_polls_handlers_run(loop):
    # A server's answers are written by task steps that a read woke in the
    # last iteration; the handlers of this iteration's poll come after them
    # in the batch.  On minloop the answers leave before those run (as on
    # asyncio, which sent them at write()), not with the batch's end.
    tr, proto, peer = accepted(loop)
    r, w = socket.socketpair()
    r.setblocking(False)
    seen = []

    def on_readable():
        loop.remove_reader(r)
        seen.append(read_now(peer))

    def answer():
        tr.write(b"answer")

    def wake():
        loop.call_soon(answer)   # carried into the next iteration
        w.send(b"!")             # whose poll then finds r readable

    loop.add_reader(r, on_readable)
    loop.call_soon(wake)
    try:
        loop.run_until_complete(asyncio.sleep(0.05))
        assert seen == [b"answer"]
    finally:
        loop.remove_reader(r)
        r.close()
        w.close()
        finish(loop, tr, peer)


def test_bytes_written_before_run_until_complete_returns_are_sent(loop):
    tr, proto, peer = accepted(loop)

    async def write_and_return():
        tr.write(b"head ")
        tr.write(b"body")

    loop.run_until_complete(write_and_return())
    # The loop has stopped: nothing will run it again before this read.
    assert read_now(peer) == b"head body"
    finish(loop, tr, peer)


def test_write_while_the_loop_is_not_running_is_sent_at_once(loop):
    tr, proto, peer = accepted(loop)
    tr.write(b"outside")
    tr.write(b" the loop")
    assert read_now(peer) == b"outside the loop"
    finish(loop, tr, peer)


def test_write_from_call_soon_threadsafe(loop):
    tr, proto, peer = accepted(loop)
    got = []

    def other_thread():
        loop.call_soon_threadsafe(tr.write, b"from a thread")
        peer.settimeout(10)
        got.append(peer.recv(100))
        loop.call_soon_threadsafe(loop.stop)

    thread = threading.Thread(target=other_thread)
    thread.start()
    loop.run_forever()
    thread.join(10)
    assert got == [b"from a thread"]
    finish(loop, tr, peer)


def test_bytes_written_before_an_exception_leaves_the_loop_are_sent(loop):
    tr, proto, peer = accepted(loop)

    def write_and_raise():
        tr.write(b"sent first")
        raise KeyboardInterrupt   # leaves run_forever(), as asyncio's

    loop.call_soon(write_and_raise)
    with pytest.raises(KeyboardInterrupt):
        loop.run_forever()
    assert read_now(peer) == b"sent first"
    finish(loop, tr, peer)


def test_bytes_written_before_data_received_fails_are_sent(loop):
    class Fails(Recorder):
        def data_received(self, data):
            self.transport.write(b"answer")
            raise ValueError("boom")

    loop.set_exception_handler(lambda lp, ctx: None)
    tr, proto, peer = accepted(loop, Fails)
    peer.sendall(b"question")
    loop.run_until_complete(asyncio.sleep(0.05))
    assert proto.lost
    assert read_to_eof(peer) == b"answer"
    finish(loop, tr, peer)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()")
@pytest.mark.main_interpreter("fork")
def test_a_callback_that_forks_after_writing_sends_once(loop):
    tr, proto, peer = accepted(loop)

    def write_and_fork():
        tr.write(b"once")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)   # threads
            pid = os.fork()
        if pid == 0:   # the child: whatever it would send, now
            try:
                tr.get_write_buffer_size()
            finally:
                os._exit(0)
        return pid

    pid = in_one_callback(loop, write_and_fork)
    os.waitpid(pid, 0)
    assert read_now(peer) == b"once"
    finish(loop, tr, peer)


# --- get_write_buffer_size() and flow control --------------------------------


def test_get_write_buffer_size_after_a_small_write_is_zero(loop):
    tr, proto, peer = accepted(loop)
    sizes = in_one_callback(loop, lambda: (tr.write(b"x" * 100), tr.get_write_buffer_size()))
    assert sizes == (None, 0)
    assert read_now(peer) == b"x" * 100
    finish(loop, tr, peer)


def test_small_writes_past_the_high_water_mark_do_not_pause(loop):
    # The kernel takes every byte: asyncio's buffer never fills, so neither
    # may minloop's, however many writes one callback makes.
    tr, proto, peer = accepted(loop)
    tr.set_write_buffer_limits(high=4096)

    def write_them():
        for _ in range(32):
            tr.write(b"y" * 1024)
        return tr.get_write_buffer_size()

    assert in_one_callback(loop, write_them) == 0
    assert proto.events == []
    assert read_now(peer) == b"y" * 32 * 1024
    finish(loop, tr, peer)


def test_pause_and_resume_writing_where_asyncio_does(loop):
    tr, proto, peer = accepted(loop)
    tr.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    tr.set_write_buffer_limits(high=16 * 1024)
    total = 0

    def write_until_paused():
        nonlocal total
        while "pause" not in proto.events:
            tr.write(b"z" * 1024)
            total += 1024
            assert total < 64 * 1024 * 1024
        return tr.get_write_buffer_size()

    size = in_one_callback(loop, write_until_paused)
    assert size > 16 * 1024
    assert proto.events == ["pause"]
    reader = threading.Thread(target=lambda: got.append(read_to_eof(peer)))
    got = []
    reader.start()
    while "resume" not in proto.events:
        loop.run_until_complete(asyncio.sleep(0.01))
    assert tr.get_write_buffer_size() <= 4 * 1024
    tr.close()
    loop.run_until_complete(asyncio.sleep(0.05))
    reader.join(10)
    assert got == [b"z" * total]
    assert proto.events == ["pause", "resume"]
    peer.close()


def test_resume_writing_may_write_and_the_writer_goes(loop):
    class WritesOnResume(Recorder):
        def resume_writing(self):
            super().resume_writing()
            self.transport.write(b"after resume")

    tr, proto, peer = accepted(loop, WritesOnResume)
    tr.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    tr.set_write_buffer_limits(high=8192)

    def write_until_paused():
        while "pause" not in proto.events:
            tr.write(b"w" * 1024)

    in_one_callback(loop, write_until_paused)
    got = []
    reader = threading.Thread(target=lambda: got.append(read_to_eof(peer)))
    reader.start()
    while "resume" not in proto.events:
        loop.run_until_complete(asyncio.sleep(0.01))
    while tr.get_write_buffer_size():
        loop.run_until_complete(asyncio.sleep(0.01))
    loop.run_until_complete(asyncio.sleep(0.01))
    # Nothing left to send: the loop no longer watches for writability.
    assert "write=<idle, bufsize=0>" in repr(tr)
    tr.close()
    loop.run_until_complete(asyncio.sleep(0.05))
    reader.join(10)
    assert got[0].endswith(b"w" * 1024 + b"after resume")
    peer.close()


# --- errors ------------------------------------------------------------------


@pytest.mark.parametrize("then_close", [False, True])
def test_send_error_reaches_connection_lost_not_write(loop, then_close):
    tr, proto, peer = accepted(loop)
    peer.close()

    def write():
        tr.write(b"into a closed peer")
        if then_close:
            tr.close()

    in_one_callback(loop, write)   # write() raised nothing
    loop.run_until_complete(asyncio.sleep(0.01))
    assert proto.lost
    assert isinstance(proto.lost_exc, (BrokenPipeError, ConnectionResetError))
    assert tr.is_closing()


def test_a_later_callback_sees_the_failed_send_of_an_earlier_one(loop):
    # CPython's test_sslproto test_connection_lost_when_busy in small: a
    # StreamWriter's drain() asks is_closing() to learn of the failure.
    tr, proto, peer = accepted(loop)
    peer.close()
    seen = []
    done = loop.create_future()
    loop.call_soon(tr.write, b"into a closed peer")
    loop.call_soon(lambda: seen.append(tr.is_closing()))   # same iteration
    loop.call_soon(done.set_result, None)
    loop.run_until_complete(done)
    assert seen == [True]
    loop.run_until_complete(asyncio.sleep(0.01))
    assert isinstance(proto.lost_exc, (BrokenPipeError, ConnectionResetError))


def test_is_closing_keeps_the_running_callbacks_writes_held(loop, loop_kind):
    tr, proto, peer = seqpacket_transport(loop)

    def respond():
        tr.write(b"head ")
        assert not tr.is_closing()
        tr.write(b"body")

    in_one_callback(loop, respond)
    got = records(peer)
    assert b"".join(got) == b"head body"
    assert len(got) == (1 if loop_kind == "minloop" else 2)
    finish(loop, tr, peer)


# --- close(), abort(), write_eof() with bytes just written -------------------


def test_close_after_writes_sends_them_then_eof(loop):
    tr, proto, peer = accepted(loop)
    in_one_callback(loop, lambda: (tr.write(b"last "), tr.write(b"words"), tr.close()))
    loop.run_until_complete(asyncio.sleep(0.01))
    assert read_to_eof(peer) == b"last words"
    assert proto.lost and proto.lost_exc is None
    peer.close()


def test_abort_after_writes_sends_what_the_kernel_takes(loop):
    # asyncio sent them at write(): abort() closes a socket that has them.
    tr, proto, peer = accepted(loop)
    in_one_callback(loop, lambda: (tr.write(b"sent "), tr.write(b"already"), tr.abort()))
    loop.run_until_complete(asyncio.sleep(0.01))
    assert read_to_eof(peer) == b"sent already"
    assert proto.lost and proto.lost_exc is None
    peer.close()


def test_write_eof_after_writes_sends_them_then_eof(loop):
    tr, proto, peer = accepted(loop)
    in_one_callback(loop, lambda: (tr.write(b"one "), tr.write(b"two"), tr.write_eof()))
    assert read_to_eof(peer) == b"one two"
    peer.sendall(b"still reading")
    loop.run_until_complete(asyncio.sleep(0.05))
    assert bytes(proto.data) == b"still reading"
    finish(loop, tr, peer)


def test_sendfile_after_writes_keeps_the_order(loop):
    tr, proto, peer = accepted(loop, family=socket.AF_INET)
    got = []
    reader = threading.Thread(target=lambda: got.append(read_to_eof(peer)))
    reader.start()
    with tempfile.TemporaryFile() as f:
        f.write(b"file contents")
        f.seek(0)

        async def send():
            tr.write(b"head:")
            await loop.sendfile(tr, f)
            tr.close()

        loop.run_until_complete(send())
    loop.run_until_complete(asyncio.sleep(0.05))
    reader.join(10)
    assert got == [b"head:file contents"]
    peer.close()


# --- how many sends ----------------------------------------------------------


def seqpacket_transport(loop):
    ours, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    proto = Recorder()
    waiter = loop.create_future()
    tr = loop._make_socket_transport(ours, proto, waiter)
    loop.run_until_complete(waiter)
    return tr, proto, peer


def records(peer):
    got = []
    peer.setblocking(False)
    while select.select([peer], [], [], 0)[0]:
        got.append(peer.recv(65536))
    return got


def test_writes_of_one_callback_leave_in_one_send_on_minloop(loop, loop_kind):
    tr, proto, peer = seqpacket_transport(loop)

    def respond():
        tr.write(b"HTTP/1.1 200 OK\r\n\r\n")   # head and body apart, as ASGI servers do
        tr.write(b"body")
        tr.writelines([b"-", b"more"])

    in_one_callback(loop, respond)
    if loop_kind == "minloop":
        assert records(peer) == [b"HTTP/1.1 200 OK\r\n\r\nbody-more"]
    else:
        # asyncio: a send per write(), one sendmsg() for writelines() from 3.12
        # (before, the joined bytes in one write()).
        assert b"".join(got := records(peer)) == b"HTTP/1.1 200 OK\r\n\r\nbody-more"
        assert len(got) == 3
    in_one_callback(loop, lambda: tr.write(b"next callback"))
    assert records(peer) == [b"next callback"]
    finish(loop, tr, peer)


def test_writes_of_one_iteration_leave_in_one_send_on_minloop(loop, loop_kind):
    tr, proto, peer = seqpacket_transport(loop)
    done = loop.create_future()
    loop.call_soon(tr.write, b"first task's response ")
    loop.call_soon(tr.write, b"second task's response")
    loop.call_soon(done.set_result, None)
    loop.run_until_complete(done)
    got = records(peer)
    assert b"".join(got) == b"first task's response second task's response"
    assert len(got) == (1 if loop_kind == "minloop" else 2)
    finish(loop, tr, peer)


def test_get_write_buffer_size_sends_what_is_held(loop, loop_kind):
    tr, proto, peer = seqpacket_transport(loop)
    in_one_callback(loop, lambda: (tr.write(b"a"), tr.get_write_buffer_size(), tr.write(b"b")))
    assert records(peer) == [b"a", b"b"]
    finish(loop, tr, peer)


def test_a_large_write_leaves_as_its_callback_returns(loop):
    # Held to the batch's end only while small: a large write (16 KiB and
    # more) is sent as the callback that wrote returns, so a later callback
    # of the same batch finds it at the peer (as on asyncio, which sends at
    # write()); a small one waits for the batch's end on minloop.
    tr, proto, peer = accepted(loop)
    seen = {}
    done = loop.create_future()
    big = b"x" * 20000
    loop.call_soon(tr.write, big)
    loop.call_soon(lambda: seen.setdefault("after big", read_now(peer)))
    loop.call_soon(done.set_result, None)
    loop.run_until_complete(done)
    assert seen["after big"] == big
    finish(loop, tr, peer)


def test_a_large_write_sends_what_earlier_callbacks_hold_first(loop):
    tr, proto, peer = accepted(loop)
    seen = {}
    done = loop.create_future()
    big = b"y" * 20000
    loop.call_soon(tr.write, b"small first ")
    loop.call_soon(tr.write, big)
    loop.call_soon(lambda: seen.setdefault("after big", read_now(peer)))
    loop.call_soon(done.set_result, None)
    loop.run_until_complete(done)
    assert seen["after big"] == b"small first " + big
    finish(loop, tr, peer)
