"""`python -m minloop top PID --tasks` (minloop/top_tasks.py): a running
server's tasks, each with where it awaits, read from outside the process
(Python 3.14's remote debugging, as `python -m asyncio ps` reads them).

Run against uvicorn on minloop with a request in flight; below 3.14, the
command says what it needs and what top shows instead.
"""

import socket
import subprocess
import sys
import textwrap
import threading

import pytest

from minloop import top_tasks

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux")

APP = textwrap.dedent("""
    import asyncio, sys

    release = None

    async def app(scope, receive, send):
        global release
        if scope["type"] != "http":
            return
        await receive()
        if scope["path"] == "/wait":
            release = release or asyncio.Event()
            print("in flight", flush=True)
            await release.wait()   # the request's await point
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
""")
AWAIT_LINE = next(n for n, line in enumerate(APP.splitlines(), 1)
                  if line.endswith("# the request's await point"))


def run_top(*args):
    return subprocess.run([sys.executable, "-m", "minloop", "top", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(top_tasks.AVAILABLE, reason="Python 3.14+ reads the tasks")
def test_tasks_below_314_say_what_they_need():
    result = run_top("1", "--tasks")
    assert result.returncode == 1
    assert "needs Python 3.14 or later" in result.stderr
    assert "stall watchdog is armed" in result.stderr


@pytest.mark.skipif(not top_tasks.AVAILABLE, reason="needs Python 3.14's remote debugging")
def test_tasks_of_uvicorn_with_a_request_in_flight(tmp_path):
    pytest.importorskip("uvicorn")
    (tmp_path / "app.py").write_text(APP)
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--loop", "minloop:new_event_loop",
         "--host", "127.0.0.1", "--port", "0", "app:app"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = None
    try:
        for line in server.stderr:
            if "Uvicorn running on" in line:
                port = int(line.rsplit(":", 1)[1].split()[0])
                break
        else:
            pytest.fail("uvicorn did not start")
        client = socket.create_connection(("127.0.0.1", port))
        client.sendall(b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
        assert server.stdout.readline() == "in flight\n"
        result = run_top(str(server.pid), "--tasks")
    finally:
        server.kill()
        server.wait()
        if client is not None:
            client.close()
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # The request's task, on the loop (LOOP 1), waiting at the app's line,
    # and its chain through uvicorn's request cycle.
    row = next((line for line in out.splitlines()
                if f"app.py:{AWAIT_LINE}" in line), None)
    assert row is not None, out
    assert row.split()[0] == "1" and row.split()[1] == str(server.pid)
    assert row.split()[4] == "app"
    assert "pending" in row
    after = out.split(row, 1)[1]
    assert "run_asgi" in after.lstrip("\n").splitlines()[0], out
