"""Smoke test of row_profile.py: a short --measure perf run of one network
row on minloop reads the server's and the load generator's counts, and the
script refuses a row that is not a network row.

    pytest benchmarks/test_row_profile_smoke.py

It checks that the pieces fit, never what anything costs.  Needs perf with
the syscall tracepoints readable (root, tracefs mounted); skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "row_profile.py")


def _perf_usable() -> bool:
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(["perf", "stat", "-x", ",", "-e", "syscalls:sys_enter_read",
                            "--", sys.executable, "-c", "pass"],
                           capture_output=True, text=True)
    return probe.returncode == 0


def test_refuses_a_row_that_is_not_a_network_row():
    proc = subprocess.run([sys.executable, SCRIPT, "--row", "call_soon_chain",
                           "--measure", "perf"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "not a net row" in proc.stderr


@pytest.mark.skipif(not _perf_usable(), reason="perf with syscall tracepoints not usable")
def test_perf_counts_one_read_and_one_write_per_round_trip(tmp_path):
    saved = tmp_path / "perf.json"
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--row", "tcp-protocol-1k-c1", "--loop", "minloop",
         "--measure", "perf", "--rounds", "1", "--duration", "0.3", "--save", str(saved)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "server syscalls" in proc.stdout
    (answer, server, client), = json.loads(saved.read_text())["runs"]
    trips = answer["round_trips"]
    assert trips > 0
    # An echo server reads and writes once per round trip (a few more for
    # the connection's set-up); so does the load generator.
    assert 0.9 < server["recvfrom"] / trips < 1.2
    assert 0.9 < client["sendto"] / trips < 1.2
