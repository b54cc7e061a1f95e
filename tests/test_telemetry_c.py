"""src/telemetry.h on its own (tests/c/telemetry_check.c): every histogram
bucket against a model (a value on a bound lies in the bucket it closes),
recording, reading and reset, and the clock words behind utilization.
Built as the loop builds it (-O2), run once as built and once under
valgrind's memcheck where valgrind is installed."""
import os
import sys

import pytest

from c_checks import CC, ROOT, VALGRIND, build, run, run_under_memcheck

CHECK = os.path.join(ROOT, "tests", "c", "telemetry_check.c")

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX only"),
    pytest.mark.skipif(CC is None, reason="no C compiler"),
    pytest.mark.skipif(not os.path.exists(CHECK), reason="not in a source tree"),
]


@pytest.fixture(scope="module")
def telemetry_check(tmp_path_factory):
    exe = tmp_path_factory.mktemp("telemetry") / "telemetry_check"
    return build(exe, ["-O2", "-Wall", "-Wextra", "-Werror"], [CHECK, "-lm"])


def test_telemetry_c(telemetry_check):
    run(telemetry_check, 1000, timeout=60)


@pytest.mark.skipif(VALGRIND is None, reason="valgrind is not installed")
# valgrind runs the check tens of times slower: the conftest's 15 s limit
# for a test is far too short on a loaded machine.
@pytest.mark.timeout(300)
def test_telemetry_c_under_memcheck(telemetry_check):
    run_under_memcheck(telemetry_check, 1000, timeout=300)
