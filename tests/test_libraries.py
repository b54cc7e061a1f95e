"""Real libraries run unchanged on minloop: asyncio streams, aiohttp, uvicorn,
websockets, redis-py and asyncpg.

Every test runs on asyncio's loop and on minloop (the ``loop`` fixture of
conftest.py); asyncio's result is the specification.  A test skips, with the
reason, when its library is not installed (``pip install -e .[compat]``) or
its service cannot be had: redis-server and PostgreSQL are started once per
session in a temporary directory (as the ``postgres`` user when running as
root, since initdb refuses root), unless scripts/start-test-services already
started them and exported MINLOOP_TEST_REDIS_URL / MINLOOP_TEST_PG_DSN.

Deselect the module with ``-m 'not libraries'``.
"""

import asyncio
import contextlib
import glob
import hashlib
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import DAEMON_THREADS

pytestmark = pytest.mark.libraries

# Each test's coroutine must finish within this; the pytest-timeout limit
# (conftest.DEFAULT_TIMEOUT) is the backstop for a hung loop.
RUN_TIMEOUT = 10

ONE_MB = bytes(range(256)) * 4096


def run(loop, coro, timeout=RUN_TIMEOUT):
    """Run ``coro`` to completion on ``loop``, failing after ``timeout`` s.

    Anything reported to the loop's exception handler meanwhile (an
    exception in a callback, an unclosed transport, a task exception never
    retrieved) fails the test too: a library that runs "unchanged" must not
    report what it does not report on asyncio's loop.
    """
    reported = []
    if os.environ.get("MINLOOP_COMPAT_DEBUG"):
        loop.set_debug(True)
    loop.set_exception_handler(lambda lp, context: reported.append(context))
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, timeout))
    finally:
        # Let callbacks the coroutine scheduled last (connection_lost, ...) run.
        loop.run_until_complete(asyncio.sleep(0.01))
        loop.set_exception_handler(None)
        assert not reported, f"the loop's exception handler was called: {reported}"


@pytest.fixture(autouse=True)
def no_logged_errors(caplog):
    """Fail a test during which any library logged an error."""
    yield
    errors = [r for r in caplog.get_records("call") if r.levelno >= logging.ERROR]
    assert not errors, "errors were logged: " + "; ".join(
        f"{r.name}: {r.getMessage()}" for r in errors)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(host, port, deadline):
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


# ---------------------------------------------------------------------------
# Services: redis-server and a throwaway PostgreSQL cluster

@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A redis:// URL (and unix socket path) of a running redis-server, or skip."""
    # No server is started for tests that would skip anyway.
    pytest.importorskip("redis.asyncio")
    url = os.environ.get("MINLOOP_TEST_REDIS_URL")
    if url:
        yield url, os.environ.get("MINLOOP_TEST_REDIS_SOCKET")
        return
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server) "
                    "and MINLOOP_TEST_REDIS_URL is not set")
    tmp = tempfile.mkdtemp(prefix="minloop-redis-")
    port = free_port()
    sock_path = os.path.join(tmp, "redis.sock")
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1",
         "--unixsocket", sock_path, "--unixsocketperm", "700",
         "--save", "", "--appendonly", "no", "--dir", tmp],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_for_port("127.0.0.1", port, time.monotonic() + 10):
            pytest.skip("redis-server did not start listening within 10 s")
        while not os.path.exists(sock_path):
            time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0", sock_path
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


def _pg_bin(name):
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


