"""The package is typed: mypy accepts a typed use of the public API and
rejects misuse (py.typed and the .pyi stubs of the compiled modules)."""

import os
import subprocess
import sys

import pytest

# mypy is compiled without sub-interpreter support (scripts/pytest-in-interpreter).
pytest.importorskip("mypy", exc_type=ImportError)

HERE = os.path.join(os.path.dirname(__file__), "typecheck")


def mypy(path):
    return subprocess.run(
        # follow-imports=silent: judge the example against minloop's types
        # without reporting on minloop's own (untyped) implementation, as
        # for any installed package.
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--no-incremental", "--cache-dir", os.devnull, "--no-error-summary",
         path],
        capture_output=True, text=True, timeout=300)


def test_typed_usage_passes():
    out = mypy(os.path.join(HERE, "usage.py"))
    assert out.returncode == 0, out.stdout + out.stderr


def test_misuse_is_rejected():
    out = mypy(os.path.join(HERE, "mistakes.py"))
    lines = sorted(line.split(":")[1] for line in out.stdout.splitlines()
                   if ": error:" in line)
    assert lines == ["10", "11", "12"], out.stdout + out.stderr
