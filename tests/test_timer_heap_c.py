"""The timer heap's C unit (src/timer_heap.h) on its own, against a model.

tests/c/timer_heap_check.c pushes, pops, removes and drains fake timers and
checks the order (FIFO among equal deadlines), removal by token, draining
the due timers by either path (a refused one stays in), growth and
shrinking, and the heap's internal arrays after every step.  It is built
twice: as the loop uses it, and with small limits, so that the 32-bit push
counter is renumbered hundreds of times and small heaps take the bulk path;
each build runs once as built and once under valgrind's memcheck where
valgrind is installed (no invalid access, no leak).
"""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
CHECK = os.path.join(ROOT, "tests", "c", "timer_heap_check.c")
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

# The second build renumbers seqs every thousand pushes, and takes the bulk
# path of heap_drain_due() from 64 timers on (the real thresholds need
# heaps too big to check often).
BUILDS = {"as-used": [], "small-limits": ["-DHEAP_SEQ_MAX=1000", "-DHEAP_BULK_MIN_LEN=64"]}


@pytest.fixture(scope="module", params=sorted(BUILDS))
def timer_heap_check(request, tmp_path_factory):
    exe = tmp_path_factory.mktemp("timer_heap") / f"timer_heap_check_{request.param}"
    # -O2 as the extensions are built (the optimiser is where a strict
    # aliasing or overflow slip would show).
    out = subprocess.run(
        [CC, "-std=c99", "-D_GNU_SOURCE", "-g", "-O2", "-Wall", "-Wextra", "-Werror",
         *BUILDS[request.param], "-I", SRC, CHECK, os.path.join(SRC, "timer_heap.c"),
         "-lm", "-o", str(exe)],
        capture_output=True, text=True, env=_ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    return exe


def _checks(out):
    assert out.returncode == 0, out.stderr[-3000:]
    ok, count = out.stdout.split()
    assert ok == "ok" and int(count) > 100_000
    return int(count)


def test_timer_heap(timer_heap_check):
    _checks(subprocess.run([str(timer_heap_check)], capture_output=True, text=True,
                           timeout=120, env=_ENV))


@pytest.mark.skipif(VALGRIND is None, reason="valgrind is not installed")
def test_timer_heap_under_memcheck(timer_heap_check):
    out = subprocess.run(
        [VALGRIND, "-q", "--tool=memcheck", "--leak-check=full",
         "--errors-for-leak-kinds=all", "--error-exitcode=99", str(timer_heap_check)],
        capture_output=True, text=True, timeout=600, env=_ENV)
    _checks(out)
