"""Smoke test of lag_plot.py (README's lag picture): one short run of each
mode, its numbers written as JSON.  It checks that the pieces fit and that
the blocking mode's block shows in both histograms, never what anything
costs.

    pytest benchmarks/test_lag_plot_smoke.py
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "lag_plot.py")

pytest.importorskip("uvicorn", reason="uvicorn not installed (the test extra has it)")
pytest.importorskip("httptools", reason="httptools not installed")


@pytest.mark.skipif(not shutil.which("wrk"), reason="wrk not installed")
def test_blocking_mode_shows_its_block(tmp_path):
    out = tmp_path / "lag.json"
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--duration", "1", "--connections", "2", "--every", "50",
         "--block", "0.03", "--json", str(out), "--no-plot"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())["results"]
    assert set(results) == {"healthy", "blocking"}
    blocking = results["blocking"]
    # A 30 ms sleep inside a callback is one busy stretch of at least 30 ms,
    # and the periodic job's 10 ms timer falls due during it.
    assert blocking["busy"]["max"] >= 0.03
    assert blocking["lag"]["max"] >= 0.015
    assert blocking["requests_per_s"] > 0 and results["healthy"]["requests_per_s"] > 0
