# cython: freethreading_compatible=True
"""loop.set_stall_handler(): a watchdog that reports a callback which keeps
the loop from running for longer than a threshold.

asyncio has nothing like it beyond debug mode's `slow_callback_duration`
warning, which times every callback (two clock reads each) and can only
say so after the callback returns.  Here the loop pays no clock read: a
thread that waits without the GIL watches the count of callbacks started
(src/stall.h says how, and why the reads are safe), samples the loop
thread's Python stack while the callback is still blocked, and the loop
then hands the handler a StallReport on its own thread (docs/telemetry.md,
"Stalls").
"""

from libc.stdint cimport int64_t, uint64_t

from .includes cimport (MINLOOP_TELEMETRY, MINLOOP_SAMPLES_STACKS, stall_watch,
                        stall_now_ns, stall_init, stall_destroy, stall_after_fork,
                        stall_wait, stall_stop, stall_end, stall_still_in,
                        tm_callbacks, xt_load_int, xt_load_ulong, tm_page_of,
                        tm_page_note, tm_page_stall_threshold, TM_NOTE_TEXT,
                        tm_stall, tm_hist_record)
from .handles cimport Handle
from .loop cimport LoopCore

import collections
import gc
import math
import os
import sys
import threading
import traceback

from asyncio import futures as _aio_futures
from asyncio import tasks as _aio_tasks

from ._subinterpreters import daemon_threads_allowed

cdef object _current_frames = sys._current_frames
cdef object _get_ident = threading.get_ident
cdef object _FrameSummary = traceback.FrameSummary

# A sampled stack keeps at most this many frames, the innermost ones.
cdef Py_ssize_t MAX_FRAMES = 64
# Longer thresholds watch as a year's would.
cdef double MAX_THRESHOLD = 365 * 86400.0
# Collections remembered for gc_time (a stall overlapping more is rare).
cdef Py_ssize_t GC_SPANS = 64

# The watches armed in this process (for fork: their threads do not follow).
_armed = set()


cdef class StallReport:
    """A callback that ran for at least the threshold (a stall handler's
    argument).

    duration: seconds it ran (never less: it may be longer by up to a
        quarter of the threshold, at most 20 ms);
    callback: the repr of the task running, taken during the stall (as
        `stack` is: `<Task pending ... running at app.py:12>`), or, for a
        plain callback or where no sample was taken, the callback's repr;
    stack: the loop thread's Python stack sampled during the stall, a
        traceback.StackSummary (innermost last: the line that blocked), or
        empty when no sample could be taken (a call holding the GIL that
        returned from the callback at once, a free-threaded build);
    gc_time: seconds the cyclic collector ran on the loop's thread during
        the stall.
    """

    cdef readonly double duration
    cdef readonly str callback
    cdef readonly object stack
    cdef readonly double gc_time

    def __init__(self, double duration, str callback, stack, double gc_time):
        self.duration = duration
        self.callback = callback
        self.stack = stack
        self.gc_time = gc_time

    def __repr__(self):
        where = ''
        if self.stack:
            f = self.stack[-1]
            where = f' at {f.filename}:{f.lineno}'
        return (f'<StallReport {self.duration:.3f}s in {self.callback}{where}'
                f' gc_time={self.gc_time:.3f}s>')


cdef bytes _note_text(str text):
    """text as UTF-8 that fits a note's field, cut at a character."""
    cdef bytes b = text.encode('utf-8', 'replace')
    if len(b) < TM_NOTE_TEXT:
        return b
    return b[:TM_NOTE_TEXT - 4].decode('utf-8', 'ignore').encode() + b'...'


cdef str _describe(Handle handle):
    """The stalled callback as the report names it."""
    owner = getattr(handle._callback, '__self__', None)
    if _aio_futures.isfuture(owner) and hasattr(owner, 'get_coro'):
        return repr(owner)   # a Task's step or wake-up: the task says more
    return repr(handle)


