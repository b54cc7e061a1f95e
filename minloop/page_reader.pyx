# cython: freethreading_compatible=True
"""Reading a loop's telemetry page from another process, for
`python -m minloop top` (minloop/top.py).

A loop keeps its telemetry in a memfd page (src/telemetry_page.h says why
and how).  A Page maps one read-only -- from /proc/PID/fd/N of the process
that owns it, or any path to the memfd -- and reads it with the very C
definitions the loop writes it with, so the layout cannot drift; a page of
another layout (another minloop build) is refused, not misread.  Reading
costs the loop nothing: no syscall, no signal, no lock it would wait on.
"""

from libc.stdint cimport int64_t, uint64_t, uint32_t
from libc.string cimport memcpy
from posix.mman cimport mmap, munmap, PROT_READ, MAP_SHARED, MAP_FAILED

from .includes cimport (MINLOOP_TELEMETRY, TM_BUCKETS, TM_NOTE_TEXT, TM_THREAD_NAME,
                        TM_PAGE_CLOSED, tm_page_read_thread_name, tm_stall,
                        TM_PAGE_SHAREABLE, tm_loop, tm_page, tm_state, tm_counters, tm_hist_copy,
                        tm_page_check, tm_read_state, tm_page_read_note, tm_read_counters,
                        tm_read_clock, tm_read_held, tm_hist_read, tm_lag, tm_busy, tm_bucket_bound,
                        monotonic_now)

import os

#: How a memfd page shows in /proc/PID/fd (readlink).
PAGE_LINK = '/memfd:minloop-loop'

#: Whether this build can publish or read pages at all.
SHAREABLE = bool(TM_PAGE_SHAREABLE)
TELEMETRY = bool(MINLOOP_TELEMETRY)

_REFUSALS = {
    1: 'not a minloop telemetry page',
    2: 'a page of another layout version (another minloop release)',
    3: 'a page of another layout (another build of minloop)',
    4: 'this minloop was built with MINLOOP_NO_TELEMETRY=1 and cannot read it',
}


class PageError(Exception):
    """A page that cannot be read (its reason as the message)."""


cdef double NS = 1e9


cdef tuple _hist(tm_hist_copy *c):
    # (counts, count, sum, min, max): seconds, counts as a tuple
    return (tuple([c.counts[i] for i in range(TM_BUCKETS)]), c.count,
            c.sum / NS, c.min / NS, c.max / NS)


def bucket_bounds():
    """Each bucket's inclusive upper bound in seconds (the last: inf)."""
    return tuple(float('inf') if i == TM_BUCKETS - 1 else tm_bucket_bound(i) / NS
                 for i in range(TM_BUCKETS))


cdef class Page:
    """One loop's page, mapped read-only (open(path)); read() snapshots it."""

    cdef const tm_page *_p
    cdef size_t _len
    cdef readonly str path

    def __cinit__(self, path):
        self.path = os.fsdecode(path)
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            if size <= 0:
                raise PageError(f'{self.path}: {_REFUSALS[1]}')
            m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0)
            if m == MAP_FAILED:
                raise OSError(f'cannot map {self.path}')
        finally:
            os.close(fd)
        self._p = <const tm_page *>m
        self._len = size
        rc = tm_page_check(self._p, self._len)
        if rc:
            self.close()
            raise PageError(f'{self.path}: {_REFUSALS[rc]}')

    def __dealloc__(self):
        self.close()

    def close(self):
        if self._p != NULL:
            munmap(<void *>self._p, self._len)
            self._p = NULL

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def read(self):
        """A dict of what the page holds now (times in seconds of the
        loop's clock, time.monotonic(), which is the system's)."""
        if not MINLOOP_TELEMETRY:   # (Page() refuses every page there)
            raise NotImplementedError(_REFUSALS[4])
        if self._p == NULL:
            raise ValueError('page is closed')
        cdef const tm_page *p = self._p
        cdef tm_state st
        cdef tm_counters c
        cdef tm_hist_copy lag, busy, stall
        cdef char thread_name[TM_THREAD_NAME]
        cdef int64_t elapsed, idle, note_since = 0
        cdef uint64_t note_no = 0
        cdef char note_cb[TM_NOTE_TEXT]
        cdef char note_where[TM_NOTE_TEXT]
        cdef double now = monotonic_now()
        cdef bint note_ok
        cdef uint64_t ready, timers, fds
        # C only from here to the dict: one moment as near as can be.
        tm_read_state(&p.tm, &st)
        tm_read_counters(&p.tm, &c)
        tm_read_held(&p.tm, &ready, &timers, &fds)
        tm_read_clock(&p.tm, now, &elapsed, &idle)
        tm_hist_read(tm_lag(<tm_loop *>&p.tm), &lag)
        tm_hist_read(tm_busy(<tm_loop *>&p.tm), &busy)
        tm_hist_read(tm_stall(<tm_loop *>&p.tm), &stall)
        tm_page_read_thread_name(p, thread_name)
        note_ok = tm_page_read_note(p, &note_no, &note_since, note_cb, note_where)
        return {
            'time': now,
            'loop_id': p.loop_id,
            'interp': p.interp,
            'pid': p.pid,
            'tid': p.tid,
            'thread_name': thread_name.decode('utf-8', 'replace'),
            'closed': bool(p.flags & TM_PAGE_CLOSED),
            'running': st.run_since != 0,
            'sleeping': st.sleep_since != 0,
            'woke': st.woke / NS,
            'clock_seq': st.seq,
            'callbacks': c.callbacks,
            'iterations': c.polls_blocked + c.polls_immediate + c.polls_skipped,
            'fd_events': c.fd_events,
            'exceptions': c.exceptions,
            'timers_fired': c.timers_fired,
            'ready': ready,
            'timers': timers,
            'fds': fds,
            'elapsed': elapsed / NS,
            'idle': idle / NS,
            'lag': _hist(&lag),
            'busy': _hist(&busy),
            'stall': _hist(&stall),
            'stall_threshold': p.stall_threshold_ns / NS,
            'note': ((note_no, note_since / NS,
                      note_cb.decode('utf-8', 'replace'),
                      note_where.decode('utf-8', 'replace')) if note_ok else None),
        }
