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
import sys

import pytest

from c_checks import CC, ROOT, SRC, VALGRIND, build, run, run_under_memcheck

CHECK = os.path.join(ROOT, "tests", "c", "timer_heap_check.c")

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX only"),
    pytest.mark.skipif(CC is None, reason="no C compiler"),
    pytest.mark.skipif(not os.path.exists(CHECK), reason="not in a source tree"),
]

# The second build renumbers seqs every thousand pushes, and takes the bulk
# path of heap_drain_due() from 64 timers on (the real thresholds need
# heaps too big to check often).
BUILDS = {"as-used": [], "small-limits": ["-DHEAP_SEQ_MAX=1000", "-DHEAP_BULK_MIN_LEN=64"]}


@pytest.fixture(scope="module", params=sorted(BUILDS))
def timer_heap_check(request, tmp_path_factory):
    exe = tmp_path_factory.mktemp("timer_heap") / f"timer_heap_check_{request.param}"
    # -O2 as the extensions are built (the optimiser is where a strict
    # aliasing or overflow slip would show).
    return build(exe, ["-O2", "-Wall", "-Wextra", "-Werror", *BUILDS[request.param]],
                 [CHECK, os.path.join(SRC, "timer_heap.c"), "-lm"])


def test_timer_heap(timer_heap_check):
    run(timer_heap_check, 100_000, timeout=120)


@pytest.mark.skipif(VALGRIND is None, reason="valgrind is not installed")
# valgrind runs the check tens of times slower: the conftest's 15 s limit
# for a test is far too short on a loaded machine.
@pytest.mark.timeout(600)
def test_timer_heap_under_memcheck(timer_heap_check):
    run_under_memcheck(timer_heap_check, 100_000, timeout=600)