cdef class StallWatch:
    """One armed handler: the watchdog thread, its C state, the sample."""

    cdef stall_watch _w
    cdef bint _made
    cdef LoopCore _loop
    cdef readonly object handler
    cdef readonly double threshold
    cdef object _thread
    # The stack sampled for callback number _sample_of: raw
    # (filename, lineno, name) tuples, innermost last.
    cdef uint64_t _sample_of
    cdef object _sample
    cdef object _sample_callback   # the current task's repr then, or None
    # Collections on the loop's thread: (start_ns, end_ns), most recent last.
    cdef object _gc_spans
    cdef int64_t _gc_start
    cdef object _gc_hook

    def __cinit__(self, LoopCore loop, handler, double threshold):
        # In ns, a year at most (int64 holds 292 of them).
        cdef int rc = stall_init(&self._w, loop._tm,
                                 <int64_t>(min(threshold, MAX_THRESHOLD) * 1e9))
        if rc < 0:
            raise OSError(-rc, os.strerror(-rc))
        self._made = True
        self._loop = loop
        self.handler = handler
        self.threshold = threshold
        self._gc_spans = collections.deque(maxlen=GC_SPANS)

    def __dealloc__(self):
        # Only once the thread has ended: it holds this object.
        if self._made:
            stall_destroy(&self._w)

    def start(self):
        self._gc_hook = self._on_gc
        gc.callbacks.append(self._gc_hook)
        _armed.add(self)
        daemon = daemon_threads_allowed()
        if not daemon:
            _stop_watches_at_exit()
        self._thread = threading.Thread(target=self._watch, daemon=daemon,
                                        name='minloop-stall-watchdog')
        self._thread.start()

    def stop(self):
        """Stop the watchdog and wait for its thread (idempotent)."""
        stall_stop(&self._w)
        _armed.discard(self)
        self._forget_gc_hook()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    cdef _forget_gc_hook(self):
        if self._gc_hook is not None:
            try:
                gc.callbacks.remove(self._gc_hook)
            except ValueError:
                pass
            self._gc_hook = None

    def _after_fork_in_child(self):
        # The thread did not follow; the loop keeps no handler.
        stall_after_fork(&self._w)
        self._forget_gc_hook()
        self._thread = None
        if self._loop._stall is self:
            self._loop._stall_swap(None)
            tm_page_stall_threshold(tm_page_of(self._loop._tm), 0)

    # ------------------------------------------------------------------
    # The watchdog's thread

    def _watch(self):
        cdef uint64_t cb = 0
        cdef int found
        while True:
            with nogil:
                found = stall_wait(&self._w, &cb)
            if not found:
                return
            # The GIL again: if the callback still runs, the loop's thread
            # is parked inside it.
            self._take_sample(cb)

    cdef _take_sample(self, uint64_t cb):
        # No bytecode runs from the check to the copy of the frames (only C
        # calls), so the loop's thread cannot move in between: the lines are
        # where it was parked.  An allocation may run a collection, whose
        # finalizers may let it move: so look again after.
        if not MINLOOP_SAMPLES_STACKS or not stall_still_in(&self._w, cb):
            return
        frame = _current_frames().get(xt_load_ulong(&self._loop._thread_ident))
        raw = []
        while frame is not None and len(raw) < MAX_FRAMES:
            code = frame.f_code
            raw.append((code.co_filename, frame.f_lineno, code.co_name))
            frame = frame.f_back
        # The task as it stalls (`running at` the line it blocks on): after
        # the callback returns it would be another state and line.  A plain
        # callback has no task: its handle's repr, taken as it ends, says
        # as much.
        try:
            task = _aio_tasks.current_task(self._loop)
            callback = repr(task) if task is not None else None
        except Exception:
            callback = None
        if not stall_still_in(&self._w, cb):
            return
        raw.reverse()
        self._sample = raw
        self._sample_callback = callback
        self._sample_of = cb
        self._note(cb, raw, callback or '')

    cdef _note(self, uint64_t cb, list raw, str callback):
        # For `python -m minloop top` (src/telemetry_page.h): what stalls
        # and where, in the loop's page, while it lasts.  The GIL is held:
        # one writer.  The note names the callback by number, so top shows
        # it only while that one runs.
        where = ''
        if raw:
            where = '%s:%d in %s' % raw[-1]
        tm_page_note(tm_page_of(self._loop._tm), cb, self._w.since,
                     _note_text(callback), _note_text(where))

    # ------------------------------------------------------------------
    # The loop's thread

    def _on_gc(self, phase, info):
        if _get_ident() != xt_load_ulong(&self._loop._thread_ident):
            return
        if phase == 'start':
            self._gc_start = stall_now_ns()
        elif self._gc_start:
            self._gc_spans.append((self._gc_start, stall_now_ns()))
            self._gc_start = 0

    cdef double _gc_seconds(self, int64_t since, int64_t end):
        cdef int64_t total = 0, start, stop
        for start, stop in self._gc_spans:
            if start < since:
                start = since
            if stop > end:
                stop = end
            if stop > start:
                total += stop - start
        return total / 1e9

    def _callback_ended(self, Handle handle):
        """The loop saw the flag as `handle` returned (loop.pyx)."""
        cdef int64_t end = stall_now_ns(), since = 0
        cdef uint64_t cb = tm_callbacks(self._loop._tm)
        if not stall_end(&self._w, cb, &since):
            return   # a flag of an earlier watch, or reported
        # Counted by the loop as it returns, whatever the handler (if any)
        # does: loop.stalls, the exporters' stall metrics, top.
        tm_hist_record(tm_stall(self._loop._tm), <double>(end - since))
        if self.handler is None:
            self._sample = self._sample_callback = None
            return   # armed to count only (set_stall_threshold)
        raw = callback = None
        if self._sample_of == cb:
            raw, callback = self._sample, self._sample_callback
        self._sample = self._sample_callback = None
        try:
            report = StallReport(
                (end - since) / 1e9, callback or _describe(handle),
                traceback.StackSummary.from_list(
                    [_FrameSummary(f, n, name, lookup_line=False)
                     for f, n, name in raw or ()]),
                self._gc_seconds(since, end))
        except Exception as exc:
            self._loop.call_exception_handler({
                'message': 'Failed to make a stall report',
                'exception': exc,
                'handle': handle,
            })
            return
        self._loop.call_soon(self.handler, report)


