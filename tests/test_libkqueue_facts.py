"""What libkqueue does where a kernel's kqueue would do otherwise, checked
on the test build of the kqueue poller (setup.py's MINLOOP_POLLER=kqueue).

src/poller_kqueue.c's essay and docs/development.md state these facts; the
tests keep them true for the libkqueue the build runs on.  They call
libkqueue itself (ctypes, its kqueue()/kevent()), not the loop.
"""

import ctypes
import os
import select
import subprocess
import sys
import time

import pytest

from conftest import OVER_LIBKQUEUE

only_over_libkqueue = pytest.mark.skipif(
    not OVER_LIBKQUEUE, reason="facts of libkqueue: the MINLOOP_POLLER=kqueue build on Linux")

EVFILT_READ, EVFILT_PROC = -1, -5
EV_ADD = 0x0001
NOTE_EXIT = 0x80000000


class Kevent(ctypes.Structure):
    # libkqueue's struct kevent (its sys/event.h), as the BSDs' before
    # FreeBSD 12's ext[] field.
    _fields_ = [("ident", ctypes.c_size_t), ("filter", ctypes.c_short),
                ("flags", ctypes.c_ushort), ("fflags", ctypes.c_uint),
                ("data", ctypes.c_ssize_t), ("udata", ctypes.c_void_p)]


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def libkqueue():
    """The libkqueue the loop module is linked with."""
    import minloop.loop
    lib = ctypes.CDLL(minloop.loop.__file__)   # its dependencies come with it
    kq = ctypes.CDLL("libkqueue.so.0", use_errno=True)
    del lib
    kq.kevent.argtypes = [ctypes.c_int, ctypes.POINTER(Kevent), ctypes.c_int,
                          ctypes.POINTER(Kevent), ctypes.c_int, ctypes.POINTER(Timespec)]
    return kq


def kevent(kq, fd, changes, nevents):
    """kevent() without waiting: the events, or OSError."""
    chg = (Kevent * max(len(changes), 1))(*changes)
    out = (Kevent * max(nevents, 1))()
    n = kq.kevent(fd, chg, len(changes), out, nevents, ctypes.byref(Timespec(0, 0)))
    if n < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return list(out[:n])


@only_over_libkqueue
def test_a_kqueue_holding_an_event_is_not_readable():
    """A kernel's kqueue descriptor is readable while it holds events; libkqueue's
    is the write end of a pipe (its close tells libkqueue to free the queue),
    never readable.  So a kqueue cannot be watched from the loop's poller here,
    as minloop/subprocess.py watches a kqueue per child on macOS and the BSDs:
    that path runs only against tests/test_subprocess.py's stand-in."""
    kq = libkqueue()
    fd = kq.kqueue()
    r, w = os.pipe()
    try:
        assert kevent(kq, fd, [Kevent(r, EVFILT_READ, EV_ADD)], 0) == []
        os.write(w, b"x")
        readable, _, _ = select.select([fd], [], [], 0.2)
        assert readable == []                  # a kernel's kqueue: [fd]
        [event] = kevent(kq, fd, [], 1)        # and yet it holds the event
        assert (event.ident, event.filter) == (r, EVFILT_READ)
    finally:
        os.close(fd)
        os.close(r)
        os.close(w)


@only_over_libkqueue
def test_an_exit_event_is_lost_once_the_child_was_reaped():
    """libkqueue reads a child's status for its NOTE_EXIT event when the event
    is collected (waitid(WNOWAIT)).  If another reaper took the child first,
    that read fails and the event is dropped: it never comes.  A kernel's
    kqueue hands the event over with the status it kept."""
    kq = libkqueue()
    fd = kq.kqueue()
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    try:
        assert kevent(kq, fd, [Kevent(child.pid, EVFILT_PROC, EV_ADD, NOTE_EXIT)], 0) == []
        assert child.wait() == 3               # reaped before the event is read
        for _ in range(3):
            assert kevent(kq, fd, [], 1) == []
            time.sleep(0.05)
    finally:
        os.close(fd)


@only_over_libkqueue
def test_an_exit_event_carries_the_status_while_the_child_is_unreaped():
    """The other half: collected before any reaper, the event's data is the
    child's wait status, as FreeBSD gives it (macOS: with NOTE_EXITSTATUS)."""
    kq = libkqueue()
    fd = kq.kqueue()
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    try:
        assert kevent(kq, fd, [Kevent(child.pid, EVFILT_PROC, EV_ADD, NOTE_EXIT)], 0) == []
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)   # exited, not reaped
        [event] = kevent(kq, fd, [], 1)
        assert event.ident == child.pid and os.waitstatus_to_exitcode(event.data) == 3
        assert child.wait() == 3
    finally:
        os.close(fd)


def test_every_listed_difference_marks_a_test():
    """conftest.LIBKQUEUE_DIFFERS holds only reasons some test gives: an
    entry whose tests are gone (or were fixed) goes too.  (An unlisted key
    fails at collection.)  Runs on every build."""
    import glob
    import re
    from conftest import LIBKQUEUE_DIFFERS
    here = os.path.dirname(os.path.abspath(__file__))
    used = set()
    for path in glob.glob(os.path.join(here, "test_*.py")):
        with open(path, encoding="utf-8") as f:
            used.update(re.findall(r'@pytest\.mark\.libkqueue_differs\("([^"]+)"\)', f.read()))
    assert used == set(LIBKQUEUE_DIFFERS)
