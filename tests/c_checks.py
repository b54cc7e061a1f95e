"""Building and running the C checks in tests/c/ (one per C unit of src/).

Each check is a program printing "ok <number of checks>"; it runs once as
built and once under valgrind's memcheck where valgrind is installed (no
invalid access, no leak)."""
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
VALGRIND = shutil.which("valgrind")

# Built and run without the sanitizer runtime a sanitized test run preloads:
# valgrind cannot share a process with it.
ENV = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "DYLD_INSERT_LIBRARIES")}


def build(exe, flags, sources):
    """Compile `sources` (paths) into `exe` with `flags`; fail the test on errors."""
    out = subprocess.run([CC, "-std=c99", "-D_GNU_SOURCE", "-g", *flags, "-I", SRC,
                          *sources, "-o", str(exe)],
                         capture_output=True, text=True, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    return exe


def _checks(out, at_least):
    assert out.returncode == 0, out.stderr[-3000:]
    ok, count = out.stdout.split()
    assert ok == "ok" and int(count) > at_least
    return int(count)


def run(exe, at_least, timeout):
    """Run the check; it must pass more than `at_least` checks."""
    return _checks(subprocess.run([str(exe)], capture_output=True, text=True,
                                  timeout=timeout, env=ENV), at_least)


def run_under_memcheck(exe, at_least, timeout):
    """The same under valgrind: any invalid access or leak fails it."""
    out = subprocess.run(
        [VALGRIND, "-q", "--tool=memcheck", "--leak-check=full",
         "--errors-for-leak-kinds=all", "--error-exitcode=99", str(exe)],
        capture_output=True, text=True, timeout=timeout, env=ENV)
    return _checks(out, at_least)
