"""The fd table's C unit (src/fd_table.h) on its own, against the real poller.

tests/c/fd_table_check.c installs fake items and checks, rule by rule of
"The fd table and the kernel", the registration the table asks for and what
the kernel then reports; it runs once as built and once under valgrind's
memcheck where valgrind is installed (no invalid access, no leak).
"""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
CHECK = os.path.join(ROOT, "tests", "c", "fd_table_check.c")
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
VALGRIND = shutil.which("valgrind")

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX only"),
    pytest.mark.skipif(CC is None, reason="no C compiler"),
    pytest.mark.skipif(not os.path.exists(CHECK), reason="not in a source tree"),
]

# Built and run without the sanitizer runtime a sanitized test run preloads:
# valgrind cannot share a process with it.
_ENV = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "DYLD_INSERT_LIBRARIES")}


@pytest.fixture(scope="module")
def fd_table_check(tmp_path_factory):
    exe = tmp_path_factory.mktemp("fd_table") / "fd_table_check"
    sources = [CHECK] + [os.path.join(SRC, name) for name in
                         ("fd_table.c", "poller_epoll.c", "poller_kqueue.c")]
    out = subprocess.run(
        [CC, "-std=c99", "-D_GNU_SOURCE", "-g", "-O0", "-Wall", "-Werror", "-I", SRC,
         *sources, "-o", str(exe)],
        capture_output=True, text=True, env=_ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    return exe


def _checks(out):
    assert out.returncode == 0, out.stderr[-3000:]
    ok, count = out.stdout.split()
    assert ok == "ok" and int(count) > 200
    return int(count)


def test_fd_table_rules(fd_table_check):
    _checks(subprocess.run([str(fd_table_check)], capture_output=True, text=True,
                           timeout=60, env=_ENV))


@pytest.mark.skipif(VALGRIND is None, reason="valgrind is not installed")
def test_fd_table_under_memcheck(fd_table_check):
    out = subprocess.run(
        [VALGRIND, "-q", "--tool=memcheck", "--leak-check=full",
         "--errors-for-leak-kinds=all", "--error-exitcode=99", str(fd_table_check)],
        capture_output=True, text=True, timeout=300, env=_ENV)
    _checks(out)
