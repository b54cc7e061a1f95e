"""Smoke test of telemetry_overhead.py (wall-clock cost of the telemetry):
it builds the two trees itself, runs every row once at --quick sizes with
the builds taking turns, and prints the table; and it refuses builds that
are not what they claim.

    pytest benchmarks/test_telemetry_overhead_smoke.py

It checks that the pieces fit, never what anything costs.  Building the two
trees takes minutes (Cython and the C compiler, twice).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "telemetry_overhead.py")
SOURCE = os.path.dirname(HERE)
TINY = ("--quick", "--rounds", "1", "--duration", "0.1", "--warmup", "0.02", "--no-pin")


def run(*args, timeout=600):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=timeout)


def test_refuses_a_build_with_telemetry_as_off():
    import minloop
    if not minloop.loop._build_flags()["telemetry"]:
        pytest.skip("this checkout is built without telemetry")
    if os.path.dirname(os.path.dirname(os.path.abspath(minloop.__file__))) != SOURCE:
        pytest.skip("minloop is not imported from this checkout")
    proc = run("--off", SOURCE, "--on", SOURCE, *TINY)
    assert proc.returncode == 2
    assert "OFF must be built with MINLOOP_NO_TELEMETRY=1" in proc.stderr


def test_usage_errors():
    proc = run("--off", SOURCE)
    assert proc.returncode == 2 and "--off and --on go together" in proc.stderr
    proc = run("--loops", "asyncio")
    assert proc.returncode == 2 and "compares two builds" in proc.stderr
    proc = run("--list")
    assert proc.returncode == 0
    for rid in ("call_soon_chain", "timers-200k-fire", "tcp-streams-1k-c16", "http-c16"):
        assert rid in proc.stdout


@pytest.mark.timeout(1200)
@pytest.mark.skipif(importlib.util.find_spec("Cython") is None,
                    reason="building the two trees needs Cython (pip install Cython==3.3.1)")
def test_builds_both_and_runs_every_row(tmp_path):
    proc = run("--build-dir", str(tmp_path), *TINY, timeout=1100)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert f"off: minloop" in out and str(tmp_path / "off") in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("row "))
    assert "on/off" in lines[header]
    body = "\n".join(lines[header + 1:])
    for rid in ("call_soon_chain", "call_later_cancel", "timers-200k-fire",
                "tasks-100k-sleep2", "tcp-protocol-1k-c16", "tcp-streams-1k-c16",
                "http-c16"):
        assert rid in body, out
    if importlib.util.find_spec("httptools") is not None:
        assert "server CPU us/op" in body
    # --stall waits for the stall detector; until then it refuses clearly.
    probe = subprocess.run([sys.executable, "-c", "import minloop; print(hasattr("
                            "minloop.new_event_loop(), 'set_stall_handler'))"],
                           cwd=str(tmp_path / "on"), capture_output=True, text=True,
                           timeout=60)
    if probe.stdout.strip() == "False":
        proc = run("--off", str(tmp_path / "off"), "--on", str(tmp_path / "on"), "--stall",
                   *TINY)
        assert proc.returncode == 2 and "set_stall_handler" in proc.stderr
