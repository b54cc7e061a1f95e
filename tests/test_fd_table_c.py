"""The fd table's C unit (src/fd_table.h) on its own, against the real poller.

tests/c/fd_table_check.c installs fake items and checks, rule by rule of
"The fd table and the kernel", the registration the table asks for and what
the kernel then reports; it runs once as built and once under valgrind's
memcheck where valgrind is installed (no invalid access, no leak).
"""
import os
import sys

import pytest

from c_checks import CC, ROOT, SRC, VALGRIND, build, run, run_under_memcheck

CHECK = os.path.join(ROOT, "tests", "c", "fd_table_check.c")

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX only"),
    pytest.mark.skipif(CC is None, reason="no C compiler"),
    pytest.mark.skipif(not os.path.exists(CHECK), reason="not in a source tree"),
]


@pytest.fixture(scope="module")
def fd_table_check(tmp_path_factory):
    exe = tmp_path_factory.mktemp("fd_table") / "fd_table_check"
    sources = [CHECK] + [os.path.join(SRC, name) for name in
                         ("fd_table.c", "poller_epoll.c", "poller_kqueue.c")]
    return build(exe, ["-O0", "-Wall", "-Werror"], sources)


def test_fd_table_rules(fd_table_check):
    run(fd_table_check, 200, timeout=60)


@pytest.mark.skipif(VALGRIND is None, reason="valgrind is not installed")
# valgrind runs the check tens of times slower: the conftest's 15 s limit
# for a test is far too short on a loaded machine.
@pytest.mark.timeout(300)
def test_fd_table_under_memcheck(fd_table_check):
    run_under_memcheck(fd_table_check, 200, timeout=300)
