"""minloop in sub-interpreters with their own GIL (concurrent.interpreters,
Python 3.14+): it loads there, runs what asyncio's loop runs there, refuses
what asyncio refuses there, and no interpreter sees another's objects.

Each sub-interpreter loads a private copy of minloop's compiled modules
(minloop/_subinterpreters.py); these tests run from the main interpreter,
which has loaded the installed files.  scripts/pytest-in-interpreter runs
the rest of the suite inside one.
"""
import os
import sys
import textwrap
import threading

import pytest

pytestmark = pytest.mark.main_interpreter("nested")

interpreters = pytest.importorskip("concurrent.interpreters")

HERE = os.path.dirname(os.path.abspath(__file__))


def run_in(interp, code, **names):
    """Runs `code` in `interp` (this process's sys.path, `names` bound);
    returns what it put in RESULT."""
    result = interpreters.create_queue()
    interp.prepare_main(RESULT=result, PATH=tuple(sys.path), **names)
    interp.exec("import sys\nsys.path[:] = list(PATH)\n" + textwrap.dedent(code))
    return result.get(timeout=60)


def run_at_once(count, code, names_of):
    """Runs `code` in `count` new interpreters at once, each from a thread
    of its own, with names_of(i) bound; their results, in order."""
    its = [interpreters.create() for _ in range(count)]
    results = [None] * count

    def run(i):
        results[i] = run_in(its[i], code, **names_of(i))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for it in its:
            it.close()
    return results


@pytest.fixture
def interp():
    it = interpreters.create()
    yield it
    it.close()


def test_a_sub_interpreter_runs_minloop_from_its_own_copy(interp):
    import minloop.loop
    origin, file, loop_type, value = run_in(interp, """
        import asyncio, minloop, minloop.loop
        async def main():
            await asyncio.sleep(0.001)
            return type(asyncio.get_running_loop()).__module__
        RESULT.put((minloop.loop.__spec__.origin, minloop.loop.__file__,
                    minloop.run(main()), 42))
    """)
    assert value == 42
    assert loop_type == "minloop.base_events"
    # The copy is loaded, the original is named.
    assert file == minloop.loop.__file__
    assert origin != file


def test_the_installed_files_refuse_a_second_interpreter(interp):
    """Past minloop's finder, a sub-interpreter that loads the main
    interpreter's files gets an ImportError, never its objects."""
    import minloop._handle_bases
    import minloop.handles
    errors = run_in(interp, """
        import importlib.util
        errors = []
        for name, path in PATHS:
            spec = importlib.util.spec_from_file_location(name, path)
            try:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            except ImportError as exc:
                errors.append(str(exc))
            else:
                errors.append(None)
        RESULT.put(tuple(errors))
    """, PATHS=(("minloop.handles", minloop.handles.__file__),
                ("minloop._handle_bases", minloop._handle_bases.__file__)))
    assert "Interpreter change detected" in errors[0]
    assert "belongs to interpreter 0" in errors[1]


def test_interpreter_pool_tasks_each_run_a_loop():
    from concurrent.futures import InterpreterPoolExecutor
    with InterpreterPoolExecutor(2, initializer=_set_path, initargs=(tuple(sys.path),)) as pool:
        results = list(pool.map(_loop_task, range(6)))
    assert results == [(n * 2, "Loop") for n in range(6)]


def _set_path(path):
    import sys
    sys.path[:] = list(path)


def _loop_task(n):
    import asyncio
    import minloop

    async def main():
        await asyncio.sleep(0.001)
        return n * 2, type(asyncio.get_running_loop()).__name__
    return minloop.run(main())


def test_tcp_echo_subprocess_and_tls_in_a_sub_interpreter(interp):
    echoed, child, tls = run_in(interp, """
        import asyncio, ssl, sys, minloop
        sys.path.insert(0, HERE)
        from test_tls import client_context, server_context, HOSTNAME

        async def echo(reader, writer):
            writer.write(await reader.read(100))
            await writer.drain()
            writer.close()

        async def tcp():
            server = await asyncio.start_server(echo, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"ping")
            data = await reader.read(100)
            writer.close()
            server.close()
            await server.wait_closed()
            return data

        async def child():
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", "import sys; print(sys.stdin.read().upper())",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
            out, _ = await proc.communicate(b"minloop")
            return out.strip(), proc.returncode

        async def tls():
            server = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=server_context())
            port = server.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client_context(), server_hostname=HOSTNAME)
            writer.write(b"secret")
            data = await reader.read(100)
            version = writer.get_extra_info("ssl_object").version()
            writer.close()
            server.close()
            await server.wait_closed()
            return data, version

        async def main():
            assert type(asyncio.get_running_loop()).__module__ == "minloop.base_events"
            return await tcp(), await child(), await tls()
        RESULT.put(minloop.run(main()))
    """, HERE=HERE)
    assert echoed == b"ping"
    assert child == (b"MINLOOP", 0)
    assert tls[0] == b"secret" and tls[1].startswith("TLS")


