"""Smoke test of the real-apps benchmark: it runs and prints its tables.

    pytest benchmarks/test_apps_smoke.py

It checks that the pieces fit (each app's server starts on asyncio's loop
and on minloop, wrk or the script's own client drives it, the bench's table,
the paired markdown table and the JSON come out), never how fast anything
is.  An app whose library is not installed (or wrk, for the HTTP apps) is
skipped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "apps.py")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the load generators use /proc and epoll")

NEEDS = {"uvicorn-text": ("uvicorn", "httptools"), "aiohttp-text": ("aiohttp",),
         "websockets-echo": ("websockets",), "streams-lines": ()}
HTTP = ("uvicorn-text", "aiohttp-text")


@pytest.mark.parametrize("app", list(NEEDS))
def test_app_runs_on_both_loops(app, tmp_path):
    missing = [m for m in NEEDS[app] if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")
    if app in HTTP and shutil.which("wrk") is None:
        pytest.skip("wrk not found")
    out, md = tmp_path / "apps.json", tmp_path / "apps.md"
    proc = subprocess.run(
        [sys.executable, APPS, "--only", app, "--rounds", "2", "--duration", "0.3",
         "--warmup", "0.05", "--loops", "asyncio,minloop", "--json", str(out),
         "--markdown", str(md)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    entry = data["rows"][app]
    for loop in ("asyncio", "minloop"):
        cell = entry["cells"][loop]
        assert not cell["errors"] and not cell["problems"], cell
        assert len(cell["samples"]) == 2
        for sample in cell["samples"]:
            assert sample["round_trips"] > 0 and sample["server_cpu"] >= 0
    # Rounds rotate the order: round 2 starts with minloop.
    pair = entry["paired"]["asyncio"]
    assert pair["throughput"]["rounds"] == 2 and pair["throughput"]["median"] > 0
    table = md.read_text()
    assert f"| {app} |" in table and "vs asyncio" in table
    assert table in proc.stdout


def test_list_and_usage_errors():
    proc = subprocess.run([sys.executable, APPS, "--list"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0
    assert [line.split()[0] for line in proc.stdout.splitlines() if line.strip()
            and not line.startswith(("*", " "))] == list(_ids())
    proc = subprocess.run([sys.executable, APPS, "--only", "nginx"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "--only" in proc.stderr


def _ids():
    sys.path.insert(0, os.path.dirname(APPS))
    try:
        import apps
    finally:
        sys.path.pop(0)
    return apps.ROWS
