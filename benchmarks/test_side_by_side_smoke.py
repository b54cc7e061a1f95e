"""Smoke test of the side-by-side apps benchmark: both servers run and are measured.

    pytest benchmarks/test_side_by_side_smoke.py

It checks that the pieces fit (two servers of one app started together on
one CPU, each driven by its own client, each one's requests, CPU and share
measured, the ratios and the JSON written), never how fast anything is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "side_by_side.py")

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"),
                       reason="the load generators use /proc and epoll"),
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity")
                       else True, reason="needs two CPUs to pin to"),
]


# An app of apps.py (its own client), and a row of the bench (its servers
# and load generator).
@pytest.mark.parametrize("name", ["streams-lines", "tcp-protocol-1k-c1"])
def test_two_loops_measured_at_once(tmp_path, name):
    out = tmp_path / "sbs.json"
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--only", name, "--peer", "asyncio",
         "--rounds", "2", "--duration", "0.3", "--warmup", "0.05", "--json", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert data["peer"] == "asyncio"
    entry = data["apps"][name]
    assert len(entry["rounds"]) == 2
    for rnd in entry["rounds"]:
        for loop in ("minloop", "asyncio"):
            m = rnd[loop]
            assert "error" not in m, m
            assert m["requests"] > 0 and m["cpu"] > 0 and m["us"] > 0
            assert 0 < m["share"] <= 1.05 and 0 <= m["user_share"] <= 1.0
    for key in ("cpu_per_request", "throughput"):
        assert entry[key]["rounds"] == 2 and entry[key]["median"] > 0
    assert "minloop/asyncio: CPU per request" in proc.stdout


def test_refuses_what_it_cannot_run_side_by_side():
    proc = subprocess.run([sys.executable, SCRIPT, "--only", "call_soon_chain"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "neither an app of apps.py nor a TCP/Unix network row" in proc.stderr
