"""Smoke test of the network benchmark: it builds, runs and prints its table.

    pytest benchmarks/net/test_net_smoke.py

It checks that the pieces fit (the C programs compile, a server starts on
asyncio's loop and the C server beside it, the load generator's echo checks
pass, the bench's table and JSON come out), never how fast anything is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

NET_COMPARE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "net_compare.py")

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("gcc") is None,
    reason="the load generator needs Linux (epoll) and gcc")


def run(tmp_path, *args):
    out = tmp_path / "net.json"
    proc = subprocess.run(
        [sys.executable, NET_COMPARE, "--quick", "--rounds", "1", "--loops", "asyncio",
         "--json", str(out), *args],
        capture_output=True, text=True, timeout=120)
    return proc, out


def test_echo_row_produces_table(tmp_path):
    proc, out = run(tmp_path, "--only", "tcp-protocol-1k-c1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # The bench's report, with the C server as a column of its own.
    header = next(line for line in lines if line.startswith("row "))
    assert header.split()[:3] == ["row", "asyncio", "c-server"]
    row = next(line for line in lines if line.startswith("tcp-protocol-1k-c1 "))
    cells = row.split()
    assert cells[1] not in ("-", "FAILED", "n/a") and cells[2] not in ("-", "FAILED"), row
    assert "server CPU per round trip" in proc.stdout
    assert "failures and misbehaviour" not in proc.stdout

    data = json.loads(out.read_text())
    cells = data["rows"]["tcp-protocol-1k-c1"]["cells"]
    (sample,) = cells["asyncio"]["samples"]
    assert sample["round_trips"] > 0 and sample["server_cpu"] >= 0 and sample["rate"] > 0
    assert 0 <= sample["server_user_cpu"] <= sample["server_cpu"] + 0.02  # a tick or two
    assert "user CPU per round trip" in proc.stdout
    assert cells["c-server"]["samples"]


def test_unknown_row_is_a_usage_error(tmp_path):
    proc, _ = run(tmp_path, "--only", "no-such-row")
    assert proc.returncode == 2
    assert "no row matches" in proc.stderr
