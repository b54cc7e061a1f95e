"""Smoke test of the TLS echo benchmark: it runs and prints its table.

    pytest benchmarks/test_tls_echo_smoke.py

It checks that the pieces fit (the script runs the bench engine's TLS rows,
minloop/bench/tls.py: the servers start on asyncio's loop and on minloop,
the load generator's echo checks pass, the table and the JSON come out),
never how fast anything is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

TLS_ECHO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tls_echo.py")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the load generator uses select.epoll")


def test_rows_produce_table(tmp_path):
    out = tmp_path / "tls.json"
    proc = subprocess.run(
        [sys.executable, TLS_ECHO, "--rounds", "1", "--duration", "0.1", "--warmup", "0.05",
         "--loops", "asyncio,minloop", "--sizes", "1024,65536", "--conns", "2",
         "--json", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("tls-")]
    # The main table, then the server CPU per round trip in the details.
    assert [r[0] for r in rows] == ["tls-1k-c2", "tls-64k-c2"] * 2
    assert all("FAILED" not in r and "n/a" not in r for r in rows), rows
    data = json.loads(out.read_text())
    for row in ("tls-1k-c2", "tls-64k-c2"):
        for loop in ("asyncio", "minloop"):
            cell = data["rows"][row]["cells"][loop]
            assert not cell["errors"] and not cell["problems"], cell
            (sample,) = cell["samples"]
            assert sample["round_trips"] > 0 and sample["server_cpu"] >= 0
