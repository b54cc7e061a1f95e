"""The ready ring's cross-thread hand-off (src/ready_ring.h), in C threads.

No free-threaded Python runs here, so the lock a free-threaded build puts in
the ring (a PyMutex) is tested as the pthread mutex src/cross_thread.h
substitutes under MINLOOP_XT_PTHREAD: tests/c/ring_hammer.c has 8 threads
push while a consumer pops and sleeps on the wake-up fd, and checks every
item arrives once and in order and no wake-up is lost, then closes the
ring while they push and wake (no producer may write to the wake-up fd once
close returns); ThreadSanitizer watches where the compiler has it.  The
controls build the same program with the GIL build's lock (none: TSan must
see the races) and with ring_close() not waiting for producers (one must
then write to the closed fd): otherwise the hammer could not catch either.
"""
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
HAMMER = os.path.join(ROOT, "tests", "c", "ring_hammer.c")
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX only"),
    pytest.mark.skipif(CC is None, reason="no C compiler"),
    pytest.mark.skipif(not os.path.exists(HAMMER), reason="not in a source tree"),
]


# The C programs are built and run without the sanitizer runtime a sanitized
# test run preloads (ASan's, in .ci/run and the workflow): ThreadSanitizer
# cannot share a process with it.
_ENV = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "DYLD_INSERT_LIBRARIES")}


def _build(tmp_path, name, flags, src=SRC):
    exe = tmp_path / name
    cmd = [CC, "-std=c99", "-D_GNU_SOURCE", "-g", "-I", str(src), *flags, HAMMER,
           os.path.join(str(src), "wakeup.c"), "-o", str(exe), "-lpthread"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_ENV)
    return exe if out.returncode == 0 else None


def _tsan(tmp_path):
    """-fsanitize=thread if this compiler links a program with it."""
    probe = tmp_path / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    out = subprocess.run([CC, "-fsanitize=thread", str(probe), "-o", str(tmp_path / "probe")],
                         capture_output=True, env=_ENV)
    if out.returncode == 0:
        # Linking is not enough: some kernels' address layouts make a TSan
        # program fail at start-up.
        out = subprocess.run([str(tmp_path / "probe")], capture_output=True, env=_ENV)
    return ["-fsanitize=thread", "-O1"] if out.returncode == 0 else []


def _run(exe):
    env = dict(_ENV, TSAN_OPTIONS="halt_on_error=1:exitcode=66")
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, env=env)


def test_hand_off_loses_nothing_and_misses_no_wakeup(tmp_path):
    """8 C threads x 20,000 pushes: each item once, per-thread FIFO, no lost wake-up."""
    exe = _build(tmp_path, "hammer", ["-DMINLOOP_XT_PTHREAD", *_tsan(tmp_path)])
    assert exe is not None, "ring_hammer.c did not compile"
    for _ in range(3):
        out = _run(exe)
        assert out.returncode == 0, out.stderr[-3000:]
        ok, items, wakeups = out.stdout.split()
        assert (ok, int(items)) == ("ok", 160_000)
        assert int(wakeups) > 0


def test_hammer_catches_an_unlocked_ring(tmp_path):
    """Control: the GIL build's ring (no lock) under real threads fails the hammer."""
    tsan = _tsan(tmp_path)
    if not tsan:
        pytest.skip("no ThreadSanitizer: an unlocked run may pass by luck")
    include = sysconfig.get_paths()["include"]
    exe = _build(tmp_path, "hammer-nolock", ["-I", include, *tsan])
    if exe is None:
        pytest.skip("cannot compile against Python.h here")
    out = _run(exe)
    assert out.returncode != 0, out.stdout


def test_hammer_catches_a_close_that_does_not_wait(tmp_path):
    """Control: if ring_close() returned without waiting, a producer would write to a closed fd."""
    src = tmp_path / "src"
    shutil.copytree(SRC, src)
    ring = src / "ready_ring.h"
    text = ring.read_text()
    wait = "        if (!waking)\n            break;"
    assert wait in text, "ring_close() changed: update this control"
    ring.write_text(text.replace(wait, "        break;"))
    exe = _build(tmp_path, "hammer-nowait", ["-DMINLOOP_XT_PTHREAD", "-O2"], src=src)
    assert exe is not None
    # The race needs a producer descheduled at the right moment, which the
    # hammer arranges with a nap; a busy machine may still miss it once.
    for _ in range(5):
        out = _run(exe)
        if "wrote to the wake-up fd after close" in out.stderr:
            break
    assert out.returncode == 1, out.stdout
    assert "wrote to the wake-up fd after close" in out.stderr