def set_stall_threshold(LoopCore loop, threshold):
    """loop.set_stall_threshold()'s body (base_events.Loop): arm the
    watchdog with the handler armed now, or none (stalls only counted)."""
    if not MINLOOP_TELEMETRY:
        _no_telemetry('set_stall_threshold')
    if threshold is None:
        _disarm(loop)
        return
    watch = loop._stall
    _arm(loop, watch.handler if watch is not None else None, threshold)


def set_stall_handler(LoopCore loop, handler, threshold):
    """loop.set_stall_handler()'s body (base_events.Loop)."""
    if not MINLOOP_TELEMETRY:
        _no_telemetry('set_stall_handler')
    if handler is None:
        _disarm(loop)
        return
    if not callable(handler):
        raise TypeError(f'A callable object or None is expected, got {handler!r}')
    _arm(loop, handler, threshold)


cdef _no_telemetry(str name):
    raise NotImplementedError(
        f"loop.{name}() is not available: this minloop was built "
        "with MINLOOP_NO_TELEMETRY=1, which compiles out the callback count "
        "its watchdog watches")


cdef _disarm(LoopCore loop):
    old = loop._stall_swap(None)
    tm_page_stall_threshold(tm_page_of(loop._tm), 0)
    if old is not None:
        old.stop()


cdef _arm(LoopCore loop, handler, threshold):
    # handler None: count the stalls, report none.
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise TypeError(f'threshold should be a positive number, got {threshold!r}')
    if not (0 < threshold < math.inf):
        raise ValueError(f'threshold should be a positive number, got {threshold!r}')
    if xt_load_int(&loop._closed):
        raise RuntimeError('Event loop is closed')
    watch = StallWatch(loop, handler, float(threshold))
    old = loop._stall_swap(watch)
    tm_page_stall_threshold(tm_page_of(loop._tm),
                            <int64_t>(min(float(threshold), MAX_THRESHOLD) * 1e9))
    watch.start()
    if old is not None:
        old.stop()
    if xt_load_int(&loop._closed):
        # close() ran since the check above and may have missed this one.
        if loop._stall_swap(None) is watch:
            watch.stop()


_stops_at_exit = False


def _stop_watches_at_exit():
    # Where the watchdog cannot be a daemon (a sub-interpreter), the
    # interpreter's exit would wait for it forever: stop every watch first,
    # as concurrent.futures stops its workers.
    global _stops_at_exit
    if not _stops_at_exit:
        threading._register_atexit(_stop_armed)
        _stops_at_exit = True


def _stop_armed():
    for watch in list(_armed):
        watch.stop()


def _after_fork_in_child():
    for watch in list(_armed):
        watch._after_fork_in_child()
    _armed.clear()


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_after_fork_in_child)
