"""The loop core's boundaries (issue 44, items 2, 3 and 6), checked in the
sources: the loop's write-flush state is reached through loop.pxd's hooks
alone, the loop does not use fd_owners (which uses the loop), and the
thread check has one compiled name."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "minloop")
LOOP = ("loop.pyx", "loop.pxd")


def _sources():
    for dirpath, _, names in os.walk(PKG):
        for name in sorted(names):
            if name.endswith((".py", ".pyx", ".pxd", ".pxi")):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    yield os.path.relpath(path, PKG), f.read()


def test_sources_are_found():
    names = {name for name, _ in _sources()}
    assert {"loop.pyx", "loop.pxd", "stream.pyx", "fd_owners.pxd"} <= names


def test_only_the_loop_names_its_flush_state():
    # The transports hold writes through writes_can_wait(), schedule_flush()
    # and the other hooks at the end of loop.pxd.
    offenders = [name for name, text in _sources()
                 if name not in LOOP and "_flushes" in text]
    assert offenders == []


def test_the_loop_neither_imports_nor_cimports_fd_owners():
    # Including imports inside functions: fd_owners.pxd cimports the loop.
    use = re.compile(r"^\s*(?:from|import|cimport)\b[^#\n]*\bfd_owners\b", re.M)
    for name in LOOP:
        with open(os.path.join(PKG, name), encoding="utf-8") as f:
            assert not use.search(f.read()), name


def test_one_compiled_thread_check():
    # check_loop_thread (loop.pxd) is the check; LoopCore._check_thread its
    # Python face (asyncio's name).
    for name, text in _sources():
        assert "_check_thread_fast" not in text, name
        assert not re.search(r"cdef[^\n]*\b_check_thread\b", text), name