SIGNAL_HANDLER = """
    import asyncio, signal, minloop
    async def main():
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, print)
        except Exception as exc:
            return type(exc).__name__, str(exc)
        return None
    RESULT.put(minloop.run(main()) if USE_MINLOOP else asyncio.run(main()))
"""


def test_add_signal_handler_is_refused_as_asyncio_refuses_it():
    """Signal handlers are the main interpreter's (set_wakeup_fd): asyncio's
    loop raises RuntimeError there, and so does minloop's."""
    refusals = []
    for use_minloop in (False, True):
        it = interpreters.create()
        try:
            refusals.append(run_in(it, SIGNAL_HANDLER, USE_MINLOOP=use_minloop))
        finally:
            it.close()
    theirs, ours = refusals
    assert theirs is not None and theirs[0] == "RuntimeError"
    assert ours == theirs


ISOLATION = """
    import asyncio, contextvars, gc, threading, minloop, minloop.loop
    from asyncio import events
    var = contextvars.ContextVar("var")

    async def main():
        loop = asyncio.get_running_loop()
        seen = []
        # Fill and drain the handle free lists, the context caches and the
        # soon method's state over and over, while the other interpreter
        # does the same: any object or block shared would be freed by the
        # wrong allocator (PYTHONMALLOC=debug catches it) or seen here.
        for round in range(ROUNDS):
            var.set(round)
            fut = loop.create_future()
            count = 0
            def step(token):
                nonlocal count
                count += 1
                assert var.get() == round
                if count < 2000:
                    loop.call_soon(step, token)
                else:
                    fut.set_result(token)
            handles = [loop.call_soon(step, object()) for _ in range(50)]
            handles += [loop.call_later(1e-6, step, object()) for _ in range(50)]
            # The thread-safe handles and their monitor, from another thread.
            producer = threading.Thread(target=lambda: handles.extend(
                loop.call_soon_threadsafe(len, ()) for _ in range(200)))
            producer.start()
            await fut
            await asyncio.to_thread(producer.join)
            for h in handles:
                h.cancel()
            seen.append(all(isinstance(h, events.Handle) for h in handles))
            gc.collect()
        task = asyncio.current_task()
        return (all(seen), isinstance(task, asyncio.Task),
                type(loop.create_future()) is asyncio.Future,
                type(loop.call_soon).__module__)
    RESULT.put(minloop.run(main()))
"""


def test_two_interpreters_at_once_each_see_only_their_own_objects():
    """The state the compiled modules keep in C statics (free lists, the
    cached asyncio classes, the context caches, the call_soon method type,
    the thread-safe handles' monitor, the poller's probed features) is each
    interpreter's: two loops churn it at once and each finds only its own
    interpreter's asyncio classes."""
    results = run_at_once(2, ISOLATION, lambda i: dict(ROUNDS=20))
    for result in results:
        assert result is not None
        assert result[:3] == (True, True, True)


def test_the_stall_watchdog_runs_and_stops_in_a_sub_interpreter(interp):
    """Daemon threads are refused in an isolated interpreter: the watchdog
    is a plain thread there, and the interpreter's exit stops it."""
    reported = run_in(interp, """
        import asyncio, time, minloop
        reports = []
        async def main():
            loop = asyncio.get_running_loop()
            loop.set_stall_handler(reports.append, 0.05)
            await asyncio.sleep(0)   # the watch sees callbacks that start after it
            time.sleep(0.2)
            await asyncio.sleep(0.05)
        minloop.run(main())
        RESULT.put(len(reports))
    """)
    assert reported >= 1


