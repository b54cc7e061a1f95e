"""Telemetry switched on from outside the program (minloop/telemetry/environ.py):
MINLOOP_STALL / MINLOOP_METRICS, and `python -m minloop run --stall
--metrics`, which set them.

End to end: an unmodified uvicorn app, one endpoint of which blocks the loop
(time.sleep), started by uvicorn's own command line on minloop's loop with
nothing but the environment (or run's flags): a Prometheus scrape shows the
stall counter and histogram, and the asyncio logger's line names the task
and the endpoint's line.  asyncio's loop has no such switch: these are
minloop's own.
"""

import logging
import os
import re
import socket
import subprocess
import sys
import textwrap
import urllib.request

import pytest

from conftest import import_minloop

prometheus_client = pytest.importorskip("prometheus_client")
pytest.importorskip("uvicorn")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

APP = textwrap.dedent("""
    import time

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await receive()
        if scope["path"] == "/block":
            time.sleep(0.2)   # blocks the loop
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
""")
BLOCK_LINE = APP.splitlines().index('        time.sleep(0.2)   # blocks the loop') + 1


def telemetry_built():
    return import_minloop().loop._build_flags()["telemetry"]


needs_telemetry = pytest.mark.skipif("not telemetry_built()",
                                     reason="built with MINLOOP_NO_TELEMETRY=1")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def scrape(port):
    text = get(f"http://127.0.0.1:{port}/metrics")
    return {s.name: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if f.name.startswith("minloop_stall")}


@needs_telemetry
@pytest.mark.parametrize("how", ["environment", "run flags"])
def test_uvicorn_with_no_code_change(tmp_path, how):
    (tmp_path / "app.py").write_text(APP)
    metrics = free_port()
    uvicorn = ["-m", "uvicorn", "--loop", "minloop:new_event_loop", "--host", "127.0.0.1",
               "--port", "0", "app:app"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINLOOP_")}
    if how == "environment":
        env.update(MINLOOP_STALL="0.1", MINLOOP_METRICS=f"127.0.0.1:{metrics}")
        cmd = [sys.executable, *uvicorn]
    else:
        cmd = [sys.executable, "-m", "minloop", "run", "--stall", "0.1",
               "--metrics", f"127.0.0.1:{metrics}", *uvicorn]
    server = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        for line in server.stderr:
            found = re.search(r"Uvicorn running on http://127.0.0.1:(\d+)", line)
            if found:
                break
        else:
            pytest.fail("uvicorn did not start")
        base = f"http://127.0.0.1:{found.group(1)}"
        before = scrape(metrics)
        assert get(base + "/fast") == "ok"
        assert get(base + "/block") == "ok"
        after = scrape(metrics)
    finally:
        server.terminate()
        _, err = server.communicate(timeout=60)
    # The block: one stall more (a loaded machine may add one elsewhere,
    # as uvicorn imports the app in a callback: hence the differences).
    assert after["minloop_stalls_total"] >= before["minloop_stalls_total"] + 1, after
    assert after["minloop_stall_seconds_count"] == after["minloop_stalls_total"]
    assert after["minloop_stall_seconds_sum"] >= before["minloop_stall_seconds_sum"] + 0.2
    assert after["minloop_stall_seconds_bucket"] == after["minloop_stalls_total"]  # (+Inf)
    # The log line (the asyncio logger): the task, the endpoint's line.
    stall = [line for line in err.splitlines()
             if "Stall:" in line and f"{tmp_path / 'app.py'}:{BLOCK_LINE} in app" in line]
    assert len(stall) == 1, err
    assert "by <Task pending name=" in stall[0]


# ---------------------------------------------------------------------------
# In this process


@pytest.fixture
def environ(monkeypatch):
    for name in ("MINLOOP_STALL", "MINLOOP_METRICS"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@needs_telemetry
def test_stall_variable_arms_every_new_loop(environ, caplog):
    minloop = import_minloop()
    environ.setenv("MINLOOP_STALL", "0.05")
    import asyncio
    import time

    async def main():
        time.sleep(0.1)   # stall here
        await asyncio.sleep(0.01)

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        for _ in range(2):
            loop = minloop.new_event_loop()
            try:
                loop.run_until_complete(main())
                assert loop.stalls.count == 1
            finally:
                loop.close()
    lines = [r.getMessage() for r in caplog.records if "Stall:" in r.getMessage()]
    assert len(lines) == 2
    assert f"{__file__}:" in lines[0] and " in main by <Task pending" in lines[0]


@pytest.mark.parametrize("name, value, message", [
    ("MINLOOP_STALL", "soon", "MINLOOP_STALL: expected the stall threshold in seconds"),
    ("MINLOOP_STALL", "-1", "MINLOOP_STALL: expected"),
    ("MINLOOP_METRICS", "localhost", "MINLOOP_METRICS: expected [HOST:]PORT"),
    ("MINLOOP_METRICS", ":99999", "MINLOOP_METRICS: expected [HOST:]PORT"),
])
def test_a_bad_value_is_an_error_at_the_first_loop(environ, name, value, message):
    minloop = import_minloop()
    environ.setenv(name, value)
    with pytest.raises(ValueError) as info:
        minloop.new_event_loop()
    assert str(info.value).startswith(message)


def test_parse_metrics_addresses():
    from minloop.telemetry.environ import parse_metrics
    assert parse_metrics("9000") == ("", 9000)
    assert parse_metrics(":9000") == ("", 9000)
    assert parse_metrics("127.0.0.1:9000") == ("127.0.0.1", 9000)
    assert parse_metrics("[::1]:9000") == ("::1", 9000)


def test_run_flags_are_checked_before_the_program_runs(tmp_path):
    script = tmp_path / "app.py"
    script.write_text("raise SystemExit('ran')\n")
    proc = subprocess.run([sys.executable, "-m", "minloop", "run", "--stall", "x",
                           str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "argument --stall: expected the stall threshold in seconds" in proc.stderr
    # Set for the program (and the processes it starts) through the environment.
    script.write_text("import os; print(os.environ['MINLOOP_STALL'], "
                      "os.environ['MINLOOP_METRICS'])\n")
    proc = subprocess.run([sys.executable, "-m", "minloop", "run", "--stall=0.25",
                           "--metrics", "127.0.0.1:0", str(script)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0.25", "127.0.0.1:0"]
