"""Smoke test of server_instructions.py (the callgrind driver): each server
kind runs its round trips to the end and shuts down cleanly, on minloop and
on asyncio's loop.

    pytest benchmarks/test_server_instructions_smoke.py

It checks that the pieces fit, never how many instructions anything takes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server_instructions.py")


NEEDS = {"http": "httptools", "uvicorn": "uvicorn", "uvicorn-json": "uvicorn",
         "aiohttp": "aiohttp", "websockets": "websockets"}


@pytest.mark.parametrize("loop", ["minloop", "asyncio"])
@pytest.mark.parametrize("kind, depth", [("streams", 1), ("sock", 1), ("protocol", 1),
                                         ("buffered", 1), ("protocol", 4), ("http", 1),
                                         ("http", 8), ("uvicorn", 1), ("uvicorn-json", 1),
                                         ("aiohttp", 1), ("websockets", 1), ("websockets", 4),
                                         ("streams-msg", 16), ("protocol-msg", 16),
                                         ("streams-lines", 1), ("streams-lines", 4)])
def test_kind_runs_to_the_end(kind, depth, loop):
    if kind in NEEDS:
        pytest.importorskip(NEEDS[kind])
        if kind.startswith("uvicorn"):
            pytest.importorskip("httptools")
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--kind", kind, "--loop", loop, "--connections", "4",
         "--round-trips", "300", "--depth", str(depth)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # A server task left pending at close, or an exception nobody read,
    # would be reported on stderr by asyncio.
    assert proc.stderr == ""