def test_an_armed_stall_watch_does_not_keep_a_sub_interpreter_alive():
    """A loop left open with its watch armed: the interpreter's exit stops
    the (non-daemon) watchdog instead of waiting for it forever."""
    it = interpreters.create()
    assert run_in(it, """
        import asyncio, minloop, threading
        loop = minloop.new_event_loop()
        loop.set_stall_handler(print, 0.05)
        loop.run_until_complete(asyncio.sleep(0.01))
        RESULT.put([t.name for t in threading.enumerate()].count("minloop-stall-watchdog"))
    """) == 1
    # Closed in another thread: were the watchdog not stopped, close()
    # would wait for it forever.
    closer = threading.Thread(target=it.close, daemon=True)
    closer.start()
    closer.join(10)
    assert not closer.is_alive(), "the interpreter's exit waits for the watchdog"


TRAFFIC = """
    import asyncio, hashlib, random, sys, minloop

    class Echo(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport
        def data_received(self, data):
            self.transport.write(data)

    class UdpEcho(asyncio.DatagramProtocol):
        def connection_made(self, transport):
            self.transport = transport
        def datagram_received(self, data, addr):
            self.transport.sendto(data, addr)

    async def client(port, seed):
        rng = random.Random(seed)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sent = hashlib.sha256()
        got = hashlib.sha256()
        for _ in range(MESSAGES):
            data = rng.randbytes(rng.randrange(1, 64 * 1024))
            sent.update(data)
            writer.write(data)
            got.update(await reader.readexactly(len(data)))
        writer.close()
        await writer.wait_closed()
        return sent.digest() == got.digest()

    async def udp(port):
        loop = asyncio.get_running_loop()
        answers = asyncio.Queue()
        class Client(asyncio.DatagramProtocol):
            def datagram_received(self, data, addr):
                answers.put_nowait(data)
        transport, _ = await loop.create_datagram_endpoint(Client, remote_addr=("127.0.0.1", port))
        ok = True
        for i in range(50):
            transport.sendto(b"%d" % i)
            ok = ok and await asyncio.wait_for(answers.get(), 5) == b"%d" % i
        transport.close()
        return ok

    async def child():
        # A spawn while the other interpreters run loops (uvloop#650 crashes).
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "print(6 * 7)", stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        return out.strip() == b"42" and proc.returncode == 0

    async def main():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        udp_server, _ = await loop.create_datagram_endpoint(UdpEcho, local_addr=("127.0.0.1", 0))
        udp_port = udp_server.get_extra_info("sockname")[1]
        results = await asyncio.gather(*(client(port, SEED * 100 + i) for i in range(CONNECTIONS)),
                                       udp(udp_port), child())
        udp_server.close()
        server.close()
        await server.wait_closed()
        return all(results)
    RESULT.put(minloop.run(main()))
"""


def test_several_interpreters_serve_traffic_at_once():
    """Three interpreters, each a TCP and a UDP echo with its clients on its
    own loop and a child process, all at once: every byte comes back, in
    order, and every child's output (the .ci/run stage runs this under ASan
    too)."""
    results = run_at_once(3, TRAFFIC, lambda i: dict(SEED=i, CONNECTIONS=8, MESSAGES=40))
    assert results == [True] * 3


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="top reads /proc")
def test_top_shows_the_loops_of_every_interpreter_labelled():
    """`python -m minloop top` sees a sub-interpreter's loop beside the main
    interpreter's, labelled INTERPRETER:LOOP (each interpreter numbers its
    own loops)."""
    import minloop
    from minloop import top
    main_loop = minloop.new_event_loop()
    it = interpreters.create()
    stop = interpreters.create_queue()
    result = interpreters.create_queue()
    it.prepare_main(STOP=stop, RESULT=result, PATH=tuple(sys.path))
    runner = threading.Thread(target=it.exec, args=(textwrap.dedent("""
        import sys
        sys.path[:] = list(PATH)
        import asyncio, minloop
        async def main():
            RESULT.put("running")
            while True:
                try:
                    STOP.get_nowait()
                    return
                except Exception:
                    await asyncio.sleep(0.01)
        minloop.run(main())
    """),))
    runner.start()
    try:
        assert result.get(timeout=30) == "running"
        view = top.Top(os.getpid())
        view.scan()
        labels = [row["loop"] for row in view.rows()]
    finally:
        stop.put(None)
        runner.join(30)
        it.close()
        main_loop.close()
    assert f"{it.id}:1" in labels
    assert any(":" not in label for label in labels)   # the main interpreter's