@pytest.fixture(scope="session")
def pg_dsn():
    """A postgresql:// DSN of a running server (trust auth), or skip."""
    # No cluster is made for tests that would skip anyway (initdb is slow,
    # and under a sanitizer's LD_PRELOAD slower still).
    pytest.importorskip("asyncpg")
    dsn = os.environ.get("MINLOOP_TEST_PG_DSN")
    if dsn:
        yield dsn
        return
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("PostgreSQL (initdb, pg_ctl) is not installed "
                    "and MINLOOP_TEST_PG_DSN is not set")
    prefix = []
    tmp = tempfile.mkdtemp(prefix="minloop-pg-")
    if os.geteuid() == 0:
        # initdb and postgres refuse to run as root.
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(tmp, ignore_errors=True)
            pytest.skip("running as root and there is no 'postgres' user to run PostgreSQL as")
        runuser = shutil.which("runuser")
        if runuser is None:
            shutil.rmtree(tmp, ignore_errors=True)
            pytest.skip("running as root and runuser(1) is missing")
        os.chown(tmp, user.pw_uid, user.pw_gid)
        prefix = [runuser, "-u", "postgres", "--"]
    data = os.path.join(tmp, "data")
    port = free_port()
    try:
        out = subprocess.run(
            prefix + [initdb, "-D", data, "-U", "postgres", "-A", "trust",
                      "-E", "UTF8", "--no-sync", "--no-locale"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        if out.returncode != 0:
            pytest.skip(f"initdb failed: {out.stdout.decode(errors='replace')[-500:]}")
        opts = (f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -F "
                f"-c max_connections=20 -c shared_buffers=16MB")
        # TLS too (asyncpg's ssl= goes through loop.start_tls), when a
        # certificate can be made; the server's key must be its own, 0600.
        openssl = shutil.which("openssl")
        if openssl is not None:
            cert, key = os.path.join(tmp, "server.crt"), os.path.join(tmp, "server.key")
            made = subprocess.run(
                [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                 "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                 "-keyout", key, "-out", cert],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if made.returncode == 0:
                os.chmod(key, 0o600)
                if prefix:
                    for path in (cert, key):
                        os.chown(path, user.pw_uid, user.pw_gid)
                opts += f" -c ssl=on -c ssl_cert_file={cert} -c ssl_key_file={key}"
        out = subprocess.run(
            prefix + [pg_ctl, "-D", data, "-o", opts, "-l",
                      os.path.join(tmp, "log"), "-w", "-t", "30", "start"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        if out.returncode != 0:
            pytest.skip(f"pg_ctl start failed: {out.stdout.decode(errors='replace')[-500:]}")
        os.environ["MINLOOP_TEST_PG_CAFILE"] = os.path.join(tmp, "server.crt")
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        os.environ.pop("MINLOOP_TEST_PG_CAFILE", None)
        subprocess.run(prefix + [pg_ctl, "-D", data, "-m", "immediate", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------
# Plain asyncio streams

async def _line_server(reader, writer):
    """A line protocol: 'ECHO x' -> 'x', 'BLOB n' -> n bytes, 'HEAD' -> header block."""
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            cmd, _, arg = line.rstrip(b"\r\n").partition(b" ")
            if cmd == b"ECHO":
                writer.write(arg + b"\n")
            elif cmd == b"BLOB":
                writer.write(ONE_MB[:int(arg)])
            elif cmd == b"HEAD":
                writer.write(b"A: 1\r\nB: 2\r\n\r\nBODY")
            elif cmd == b"LONG":
                writer.write(b"x" * int(arg) + b"\n")
            elif cmd == b"QUIT":
                writer.write(b"BYE")
                await writer.drain()
                writer.write_eof()
                break
            await writer.drain()
    finally:
        writer.close()
        await writer.wait_closed()


async def _streams_dialogue(open_conn, limit):
    reader, writer = await open_conn(limit=limit)
    writer.write(b"ECHO hello\nECHO world\n")
    assert await reader.readline() == b"hello\n"
    assert await reader.readuntil(b"\n") == b"world\n"
    writer.write(b"BLOB 100000\n")
    await writer.drain()
    blob = await reader.readexactly(100000)
    assert blob == ONE_MB[:100000]
    writer.write(b"HEAD\n")
    assert await reader.readuntil(b"\r\n\r\n") == b"A: 1\r\nB: 2\r\n\r\n"
    assert await reader.readexactly(4) == b"BODY"
    # A line longer than the limit: readuntil raises LimitOverrunError and
    # leaves the data in the buffer; readline raises ValueError and drops it.
    writer.write(b"LONG %d\n" % (limit * 2))
    with pytest.raises(asyncio.LimitOverrunError) as info:
        await reader.readuntil(b"\n")
    assert info.value.consumed >= limit
    with pytest.raises(ValueError):
        await reader.readline()
    writer.write(b"ECHO after\n")
    # readline() discarded up to and including the long line's end.
    assert await reader.readline() == b"after\n"
    writer.write(b"QUIT\n")
    with pytest.raises(asyncio.IncompleteReadError) as info:
        await reader.readexactly(10)
    assert info.value.partial == b"BYE"
    assert reader.at_eof()
    writer.close()
    await writer.wait_closed()


def test_streams_line_protocol_tcp(loop):
    async def main():
        server = await asyncio.start_server(_line_server, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            await _streams_dialogue(
                lambda **kw: asyncio.open_connection("127.0.0.1", port, **kw), 1024)
    run(loop, main())


def test_streams_line_protocol_unix(loop, tmp_path):
    path = str(tmp_path / "s.sock")

    async def main():
        server = await asyncio.start_unix_server(_line_server, path)
        async with server:
            await _streams_dialogue(
                lambda **kw: asyncio.open_unix_connection(path, **kw), 4096)
    run(loop, main())


def test_streams_drain_backpressure(loop):
    """A fast writer against a slow reader: drain() blocks, nothing is lost."""
    total = 8 * 1024 * 1024
    state = {}

    async def slow_reader(reader, writer):
        got = bytearray()
        await asyncio.sleep(0.3)   # let the writer fill every buffer first
        # The stream pauses its transport once more than 2*limit is buffered.
        state["reading_while_full"] = writer.transport.is_reading()
        while len(got) < total:
            chunk = await reader.read(65536)
            if not chunk:
                break
            got += chunk
            await asyncio.sleep(0)
        state["digest"] = hashlib.sha256(got).hexdigest()
        writer.write(b"done")
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def main():
        server = await asyncio.start_server(slow_reader, "127.0.0.1", 0, limit=65536)
        port = server.sockets[0].getsockname()[1]
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.transport.set_write_buffer_limits(high=65536)
            assert writer.transport.get_write_buffer_limits() == (16384, 65536)
            blocked = 0
            max_buffered = 0
            sent = 0
            data = ONE_MB * 8
            while sent < total:
                writer.write(data[sent:sent + 262144])
                sent += 262144
                max_buffered = max(max_buffered, writer.transport.get_write_buffer_size())
                t0 = loop.time()
                await writer.drain()
                if loop.time() - t0 > 0.05:
                    blocked += 1
            assert writer.transport.get_write_buffer_size() <= 65536
            assert max_buffered > 65536
            assert blocked >= 1, "drain() never waited for the slow reader"
            assert await reader.read() == b"done"
            writer.close()
            await writer.wait_closed()
        assert state["reading_while_full"] is False
        assert state["digest"] == hashlib.sha256(ONE_MB * 8).hexdigest()
    run(loop, main())


def test_streams_starttls(loop, tls):
    """A STARTTLS dialogue: both ends upgrade with StreamWriter.start_tls."""
    if not hasattr(asyncio.StreamWriter, "start_tls"):
        pytest.skip("StreamWriter.start_tls is new in Python 3.11")
    _, _, server_ctx, client_ctx = tls

    async def server(reader, writer):
        assert await reader.readline() == b"STARTTLS\n"
        writer.write(b"GO\n")
        await writer.drain()
        await writer.start_tls(server_ctx)
        assert writer.get_extra_info("ssl_object") is not None
        while line := await reader.readline():
            writer.write(b"secure:" + line)
            await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def main():
        srv = await asyncio.start_server(server, "127.0.0.1", 0, limit=2 ** 20)
        port = srv.sockets[0].getsockname()[1]
        async with srv:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"STARTTLS\n")
            assert await reader.readline() == b"GO\n"
            await writer.start_tls(client_ctx, server_hostname="127.0.0.1")
            assert writer.get_extra_info("peercert") is not None
            writer.write(b"a\n" + b"x" * 300000 + b"\n")
            assert await reader.readline() == b"secure:a\n"
            assert await reader.readexactly(300008) == b"secure:" + b"x" * 300000 + b"\n"
            writer.close()
            await writer.wait_closed()
    run(loop, main())


# ---------------------------------------------------------------------------
# aiohttp

def _aiohttp_app(seen):
    from aiohttp import web, WSMsgType

    async def hello(request):
        seen["server_transport"] = request.transport
        return web.json_response({"hello": request.query.get("name", "world")})

    async def upload(request):
        body = await request.read()
        return web.Response(text=f"{len(body)} {hashlib.sha256(body).hexdigest()}")

    async def stream(request):
        resp = web.StreamResponse()
        resp.content_type = "text/plain"
        await resp.prepare(request)
        for i in range(200):
            await resp.write(b"chunk %03d\n" % i)
            if i % 50 == 0:
                await asyncio.sleep(0.001)
        await resp.write_eof()
        return resp

    async def ws(request):
        sock = web.WebSocketResponse()
        await sock.prepare(request)
        async for msg in sock:
            if msg.type == WSMsgType.TEXT:
                if msg.data == "close":
                    await sock.close(code=4001, message=b"bye")
                else:
                    await sock.send_str("echo:" + msg.data)
            elif msg.type == WSMsgType.BINARY:
                await sock.send_bytes(msg.data[::-1])
        return sock

    app = web.Application(client_max_size=4 * 1024 * 1024)
    app.router.add_get("/hello", hello)
    app.router.add_post("/upload", upload)
    app.router.add_get("/stream", stream)
    app.router.add_get("/ws", ws)
    return app


async def _aiohttp_client_checks(session, base, seen):
    import aiohttp

    async with session.get(f"{base}/hello", params={"name": "minloop"}) as resp:
        assert resp.status == 200
        assert await resp.json() == {"hello": "minloop"}
    assert isinstance(seen["server_transport"], asyncio.Transport)

    async with session.post(f"{base}/upload", data=ONE_MB) as resp:
        assert resp.status == 200
        assert await resp.text() == f"{len(ONE_MB)} {hashlib.sha256(ONE_MB).hexdigest()}"

    async with session.get(f"{base}/stream") as resp:
        assert resp.status == 200
        assert resp.headers.get("Transfer-Encoding") == "chunked"
        # (A small body is read at once and its connection released: this
        # streamed one still holds it.)
        assert isinstance(resp.connection.transport, asyncio.Transport)
        lines = [line async for line in resp.content]
        assert lines == [b"chunk %03d\n" % i for i in range(200)]

    async with session.get(f"{base}/missing") as resp:
        assert resp.status == 404

    async with session.ws_connect(f"{base}/ws") as ws:
        await ws.send_str("ping")
        assert await ws.receive_str() == "echo:ping"
        await ws.send_bytes(ONE_MB)
        assert await ws.receive_bytes() == ONE_MB[::-1]
        await ws.send_str("close")
        msg = await ws.receive()
        assert msg.type == aiohttp.WSMsgType.CLOSE
        assert ws.close_code == 4001


def test_aiohttp_tcp(loop):
    aiohttp = pytest.importorskip("aiohttp")
    from aiohttp import web

    async def main():
        seen = {}
        runner = web.AppRunner(_aiohttp_app(seen))
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            async with aiohttp.ClientSession() as session:
                await _aiohttp_client_checks(session, f"http://127.0.0.1:{port}", seen)
        finally:
            await runner.cleanup()
    run(loop, main())


def test_aiohttp_unix(loop, tmp_path):
    aiohttp = pytest.importorskip("aiohttp")
    from aiohttp import web
    path = str(tmp_path / "http.sock")

    async def main():
        seen = {}
        runner = web.AppRunner(_aiohttp_app(seen))
        await runner.setup()
        try:
            await web.UnixSite(runner, path).start()
            connector = aiohttp.UnixConnector(path=path)
            async with aiohttp.ClientSession(connector=connector) as session:
                await _aiohttp_client_checks(session, "http://localhost", seen)
        finally:
            await runner.cleanup()
    run(loop, main())


def test_aiohttp_tls(loop, tmp_path):
    aiohttp = pytest.importorskip("aiohttp")
    from aiohttp import web
    ssl = pytest.importorskip("ssl")
    server_ctx, client_ctx = _tls_contexts(tmp_path)

    async def main():
        seen = {}
        runner = web.AppRunner(_aiohttp_app(seen))
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx).start()
            port = runner.addresses[0][1]
            connector = aiohttp.TCPConnector(ssl=client_ctx)
            async with aiohttp.ClientSession(connector=connector) as session:
                await _aiohttp_client_checks(session, f"https://127.0.0.1:{port}", seen)
        finally:
            await runner.cleanup()
    run(loop, main())


def _tls_contexts(tmp_path):
    """(server_ctx, client_ctx) for a self-signed 127.0.0.1 certificate."""
    import ssl
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl(1) is needed to make a test certificate")
    cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", key, "-out", cert],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.create_default_context(cafile=cert)
    return server_ctx, client_ctx


def test_aiohttp_file_response_and_localhost(loop, tmp_path):
    """web.FileResponse (loop.sendfile, or aiohttp's fallback where the loop
    raises NotImplementedError) with ranges, and a client resolving
    'localhost' (loop.getaddrinfo in the executor)."""
    aiohttp = pytest.importorskip("aiohttp")
    from aiohttp import web
    blob = tmp_path / "blob.bin"
    content = ONE_MB * 3 + b"tail"
    blob.write_bytes(content)

    async def file(request):
        return web.FileResponse(blob)

    async def main():
        app = web.Application()
        app.router.add_get("/file", file)
        runner = web.AppRunner(app)
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            port = runner.addresses[0][1]
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://localhost:{port}/file") as resp:
                    assert resp.status == 200
                    assert int(resp.headers["Content-Length"]) == len(content)
                    assert await resp.read() == content
                async with session.get(f"http://127.0.0.1:{port}/file",
                                       headers={"Range": "bytes=1000-1999"}) as resp:
                    assert resp.status == 206
                    assert await resp.read() == content[1000:2000]
                async with session.get(f"http://127.0.0.1:{port}/file",
                                       headers={"Range": "bytes=-4"}) as resp:
                    assert resp.status == 206
                    assert await resp.read() == b"tail"
        finally:
            await runner.cleanup()
    run(loop, main())


def test_hypercorn_starlette(loop):
    """Hypercorn (asyncio.start_server and streams) serving a Starlette app."""
    pytest.importorskip("hypercorn")
    pytest.importorskip("starlette")
    httpx = pytest.importorskip("httpx")
    from hypercorn.asyncio import serve
    from hypercorn.config import Config
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    async def hello(request):
        return JSONResponse({"hello": request.query_params.get("name", "")})

    async def upload(request):
        body = await request.body()
        return JSONResponse({"size": len(body), "sha": hashlib.sha256(body).hexdigest()})

    async def stream(request):
        async def gen():
            for i in range(50):
                yield b"%02d," % i
        return StreamingResponse(gen())

    app = Starlette(routes=[Route("/hello", hello), Route("/upload", upload, methods=["POST"]),
                            Route("/stream", stream)])

    async def main():
        port = free_port()
        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.accesslog = None
        config.errorlog = None
        stop = asyncio.Event()
        task = asyncio.ensure_future(serve(app, config, shutdown_trigger=stop.wait))
        try:
            for _ in range(200):
                try:
                    _, w = await asyncio.open_connection("127.0.0.1", port)
                    w.close()
                    await w.wait_closed()
                    break
                except OSError:
                    await asyncio.sleep(0.02)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                resp = await client.get("/hello", params={"name": "minloop"})
                assert resp.json() == {"hello": "minloop"}
                resp = await client.post("/upload", content=ONE_MB)
                assert resp.json() == {"size": len(ONE_MB),
                                       "sha": hashlib.sha256(ONE_MB).hexdigest()}
                resp = await client.get("/stream")
                assert resp.content == b"".join(b"%02d," % i for i in range(50))
        finally:
            stop.set()
            await task
    run(loop, main())


# ---------------------------------------------------------------------------
# uvicorn

async def _asgi_app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "websocket":
        await receive()   # websocket.connect
        await send({"type": "websocket.accept"})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") is not None:
                await send({"type": "websocket.send", "text": "echo:" + message["text"]})
            else:
                await send({"type": "websocket.send", "bytes": message["bytes"][::-1]})
    assert scope["type"] == "http"
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        for i in range(100):
            await send({"type": "http.response.body", "body": b"%03d\n" % i,
                        "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    text = f"{scope['method']} {scope['path']} {len(body)} {hashlib.sha256(body).hexdigest()}"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": text.encode()})


async def _start_uvicorn(**config):
    import uvicorn
    cfg = uvicorn.Config(_asgi_app, host="127.0.0.1", port=0, loop="none",
                         log_level="warning", lifespan="on", **config)
    server = uvicorn.Server(cfg)
    # serve() would install signal handlers only in the main thread; we
    # stop it with should_exit.
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise AssertionError("uvicorn stopped before it started")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, task, port


@pytest.mark.parametrize("http", ["httptools", "h11"])
def test_uvicorn_http(loop, http):
    pytest.importorskip("uvicorn")
    pytest.importorskip(http)
    httpx = pytest.importorskip("httpx")

    async def main():
        server, task, port = await _start_uvicorn(http=http, ws="none")
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                resp = await client.get("/hello")
                assert resp.status_code == 200
                assert resp.text == f"GET /hello 0 {hashlib.sha256(b'').hexdigest()}"
                resp = await client.post("/upload", content=ONE_MB)
                assert resp.status_code == 200
                assert resp.text == (f"POST /upload {len(ONE_MB)} "
                                     f"{hashlib.sha256(ONE_MB).hexdigest()}")
                async with client.stream("GET", "/stream") as resp:
                    assert resp.status_code == 200
                    body = b"".join([chunk async for chunk in resp.aiter_bytes()])
                assert body == b"".join(b"%03d\n" % i for i in range(100))
                # Keep-alive: several requests over few connections, concurrently.
                results = await asyncio.gather(*(client.get(f"/n{i}") for i in range(20)))
                assert [r.status_code for r in results] == [200] * 20
            # A raw HTTP/1.0 request over asyncio streams.
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /raw HTTP/1.0\r\nHost: x\r\n\r\n")
            response = await reader.read()
            assert response.startswith(b"HTTP/1.1 200 OK\r\n")
            assert b"GET /raw 0 " + hashlib.sha256(b"").hexdigest().encode() in response
            writer.close()
            await writer.wait_closed()
        finally:
            server.should_exit = True
            await task
    run(loop, main())


@pytest.mark.parametrize("ws", ["websockets", "websockets-sansio", "wsproto"])
def test_uvicorn_websocket(loop, ws):
    pytest.importorskip("uvicorn")
    pytest.importorskip("websockets" if ws.startswith("websockets") else ws)
    from websockets.asyncio.client import connect

    async def main():
        server, task, port = await _start_uvicorn(http="h11", ws=ws)
        try:
            async with connect(f"ws://127.0.0.1:{port}/ws") as conn:
                await conn.send("hi")
                assert await conn.recv() == "echo:hi"
                await conn.send(ONE_MB)
                assert await conn.recv() == ONE_MB[::-1]
        finally:
            server.should_exit = True
            await task
    run(loop, main())


# ---------------------------------------------------------------------------
# websockets

def test_websockets_echo(loop):
    websockets = pytest.importorskip("websockets")
    try:
        from websockets.asyncio.server import serve
        from websockets.asyncio.client import connect
    except ImportError:  # websockets < 13: the legacy implementation
        serve, connect = websockets.serve, websockets.connect

    async def echo(conn):
        async for message in conn:
            await conn.send(message)

    async def main():
        async with serve(echo, "127.0.0.1", 0, max_size=2 ** 21) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            async with connect(f"ws://127.0.0.1:{port}", max_size=2 ** 21) as conn:
                await conn.send("hello")
                assert await conn.recv() == "hello"
                await conn.send(ONE_MB)
                assert await conn.recv() == ONE_MB
                pong = await conn.ping()
                latency = await pong
                assert latency >= 0
                # Fragmented message
                await conn.send(["frag", "mented"])
                assert await conn.recv() == "fragmented"
            assert conn.close_code == 1000
    run(loop, main())


def test_websockets_unix(loop, tmp_path):
    pytest.importorskip("websockets")
    try:
        from websockets.asyncio.server import unix_serve
        from websockets.asyncio.client import unix_connect
    except ImportError:
        pytest.skip("websockets has no asyncio unix_serve")
    path = str(tmp_path / "ws.sock")

    async def echo(conn):
        async for message in conn:
            await conn.send(message[::-1])

    async def main():
        async with unix_serve(echo, path):
            async with unix_connect(path) as conn:
                await conn.send("abc")
                assert await conn.recv() == "cba"
    run(loop, main())


# ---------------------------------------------------------------------------
# redis-py

def test_redis_commands_pipeline_pubsub(loop, redis_url):
    aioredis = pytest.importorskip("redis.asyncio")
    url, _ = redis_url

    async def main():
        r = aioredis.Redis.from_url(url)
        try:
            assert await r.ping() is True
            key = f"minloop:{os.getpid()}:{id(loop)}"
            await r.delete(key, key + ":list", key + ":n")
            await r.set(key, ONE_MB)
            assert await r.get(key) == ONE_MB
            assert await r.incr(key + ":n") == 1
            async with r.pipeline(transaction=True) as pipe:
                pipe.incr(key + ":n").incrby(key + ":n", 10).rpush(key + ":list", *range(100))
                pipe.lrange(key + ":list", 0, 2)
                assert await pipe.execute() == [2, 12, 100, [b"0", b"1", b"2"]]

            # Many concurrent commands over the pool.
            values = await asyncio.gather(*(r.lindex(key + ":list", i) for i in range(100)))
            assert values == [str(i).encode() for i in range(100)]

            # Blocking command with a timeout.
            assert await r.blpop([key + ":empty"], timeout=0.2) is None

            pubsub = r.pubsub()
            await pubsub.subscribe("minloop-chan")
            msg = await pubsub.get_message(timeout=2)
            assert msg["type"] == "subscribe"
            assert await r.publish("minloop-chan", "hi there") == 1
            msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=2)
            assert msg["data"] == b"hi there"
            await pubsub.unsubscribe("minloop-chan")
            await pubsub.aclose()
            await r.delete(key, key + ":list", key + ":n")
        finally:
            await r.aclose()
            await r.connection_pool.disconnect()
    run(loop, main())


def test_redis_unix_socket(loop, redis_url):
    aioredis = pytest.importorskip("redis.asyncio")
    _, path = redis_url
    if not path:
        pytest.skip("no redis unix socket (MINLOOP_TEST_REDIS_SOCKET unset)")

    async def main():
        r = aioredis.Redis(unix_socket_path=path)
        try:
            await r.set("minloop:unix", "v")
            assert await r.get("minloop:unix") == b"v"
            assert await r.delete("minloop:unix") == 1
        finally:
            await r.aclose()
            await r.connection_pool.disconnect()
    run(loop, main())


# ---------------------------------------------------------------------------
# asyncpg

def test_asyncpg(loop, pg_dsn):
    asyncpg = pytest.importorskip("asyncpg")

    async def main():
        conn = await asyncpg.connect(pg_dsn, ssl=False)
        try:
            assert await conn.fetchval("SELECT 1 + 1") == 2
            await conn.execute("CREATE TEMP TABLE items (id int PRIMARY KEY, name text, data bytea)")
            await conn.executemany(
                "INSERT INTO items VALUES ($1, $2, $3)",
                [(i, f"item {i}", bytes([i % 256]) * i) for i in range(500)])
            rows = await conn.fetch("SELECT id, name FROM items WHERE id < $1 ORDER BY id", 5)
            assert [tuple(r) for r in rows] == [(i, f"item {i}") for i in range(5)]
            assert await conn.fetchval("SELECT count(*) FROM items") == 500

            stmt = await conn.prepare("SELECT name, length(data) FROM items WHERE id = $1")
            for i in (3, 250, 499):
                assert tuple(await stmt.fetchrow(i)) == (f"item {i}", i)

            # A large value both ways.
            big = await conn.fetchval("SELECT $1::bytea", ONE_MB)
            assert big == ONE_MB

            # Transactions: commit and rollback.
            async with conn.transaction():
                await conn.execute("UPDATE items SET name = 'x' WHERE id = 1")
            with pytest.raises(RuntimeError):
                async with conn.transaction():
                    await conn.execute("UPDATE items SET name = 'y' WHERE id = 1")
                    raise RuntimeError("roll back")
            assert await conn.fetchval("SELECT name FROM items WHERE id = 1") == "x"

            # A cursor in a transaction.
            async with conn.transaction():
                seen = [r["id"] async for r in conn.cursor(
                    "SELECT id FROM items ORDER BY id", prefetch=50)]
            assert seen == list(range(500))

            # COPY out
            records = await conn.copy_from_query("SELECT id FROM items", output=_Sink())
            assert records.startswith("COPY")

            # LISTEN/NOTIFY from a second connection.
            got = asyncio.get_running_loop().create_future()
            await conn.add_listener(
                "minloop_chan", lambda c, pid, chan, payload: got.set_result(payload))
            other = await asyncpg.connect(pg_dsn, ssl=False)
            try:
                await other.execute("NOTIFY minloop_chan, 'hello'")
            finally:
                await other.close()
            assert await asyncio.wait_for(got, 5) == "hello"

            # A server-side error surfaces as the right exception.
            with pytest.raises(asyncpg.UndefinedTableError):
                await conn.fetch("SELECT * FROM no_such_table")
            # A cancelled query leaves the connection usable.
            with pytest.raises(asyncio.TimeoutError):
                await conn.fetch("SELECT pg_sleep(5)", timeout=0.2)
            assert await conn.fetchval("SELECT 42") == 42
        finally:
            await conn.close()
    run(loop, main())


class _Sink:
    """An asyncpg COPY output sink that only counts."""

    def __init__(self):
        self.size = 0

    async def __call__(self, data):
        self.size += len(data)


def test_asyncpg_tls(loop, pg_dsn):
    """asyncpg's ssl= negotiates in the clear, then upgrades with loop.start_tls."""
    asyncpg = pytest.importorskip("asyncpg")
    import ssl
    cafile = os.environ.get("MINLOOP_TEST_PG_CAFILE")
    if not cafile or not os.path.exists(cafile):
        pytest.skip("the PostgreSQL server has no TLS certificate (MINLOOP_TEST_PG_CAFILE)")
    ctx = ssl.create_default_context(cafile=cafile)

    async def main():
        conn = await asyncpg.connect(pg_dsn, ssl=ctx)
        try:
            assert await conn.fetchval("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            assert await conn.fetchval("SELECT $1::bytea", ONE_MB) == ONE_MB
            transport = conn._transport
            assert transport.get_extra_info("sslcontext") is ctx
        finally:
            await conn.close()
    run(loop, main())


@pytest.mark.parametrize("sslmode", ["prefer-by-default", "require"])
def test_asyncpg_sslmode(loop, pg_dsn, sslmode, monkeypatch):
    """asyncpg's own TLS modes, with no context of ours.

    With no ssl= (sslmode prefer) asyncpg sends an SSLRequest on a plain
    transport, upgrades it with loop.start_tls if the server agrees (or
    stays in the clear if it does not), then hands the transport to its
    real protocol with transport.set_protocol(): both TLS and plain
    transports must take the switch mid-connection.  'require' insists on
    TLS but, without a root certificate, does not verify it.
    """
    asyncpg = pytest.importorskip("asyncpg")
    for name in ("PGSSLMODE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY"):
        monkeypatch.delenv(name, raising=False)
    # asyncpg looks for ~/.postgresql/root.crt and the client certificate
    # there: a HOME without them.
    monkeypatch.setenv("HOME", tempfile.gettempdir())

    async def ssl_is_on():
        # The server says (a server from MINLOOP_TEST_PG_DSN may have TLS
        # with no MINLOOP_TEST_PG_CAFILE given, or none).
        probe = await asyncpg.connect(pg_dsn, ssl=False)
        try:
            return await probe.fetchval("SHOW ssl") == "on"
        finally:
            await probe.close()

    server_has_tls = run(loop, ssl_is_on())
    if sslmode == "require" and not server_has_tls:
        pytest.skip("the PostgreSQL server has TLS off")
    kwargs = {"ssl": "require"} if sslmode == "require" else {}

    async def main():
        conn = await asyncpg.connect(pg_dsn, **kwargs)
        try:
            assert await conn.fetchval(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") is server_has_tls
            ssl_object = conn._transport.get_extra_info("ssl_object")
            assert (ssl_object is not None) is server_has_tls
            if server_has_tls:
                assert await conn.fetchval(
                    "SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
                ) == ssl_object.version()
            # Queries of each shape: simple, prepared, large values both
            # ways, a transaction, a server-side error.
            assert await conn.fetchval("SELECT 40 + $1::int", 2) == 42
            stmt = await conn.prepare("SELECT $1::text || $2::text")
            assert await stmt.fetchval("tl", "s") == "tls"
            assert await conn.fetchval("SELECT $1::bytea", ONE_MB) == ONE_MB
            rows = await conn.fetch("SELECT g, repeat('x', g) FROM generate_series(1, 2000) g")
            assert len(rows) == 2000 and rows[-1][1] == "x" * 2000
            async with conn.transaction():
                await conn.execute("CREATE TEMP TABLE t (v int)")
                await conn.executemany("INSERT INTO t VALUES ($1)", [(i,) for i in range(100)])
            assert await conn.fetchval("SELECT sum(v) FROM t") == 4950
            with pytest.raises(asyncpg.UndefinedTableError):
                await conn.fetch("SELECT * FROM no_such_table")
            assert await conn.fetchval("SELECT 1") == 1
        finally:
            await conn.close()
    run(loop, main())


def test_asyncpg_pool(loop, pg_dsn):
    asyncpg = pytest.importorskip("asyncpg")

    async def main():
        async with asyncpg.create_pool(pg_dsn, ssl=False, min_size=2, max_size=4) as pool:
            results = await asyncio.gather(
                *(pool.fetchval("SELECT $1::int * 2", i) for i in range(40)))
            assert results == [i * 2 for i in range(40)]
            async with pool.acquire() as conn:
                assert await conn.fetchval("SELECT current_user") == "postgres"
    run(loop, main())


# ---------------------------------------------------------------------------
# Whole servers in a child process, stopped by a signal: the way they are
# deployed (uvicorn's CLI with --loop, aiohttp's run_app with its signal
# handlers and graceful shutdown).

_WHICH_LOOP_APP = '''
import asyncio, json, os, sys

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                print("lifespan shutdown", flush=True)
                await send({"type": "lifespan.shutdown.complete"})
                return
    loop = asyncio.get_running_loop()
    body = json.dumps({"loop": type(loop).__module__ + "." + type(loop).__name__,
                       "client": scope["client"][0], "server": list(scope["server"]),
                       }).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
'''


def _read_until(proc, pattern, deadline):
    """Read the child's output lines until one contains ``pattern``.

    The lines read so far are kept in proc.lines_read (the rest is read by
    communicate()).  A child that never prints it is killed.
    """
    import queue
    import threading
    if not hasattr(proc, "lines_read"):
        proc.lines_read = []
        proc.line_queue = queue.Queue()

        def pump():
            for line in iter(proc.stdout.readline, ""):
                proc.line_queue.put(line)
            proc.line_queue.put(None)
        proc.pump = threading.Thread(target=pump, daemon=DAEMON_THREADS)
        proc.pump.start()
    while True:
        try:
            line = proc.line_queue.get(timeout=max(0, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        if line is None:
            proc.kill()
            proc.wait()
            raise AssertionError(f"the child never printed {pattern!r}; its output:\n"
                                 + "".join(proc.lines_read))
        proc.lines_read.append(line)
        if pattern in line:
            return line


def _rest_of_output(proc, timeout):
    """Wait for the child to exit; return all it printed."""
    proc.wait(timeout)
    proc.pump.join(timeout)
    while True:
        line = proc.line_queue.get(timeout=timeout)
        if line is None:
            break
        proc.lines_read.append(line)
    return "".join(proc.lines_read)


def _http_get_json(port, path="/"):
    import json
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"200", head
    if b"transfer-encoding: chunked" in head.lower():
        size, _, rest = body.partition(b"\r\n")
        body = rest[:int(size, 16)]
    return json.loads(body)


@pytest.mark.parametrize("http", ["httptools", "h11"])
def test_uvicorn_cli_loop_option(loop_kind, tmp_path, http):
    """`uvicorn app:app --loop minloop:new_event_loop` serves on minloop and
    shuts down cleanly on SIGTERM (the README's instruction)."""
    pytest.importorskip("uvicorn")
    pytest.importorskip(http)
    (tmp_path / "whichloop.py").write_text(_WHICH_LOOP_APP)
    loop_opt = "asyncio" if loop_kind == "asyncio" else "minloop:new_event_loop"
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path)] + [p for p in sys.path if p]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "whichloop:app", "--host", "127.0.0.1",
         "--port", str(port), "--loop", loop_opt, "--http", http,
         "--lifespan", "on", "--log-level", "info"],
        cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        _read_until(proc, "Uvicorn running on", time.monotonic() + 10)
        info = _http_get_json(port)
        expected = ("asyncio.unix_events._UnixSelectorEventLoop"
                    if loop_kind == "asyncio" else "minloop.base_events.Loop")
        assert info == {"loop": expected, "client": "127.0.0.1",
                        "server": ["127.0.0.1", port]}
        proc.send_signal(signal.SIGTERM)
        out = _rest_of_output(proc, 10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    # uvicorn re-raises the signal it caught once it has shut down.
    assert proc.returncode in (0, -signal.SIGTERM), out
    assert "lifespan shutdown" in out
    assert "Finished server process" in out
    assert "Traceback" not in out and "ERROR" not in out, out


_RUN_APP_SCRIPT = '''
import asyncio, sys
from aiohttp import web
import minloop

async def index(request):
    loop = asyncio.get_running_loop()
    return web.json_response({"loop": type(loop).__module__ + "." + type(loop).__name__,
                              "peer": request.transport.get_extra_info("peername")[0]})

async def on_startup(app):
    print("startup", flush=True)

async def on_shutdown(app):
    print("shutdown", flush=True)

async def on_cleanup(app):
    print("cleanup", flush=True)

app = web.Application()
app.router.add_get("/", index)
app.on_startup.append(on_startup)
app.on_shutdown.append(on_shutdown)
app.on_cleanup.append(on_cleanup)
loop = minloop.new_event_loop() if sys.argv[1] == "minloop" else asyncio.SelectorEventLoop()
web.run_app(app, host="127.0.0.1", port=int(sys.argv[2]), loop=loop,
            shutdown_timeout=2, print=lambda msg: print("running", flush=True))
print("exited run_app", flush=True)
'''


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_aiohttp_run_app_signal_shutdown(loop_kind, tmp_path, sig):
    """aiohttp's run_app on the loop: serves, and a signal (through
    loop.add_signal_handler) runs the graceful shutdown and exits 0."""
    pytest.importorskip("aiohttp")
    script = tmp_path / "app.py"
    script.write_text(_RUN_APP_SCRIPT)
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen(
        [sys.executable, str(script), loop_kind, str(port)], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _read_until(proc, "running", time.monotonic() + 10)
        info = _http_get_json(port)
        expected = ("asyncio.unix_events._UnixSelectorEventLoop"
                    if loop_kind == "asyncio" else "minloop.base_events.Loop")
        assert info == {"loop": expected, "peer": "127.0.0.1"}
        proc.send_signal(getattr(signal, sig))
        out = _rest_of_output(proc, 10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert proc.returncode == 0, out
    # Less aiohttp's access log, which it prints in debug mode (the child
    # inherits PYTHONDEVMODE from CI's dev-mode stage).
    events = [line for line in out.splitlines() if line and '"GET / ' not in line]
    assert events == ["startup", "running", "shutdown", "cleanup", "exited run_app"], out


# ---------------------------------------------------------------------------
# TLS through the libraries (asyncio's SSLProtocol over minloop's transport)

@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """(cert_path, key_path, server_ctx, client_ctx) for 127.0.0.1."""
    tmp = tmp_path_factory.mktemp("tls")
    server_ctx, client_ctx = _tls_contexts(tmp)
    return str(tmp / "cert.pem"), str(tmp / "key.pem"), server_ctx, client_ctx


def test_uvicorn_tls(loop, tls):
    pytest.importorskip("uvicorn")
    httpx = pytest.importorskip("httpx")
    cert, key, _, client_ctx = tls

    async def main():
        server, task, port = await _start_uvicorn(
            http="h11", ws="none", ssl_certfile=cert, ssl_keyfile=key)
        try:
            async with httpx.AsyncClient(base_url=f"https://127.0.0.1:{port}",
                                         verify=client_ctx) as client:
                resp = await client.post("/tls", content=ONE_MB)
                assert resp.status_code == 200
                assert resp.text == (f"POST /tls {len(ONE_MB)} "
                                     f"{hashlib.sha256(ONE_MB).hexdigest()}")
        finally:
            server.should_exit = True
            await task
    run(loop, main())


def test_websockets_tls(loop, tls):
    pytest.importorskip("websockets")
    try:
        from websockets.asyncio.server import serve
        from websockets.asyncio.client import connect
    except ImportError:
        pytest.skip("websockets has no new asyncio implementation")
    _, _, server_ctx, client_ctx = tls

    async def echo(conn):
        async for message in conn:
            await conn.send(message)

    async def main():
        async with serve(echo, "127.0.0.1", 0, ssl=server_ctx, max_size=2 ** 21) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            async with connect(f"wss://127.0.0.1:{port}", ssl=client_ctx,
                               max_size=2 ** 21) as conn:
                await conn.send(ONE_MB)
                assert await conn.recv() == ONE_MB
                await conn.send("text")
                assert await conn.recv() == "text"
    run(loop, main())


# ---------------------------------------------------------------------------
# anyio (under httpx and Starlette): its listener uses sock_accept and
# connect_accepted_socket, its threads call_soon_threadsafe.

def test_anyio_inside_loop(loop, tmp_path):
    anyio = pytest.importorskip("anyio")

    async def handle(stream):
        async with stream:
            async for chunk in stream:
                await stream.send(chunk.upper())

    async def main():
        async with anyio.create_task_group() as tg:
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
            port = listener.extra(anyio.abc.SocketAttribute.local_port)
            tg.start_soon(listener.serve, handle)
            async with await anyio.connect_tcp("127.0.0.1", port) as client:
                await client.send(b"hello")
                assert await client.receive() == b"HELLO"
                payload = ONE_MB[:200000]
                await client.send(payload)
                got = b""
                while len(got) < len(payload):
                    got += await client.receive()
                assert got == payload.upper()

            path = str(tmp_path / "anyio.sock")
            unix_listener = await anyio.create_unix_listener(path)
            tg.start_soon(unix_listener.serve, handle)
            async with await anyio.connect_unix(path) as client:
                await client.send(b"unix")
                assert await client.receive() == b"UNIX"

            assert await anyio.to_thread.run_sync(sum, range(10)) == 45
            with pytest.raises(TimeoutError):
                with anyio.fail_after(0.05):
                    await anyio.sleep(5)
            with anyio.move_on_after(0.05) as scope:
                await anyio.Event().wait()
            assert scope.cancelled_caught
            tg.cancel_scope.cancel()
        await listener.aclose()
        await unix_listener.aclose()
    run(loop, main())


def test_anyio_run_loop_factory(loop_factory):
    """anyio.run() with the loop as its asyncio backend's loop_factory."""
    anyio = pytest.importorskip("anyio")

    async def main():
        loop = asyncio.get_running_loop()
        value = await anyio.to_thread.run_sync(lambda: 21 * 2)
        return type(loop), value

    loop_type, value = anyio.run(
        main, backend="asyncio", backend_options={"loop_factory": loop_factory})
    assert value == 42
    probe = loop_factory()
    try:
        assert loop_type is type(probe)
    finally:
        probe.close()
