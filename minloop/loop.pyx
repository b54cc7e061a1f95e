# cython: freethreading_compatible=True
# cython: binding=True
# (Cython's function type for LoopCore's methods: CPython's method descriptor
# checks `self` with PyType_IsSubtype on every call of a loop method, since
# loops are instances of the subclass Loop: about 50 instructions more per
# call_soon.  setup.py says why the other modules use the descriptors.)
"""LoopCore: the compiled heart of minloop's event loop.

It owns the ready queue (a C ring of Handle pointers), the timer heap, the
poller and the fd table, and implements the hot methods (call_soon, call_at,
the fd callbacks, _run_once, run_forever).  minloop.base_events.Loop adds the
rest of asyncio's AbstractEventLoop surface in Python on top of it.

_run_iteration (loop._run_once) follows asyncio's BaseEventLoop._run_once
step for step, each step an inline function named for it (_choose_timeout,
_poll_events, _queue_due_timers, _run_batch); see the comments there.
Reference ownership: the ring, the heap and the fd table each own one
reference to every handle they point to.
"""

import logging
import os
import sys
import threading as _threading
import time
import warnings as _warnings
import weakref


from asyncio import base_events as _aio_base_events
from asyncio import coroutines as _aio_coroutines
from asyncio import events as _aio_events
from asyncio import futures as _aio_futures
from asyncio import tasks as _aio_tasks
from . import _asyncio_compat

from cpython.exc cimport PyErr_CheckSignals
from cpython.object cimport PyObject, PyCallable_Check, Py_TYPE
from cpython.ref cimport Py_INCREF, Py_DECREF, Py_REFCNT, Py_CLEAR
from libc.errno cimport EINTR, ENOMEM
from libc.math cimport NAN, ceil, fmax, isnan, nextafter, INFINITY
from libc.stdint cimport int64_t
from libc.stdlib cimport calloc, free

from .includes cimport *
from .oserrors cimport os_error
from .handles cimport (PyObject_GC_IsTracked, Handle, TimerHandle, new_handle, new_timer,
                       handle_enqueued, handle_dequeued, handle_run,
                       new_threadsafe_handle,
                       handle_cancel, handle_cancelled, handle_gc_seen,
                       PyObject_GC_Track,
                       forget_context_snapshot)
from .loop_metrics cimport make_stats, make_utilization, utilization_between, histogram_view


cdef enum:
    MAX_EVENTS = 1024

# asyncio's cap on one wait: a timer a year away still wakes us daily, so
# a changed wall clock or a suspended machine cannot stall the loop forever.
cdef double MAXIMUM_SELECT_TIMEOUT = 24 * 3600

# asyncio's loop reads tasks.Task and futures.Future on every call, so a
# program (or CPython's TestPyGetEventLoop) that puts the pure-Python classes
# there gets them from any loop: read from the modules' dicts at each call.
cdef dict _tasks_namespace = _aio_tasks.__dict__
cdef dict _futures_namespace = _aio_futures.__dict__
# create_future() and create_task(): asyncio's C Future and Task, and the
# running loop as they find it.
cdef object _CFuture = _asyncio_compat.CFuture
cdef object _CTask = _asyncio_compat.CTask
cdef object _running_loop = _aio_events._get_running_loop
cdef bint _FUTURE_FINDS_RUNNING_LOOP = (
    _asyncio_compat.FUTURE_FINDS_RUNNING_LOOP_FAST and _CFuture is not None
    and _CTask is not None)
cdef bint _CREATE_TASK_PASSES_KWARGS = _asyncio_compat.CREATE_TASK_PASSES_KWARGS
cdef bint _CREATE_TASK_TAKES_KWARGS = _asyncio_compat.CREATE_TASK_TAKES_KWARGS
# 3.15's _run_once: end_time is at least one ulp after now (see there).
cdef bint _END_TIME_PAST_ULP = _asyncio_compat.END_TIME_PAST_ULP
cdef bint _THREADSAFE_HANDLES = _asyncio_compat.ThreadSafeHandle is not None
cdef object _iscoroutine = _aio_coroutines.iscoroutine
cdef object _iscoroutinefunction = _asyncio_compat.iscoroutinefunction
cdef object _format_handle = _aio_base_events._format_handle
cdef object _logger = logging.getLogger('asyncio')
cdef object _call_exception_handler = _aio_base_events.BaseEventLoop.call_exception_handler
cdef object _get_asyncgen_hooks = sys.get_asyncgen_hooks
cdef object _set_asyncgen_hooks = sys.set_asyncgen_hooks


cdef inline bint _finds_this_loop(object cls, object c_class, object loop):
    """Whether `cls()`, without loop=, makes the same object as
    `cls(loop=loop)`: cls is asyncio's C class, which takes the running
    loop from the thread's state, and `loop` is that loop (for less:
    _asyncio_compat.FUTURE_FINDS_RUNNING_LOOP_FAST)."""
    return _FUTURE_FINDS_RUNNING_LOOP and cls is c_class and _running_loop() is loop


def poller_backend_name():
    """The poller this build uses: 'epoll' or 'kqueue'."""
    return poller_backend().decode()


def _poller_probe_pwait2():
    """For `python -m minloop info`: see poller_probe_pwait2 in src/poller.h."""
    return poller_probe_pwait2()


def _build_flags():
    """For `python -m minloop info`: how the compiled core was built, as the
    compiler saw it (src/build_info.h)."""
    return {'optimized': bool(MINLOOP_BUILD_OPTIMIZED),
            'assertions': bool(MINLOOP_BUILD_ASSERTS),
            'address_sanitizer': bool(MINLOOP_BUILD_ASAN),
            # Foreign threads refused at the loop-thread-only entries
            # (docs/threading.md, item 8): free-threaded builds.
            'thread_guards': bool(XT_GUARD_THREADS),
            # loop.stats() and the rest (setup.py's MINLOOP_NO_TELEMETRY).
            'telemetry': bool(MINLOOP_TELEMETRY),
            # The kqueue poller on Linux, over libkqueue (setup.py's
            # MINLOOP_POLLER=kqueue): a build for tests.
            'libkqueue': bool(MINLOOP_BUILD_LIBKQUEUE)}


cdef inline _raise_errno(int neg_errno):
    raise os_error(-neg_errno)


cdef inline int _check_open(LoopCore loop) except -1:
    # Inline, not a method: call_soon and call_at check on every call.  Other
    # threads call it too (call_soon_threadsafe): an atomic read.  It is only
    # the early, cheap answer; the ready ring refuses a push once close()
    # has begun, so a push racing with close() fails there (_check_push).
    if xt_load_int(&loop._closed):
        raise RuntimeError('Event loop is closed')
    return 0


cdef struct _due_timers:
    ready_ring *ready
    tm_loop *tm
    double now      # the clock read the timers are popped by
    double last     # the deadline of the last taken (NaN: none)


cdef int _queue_due(void *ctx, void *item, double when) noexcept nogil:
    """heap_drain_due's sink: a due timer goes to the ready ring, the
    heap's reference and bookkeeping (_queued) with it; telemetry counts
    it, and how late it is."""
    cdef _due_timers *due = <_due_timers *>ctx
    cdef int rc = ring_push(due.ready, item)
    if MINLOOP_TELEMETRY and rc == 0:
        tm_timer_fired(due.tm, due.now, when)
        due.last = when
    return rc


# ----------------------------------------------------------------------
# _run_iteration's steps, in the order of asyncio's _run_once: choose the
# timeout, poll, queue the due timers, run the batch; then send the writes
# the batch held.  Inline functions, not methods: a method of LoopCore is
# called through its vtable (Loop subclasses it), while these compile into
# _run_iteration, which call_soon_chain runs once per callback.  `now` is
# _run_iteration's clock (see there).

cdef inline int64_t _choose_timeout(LoopCore self, double *now) except -2:
    """How long the poll may wait, in ns: 0 if a callback is ready or the
    loop is stopping, else until the earliest timer (at most a day), else
    -1 (for ever)."""
    cdef double when = 0.0
    if not ring_len(&self._ready) and not xt_load_int(&self._stopping):
        # We may block.  A signal that arrived while a callback ran in C
        # (os.kill as the callback, say) has its Python handler pending:
        # the interpreter runs it only between bytecodes, and none may
        # run before we block.  asyncio's pure-Python loop runs it at
        # once, so do we -- before the timeout is chosen, since the
        # handler may schedule callbacks (asyncio.Runner's does).
        PyErr_CheckSignals()
    if ring_len(&self._ready) or xt_load_int(&self._stopping):
        return 0
    if heap_peek(&self._timers, &when) == NULL:
        return -1
    now[0] = monotonic_now()
    when = when - now[0]
    if when <= 0:
        return 0
    if when >= MAXIMUM_SELECT_TIMEOUT:
        return <int64_t>(MAXIMUM_SELECT_TIMEOUT * 1e9)
    # Round up: waking before the deadline would only spin.
    return <int64_t>ceil(when * 1e9)


cdef inline int _poll_events(LoopCore self, int64_t timeout_ns, double *now) except -1:
    """Poll, and queue the handles of the fds that are ready (_poll)."""
    if timeout_ns != 0 or fdt_armed(&self._fd_table) > 0:
        return self._poll(timeout_ns, now)
    # Nothing but our own wake-up fd is registered and we would not
    # block: a poll could observe nothing, so skip the syscall.  A
    # poll would also have run pending signal handlers (EINTR); the
    # interpreter runs them too between bytecodes of any callback,
    # so checking on every 32nd skip bounds the delay cheaply.
    if tm_poll_skipped(self._tm) & 31 == 0:
        now[0] = -1.0
        PyErr_CheckSignals()
    return 0


cdef inline int _queue_due_timers(LoopCore self, double now) except -1:
    """Handle 'later' callbacks that are ready: the heap's reference to
    each timer due by now + the clock's resolution moves to the ready
    queue (_queue_due), in the order they would be popped; telemetry
    records how late each is."""
    cdef double end_time
    cdef double when = 0.0
    cdef _due_timers due
    cdef int rc
    tm_timers_pending(self._tm, heap_len(&self._timers))
    if now < 0:
        now = monotonic_now()
    if _END_TIME_PAST_ULP:
        # Where the clock's resolution is below a double's step at
        # `now` (after 2**24 s of uptime for 1 ns), now + resolution
        # is now: a timer due at `now` would wait for the clock.
        end_time = now + fmax(self._clock_resolution,
                              nextafter(now, INFINITY) - now)
    else:
        end_time = now + self._clock_resolution
    due.ready = &self._ready
    due.tm = self._tm
    due.now = now
    due.last = NAN
    if MINLOOP_TELEMETRY:
        heap_peek(&self._timers, &when)   # the first to go, if any
    rc = heap_drain_due(&self._timers, end_time, _queue_due, &due)
    if MINLOOP_TELEMETRY and due.last == due.last:
        tm_timers_fired(self._tm, now, when, due.last)
    if rc < 0:
        # The timer the ring refused, and those after it, are still
        # in the heap: due next time, in order.
        if rc == -2:
            # close() has begun since _check_open() looked.
            raise RuntimeError('Event loop is closed')
        raise MemoryError()
    return 0


cdef inline int _run_batch(LoopCore self, size_t carried) except -1:
    """Run the callbacks that are ready as the batch starts (asyncio's
    ntodo); the `carried` first were scheduled before this iteration's
    poll."""
    cdef size_t ntodo, i
    cdef void *item
    cdef Handle handle
    # In a local: a callback may change any of self's fields as far as
    # the C compiler knows, so self._tm would be loaded again for each.
    cdef tm_loop *tm = self._tm
    # We run all currently scheduled callbacks, but not any callbacks
    # scheduled by callbacks run this time around -- they will be run the
    # next time.  Other threads only ever add to the ring, so the ntodo
    # oldest are there to pop -- unless a callback ran an iteration itself
    # (loop._run_once()) or emptied the ring (asyncio's deque would raise
    # IndexError there).
    ntodo = ring_len(&self._ready)
    tm_batch(tm, ntodo)
    for i in range(ntodo):
        if i == carried:
            # The carried callbacks' writes leave as the last of them
            # returns ("Write coalescing").
            _send_held_writes(self)
        item = ring_pop(&self._ready)
        if item == NULL:
            break
        handle = <Handle>item
        Py_DECREF(handle)   # the ring's reference; `handle` holds its own
        # Leaving the ring, the handle stays untracked through its run
        # (see _release_ran): most handles die right after it.
        handle._queued -= 1
        try:
            if not handle_cancelled(handle):
                # Counted as it starts: a watchdog sees it move.
                tm_callback(tm)
                self._flushes.in_callback = True
                self._flushes.callback_seq += 1
                if xt_load_int(&self._callback_hooks):
                    # Debug mode, or the stall watchdog armed.
                    if xt_load_int(&self._debug):
                        self._run_ready(handle)
                    else:
                        handle_run(handle)
                    # Named by the stall watchdog: report it (stall.pyx).
                    if tm_stalled(tm):
                        self._stall_ended(handle)
                else:
                    handle_run(handle)
        finally:
            self._flushes.in_callback = False
            self._release_ran(handle)
        if self._flushes.flush_after_callback:
            # A large write: it leaves now, with what is held with it.
            self._flushes.flush_after_callback = False
            _send_held_writes(self)
    return 0


cdef inline int _send_held_writes(LoopCore self) except -1:
    """Have each transport that holds writes (schedule_flush) send them."""
    if self._flushes.first != NULL:
        self._flush_writes()
    return 0


# The stream transport's function that sends what a transport holds
# (loop.pxd, write_flushes), registered as that module is imported.  Plain
# C data, set to the same function by every copy of the modules.
cdef write_flusher _write_flusher = NULL


cdef void set_write_flusher(write_flusher flusher) noexcept:
    global _write_flusher
    _write_flusher = flusher


cdef inline int _telemetry_built(str what) except -1:
    if not MINLOOP_TELEMETRY:
        raise NotImplementedError(
            f"loop.{what} is not available: this minloop was built with "
            f"MINLOOP_NO_TELEMETRY=1, which compiles the loop's telemetry out")
    return 0


cdef class LoopCore:

    def __cinit__(self):
        # Cython has made the (empty) instance dict.  From 3.12 it goes, to
        # be made again by the first attribute a program sets: the
        # interpreter's method lookups on the loop run specialised only
        # while it is unmade there (py_compat.h).
        cdef PyObject **instance_dict
        if MINLOOP_LAZY_INSTANCE_DICT and Py_TYPE(self).tp_dictoffset > 0:
            instance_dict = <PyObject **>(<char *><PyObject *>self
                                          + Py_TYPE(self).tp_dictoffset)
            Py_CLEAR(instance_dict[0])
        # First: __dealloc__ may run on what follows failing.
        cdef tm_page *page = tm_page_open(&self._page_fd)
        if page == NULL:
            raise MemoryError()
        # Each sub-interpreter runs its own copy of this module, and numbers
        # its loops apart: `top` labels a loop by both.
        page.interp = <int32_t>PyInterpreterState_GetID(PyInterpreterState_Get())
        self._tm = &page.tm
        xt_init(&self._owners_lock)
        xt_init(&self._stall_lock)
        ring_init(&self._ready)
        ring_init(&self._released[0])
        ring_init(&self._released[1])
        ring_init(&self._flushes.rest)
        heap_init(&self._timers)
        self._poller.fd = -1
        self._wakeup.read_fd = -1
        self._wakeup.write_fd = -1
        fdt_init(&self._fd_table)
        self._fd_objects = {}
        self._clock_resolution = time.get_clock_info('monotonic').resolution
        self.slow_callback_duration = 0.1

        self._events = <poller_event *>calloc(MAX_EVENTS, sizeof(poller_event))
        if self._events == NULL:
            raise MemoryError()
        self._open_kernel_objects()
        try:
            _live_loops.add(self)
        except TypeError:
            pass   # LoopCore itself has no weakref slot; Loop does

    cdef int _open_kernel_objects(self) except -1:
        """Create the poller and the wake-up fd, and watch the latter."""
        cdef int rc
        rc = poller_open(&self._poller, MAX_EVENTS)
        if rc < 0:
            _raise_errno(rc)
        rc = wakeup_open(&self._wakeup)
        if rc < 0:
            _raise_errno(rc)
        rc = poller_modify(&self._poller, self._wakeup.read_fd, 0, POLLER_READ)
        if rc < 0:
            _raise_errno(rc)
        return 0

    cdef int _reopen_after_fork(self) except -1:
        """Give a forked child a poller and a wake-up fd of its own.

        After fork() the child's fds name the parent's epoll instance and
        eventfd: interest the child added would wake the parent, and the
        parent's events would wake the child.  So before the child first
        touches them, it closes its copies, opens new ones and registers the
        fd table again.  An fd the child has closed since cannot be
        registered; its reader/writer stays in the table, silent, until it
        is removed.
        """
        self._forked = False
        poller_forget_after_fork(&self._poller)
        wakeup_close(&self._wakeup)
        self._open_kernel_objects()
        fdt_after_fork(&self._fd_table, &self._poller)
        return 0

    cdef void _release_poller(self):
        if self._forked:
            # A kqueue is not inherited: its number may be the child's now.
            poller_forget_after_fork(&self._poller)
        else:
            poller_close(&self._poller)

    def __dealloc__(self):
        self._clear_ready()
        self._clear_timers()
        self._clear_fd_table()
        self._drop_flushes()
        ring_free(&self._ready)
        ring_free(&self._released[0])
        ring_free(&self._released[1])
        ring_free(&self._flushes.rest)
        heap_free(&self._timers)
        fdt_free(&self._fd_table)
        self._release_poller()
        wakeup_close(&self._wakeup)
        free(self._events)
        self._events = NULL
        free(self._read_buffer)
        self._read_buffer = NULL
        if self._tm != NULL:
            tm_page_free(tm_page_of(self._tm), &self._page_fd)
            self._tm = NULL

    # ------------------------------------------------------------------
    # Checks, with asyncio's messages

    def _check_closed(self):
        _check_open(self)

    def _check_thread(self):
        """asyncio's check: RuntimeError from a thread other than the one
        running the loop (check_loop_thread, loop.pxd)."""
        check_loop_thread(self, True)

    cdef int _check_callback_fast(self, object callback, str method) except -1:
        if _iscoroutine(callback) or _iscoroutinefunction(callback):
            raise TypeError(f"coroutines cannot be used with {method}()")
        if not PyCallable_Check(callback):
            raise TypeError(
                f'a callable object was expected by {method}(), '
                f'got {callback!r}')
        return 0

    def _check_callback(self, callback, method):
        self._check_callback_fast(callback, method)

    def _check_running(self):
        if xt_load_int(&self._running):
            raise RuntimeError('This event loop is already running')
        if _aio_events._get_running_loop() is not None:
            raise RuntimeError(
                'Cannot run the event loop while another loop is running')

    # ------------------------------------------------------------------
    # State

    def time(self):
        """Return the loop's clock: time.monotonic(), same origin."""
        return monotonic_now()

    # is_running(), is_closed(), _thread_id: any thread (docs/threading.md).

    def is_running(self):
        return xt_load_int(&self._running)

    def is_closed(self):
        return xt_load_int(&self._closed)

    def get_debug(self):
        return xt_load_int(&self._debug)

    def set_debug(self, enabled):
        cdef bint debug = bool(enabled)
        xt_store_int(&self._debug, debug)
        xt_lock(&self._stall_lock)
        self._update_callback_hooks()
        xt_unlock(&self._stall_lock)
        if xt_load_int(&self._running):
            self.call_soon_threadsafe(self._set_coroutine_origin_tracking,
                                      debug)

    # _debug, _stopping and _closed as Python attributes (asyncio's names):
    # other threads may read and write them, so they go through the same
    # atomic accesses as set_debug(), stop() and is_closed().

    @property
    def _debug(self):
        return xt_load_int(&self._debug)

    @_debug.setter
    def _debug(self, value):
        xt_store_int(&self._debug, bool(value))
        xt_lock(&self._stall_lock)
        self._update_callback_hooks()
        xt_unlock(&self._stall_lock)

    @property
    def _stopping(self):
        return xt_load_int(&self._stopping)

    @_stopping.setter
    def _stopping(self, value):
        xt_store_int(&self._stopping, bool(value))

    @property
    def _closed(self):
        return xt_load_int(&self._closed)

    @property
    def _thread_id(self):
        """asyncio's attribute: the running thread's ident, or None."""
        if xt_load_int_acquire(&self._running):
            return xt_load_ulong(&self._thread_ident)
        return None

    def stop(self):
        """Stop running the event loop.

        Every callback already scheduled will still run.  This simply informs
        run_forever to stop looping after a complete iteration.
        """
        # Any thread (asyncio's is not thread-safe, yet programs call it so):
        # an atomic store the loop's next look at the flag sees.
        xt_store_int(&self._stopping, True)

    # ------------------------------------------------------------------
    # Scheduling

    # The ready ring's reference and the handle's bookkeeping (_queued, and
    # untracking it from the collector: see Handle._queued) are taken
    # *before* the push.  Once pushed, the loop's thread may pop, run and
    # release the handle at once (another thread's push, on a free-threaded
    # build), so nothing may be left to do to it afterwards.

    cdef int _push_ready(self, Handle handle) except -1:
        """Queue `handle` from the loop's thread (or a loop not running)."""
        Py_INCREF(handle)
        handle_enqueued(handle)
        cdef int rc = ring_push(&self._ready, <void *>handle)
        if rc < 0:
            self._check_push(handle, rc)
        return 0

    cdef int _check_push(self, Handle handle, int rc) except -1:
        """A push's result: on failure, give back what was taken, and raise."""
        if rc >= 0:
            return 0
        handle_dequeued(handle)
        # The ring's reference: the caller's own keeps the handle alive,
        # except for a due timer, whose reference was the heap's (it dies
        # here, and nothing below touches it).
        Py_DECREF(handle)
        if rc == -2:
            # close() has begun since _check_open() looked.
            raise RuntimeError('Event loop is closed')
        raise MemoryError()

    @property
    def _wakeups_sent(self):
        """Wake-up writes made by call_soon_threadsafe (for tests)."""
        return ring_wakeups(&self._ready)

    def _add_callback(self, Handle handle):
        """Queue an existing handle (signal handlers are re-queued so)."""
        if not handle_cancelled(handle):
            self._push_ready(handle)

    def _new_handle(self, callback, tuple args):
        """A handle that is not scheduled (a signal handler's)."""
        return new_handle(callback, args, self, None, xt_load_int(&self._debug))

    # call_soon(callback, *args, context=None) is _call_soon, below the
    # class, behind the entry src/soon_method.h parses its arguments with.

    # call_soon_threadsafe(callback, *args, context=None) is
    # _call_soon_threadsafe, below the class, behind the same entry.

    cdef int _push_threadsafe(self, Handle handle) except -1:
        cdef int rc
        # Waking the loop costs a syscall, so it is done only when the loop
        # is (about to be) blocked in the poller, and once per sleep: the
        # ring tells, under its lock, whether this push found it asleep
        # (src/ready_ring.h).  See _push_ready for the order.
        Py_INCREF(handle)
        handle_enqueued(handle)
        rc = ring_push_wake(&self._ready, <void *>handle)
        if rc == 1:
            # No Python code from here to ring_woken(): close() waits for
            # this write, so that it never reaches a closed fd's number.
            wakeup_signal(&self._wakeup)
            ring_woken(&self._ready)
        elif rc < 0:
            self._check_push(handle, rc)
        return 0

    def _write_to_self(self):
        """Wake the loop up (asyncio's private name, used by some libraries)."""
        # Bracketed as call_soon_threadsafe's wake-up, for close()'s sake; a
        # closed loop has nothing to wake (asyncio's does nothing either).
        if ring_wake_begin(&self._ready):
            wakeup_signal(&self._wakeup)
            ring_woken(&self._ready)

    def call_later(self, delay, callback, *args, context=None):
        """Arrange for a callback to be called after `delay` seconds."""
        if delay is None:
            raise TypeError('delay must not be None')
        cdef double d = delay
        if isnan(d):
            raise ValueError('delay must not be NaN')
        # asyncio's call_later() goes through call_at(), whose name its
        # debug-mode errors carry.
        return self._call_at(monotonic_now() + d, callback, args, context,
                             'call_at')

    def call_at(self, when, callback, *args, context=None):
        """Like call_later(), but uses an absolute time (loop.time())."""
        if when is None:
            raise TypeError("when cannot be None")
        cdef double w = when
        if isnan(w):
            raise ValueError('when must not be NaN')
        return self._call_at(w, callback, args, context, 'call_at')

    cdef _call_at(self, double when, object callback, tuple args,
                  object context, str method):
        _check_open(self)
        cdef bint debug = xt_load_int(&self._debug)
        # asyncio checks the thread in debug mode only.  A free-threaded
        # build always does: there a foreign thread's push would race the
        # loop's own on the timer heap, C memory, not a Python list.
        check_loop_thread(self, debug)
        if debug or not PyCallable_Check(callback):
            self._check_callback_fast(callback, method)
        cdef TimerHandle timer = new_timer(when, callback, args, self, context,
                                           debug, &self._timers)
        if heap_push(&self._timers, when, <void *>timer, &timer._heap_pos) < 0:
            raise MemoryError()
        Py_INCREF(timer)
        handle_enqueued(<Handle>timer)
        return timer

    def _timer_handle_cancelled(self, handle):
        """asyncio's hook; our TimerHandle leaves the heap on cancel()."""

    def _timer_count(self):
        """Timers in the heap (cancelled ones leave it at once)."""
        return heap_len(&self._timers)

    def _timer_heap_capacity(self):
        """Allocated heap slots, to check that memory is given back."""
        return heap_capacity(&self._timers)

    def _poller_fd(self):
        """The epoll/kqueue fd (for tests)."""
        return self._poller.fd

    def _read_buffer_address(self):
        """Where this loop's transports read into: 0 until the first read
        (for tests)."""
        return <size_t>self._read_buffer

    def _ready_count(self):
        return ring_len(&self._ready)

    # ------------------------------------------------------------------
    # Futures and tasks

    def create_future(self):
        """Create a Future object attached to the loop."""
        cls = _futures_namespace['Future']
        if _finds_this_loop(cls, _CFuture, self):
            return cls()
        return cls(loop=self)

    def create_task(self, coro, *, name=None, context=None, **kwargs):
        """Schedule a coroutine object.  Return a task object.

        Extra keyword arguments (eager_start, ...) go to the Task or the task
        factory, where the running asyncio's create_task() takes them.
        """
        if kwargs and not _CREATE_TASK_TAKES_KWARGS:
            raise TypeError(f"Loop.create_task() got an unexpected keyword argument "
                            f"{next(iter(kwargs))!r}")
        _check_open(self)
        factory = self._task_factory
        if factory is None:
            task_class = _tasks_namespace['Task']
            if context is not None or kwargs:
                if context is not None:
                    kwargs['context'] = context
                return task_class(coro, loop=self, name=name, **kwargs)
            if _finds_this_loop(task_class, _CTask, self):
                # Without loop=, a keyword less to parse: the C Task takes
                # the running loop, this one, from the thread's state.
                return task_class(coro) if name is None else task_class(coro, name=name)
            if name is None:
                return task_class(coro, loop=self)   # one keyword less to parse
            return task_class(coro, loop=self, name=name)
        if _CREATE_TASK_PASSES_KWARGS:
            if name is not None:
                kwargs['name'] = name
            if context is not None:
                kwargs['context'] = context
            return factory(self, coro, **kwargs)
        if context is not None:
            task = factory(self, coro, context=context, **kwargs)
        else:
            task = factory(self, coro, **kwargs)
        if name is not None:
            task.set_name(name)
        return task

    def set_task_factory(self, factory):
        """Set the factory loop.create_task() uses; None for the default.

        It is called as factory(loop, coro) or, with a context,
        factory(loop, coro, context=context), and must return a Future.
        """
        if factory is not None and not callable(factory):
            raise TypeError('task factory must be a callable or None')
        self._task_factory = factory

    def get_task_factory(self):
        """Return the task factory, or None if the default one is in use."""
        return self._task_factory

    # ------------------------------------------------------------------
    # Running

    def run_forever(self):
        """Run until stop() is called."""
        _check_open(self)
        self._check_running()
        self._set_coroutine_origin_tracking(xt_load_int(&self._debug))
        old_agen_hooks = _get_asyncgen_hooks()
        try:
            # The ident first: check_loop_thread() reads it in other
            # threads once it sees _running (release/acquire).
            xt_store_ulong(&self._thread_ident, PyThread_get_thread_ident())
            xt_store_int_release(&self._running, True)
            if MINLOOP_TELEMETRY:
                tm_run_begin(self._tm, monotonic_now())
                if tm_page_run_by(tm_page_of(self._tm), PyThread_get_thread_ident()):
                    _name_thread_in_page(self._tm)
            _set_asyncgen_hooks(firstiter=self._asyncgen_firstiter_hook,
                                finalizer=self._asyncgen_finalizer_hook)
            # Through the module on every run, as asyncio's loop does, not
            # cached: whoever installs other running-loop functions there
            # (asyncio's pure-Python ones, which keep the loop in a
            # threading.local) must see this loop running.
            _aio_events._set_running_loop(self)
            # asyncio's loop calls self._run_once() on every turn, so a
            # subclass or the instance itself may replace it.  Looked up
            # once per run: unless replaced, the compiled iteration runs.
            run_once = self._run_once
            if _is_own_run_once(self, run_once):
                run_once = None
            while True:
                if run_once is None:
                    self._run_iteration()
                else:
                    run_once()
                if xt_load_int(&self._stopping):
                    break
        finally:
            # After an exception out of a callback: what it wrote before
            # goes out, as it would have in asyncio.
            _send_held_writes(self)
            if MINLOOP_TELEMETRY:
                tm_run_end(self._tm, monotonic_now())
            xt_store_int(&self._stopping, False)
            xt_store_int(&self._running, False)
            # Between runs the program may drop what it holds: keep nothing.
            self._drop_released(&self._released[0])
            self._drop_released(&self._released[1])
            _aio_events._set_running_loop(None)
            self._set_coroutine_origin_tracking(False)
            _set_asyncgen_hooks(*old_agen_hooks)

    def _run_once(self):
        """Run one full iteration (asyncio's name; tests step loops so)."""
        self._run_iteration()

    cdef int _run_iteration(self) except -1:
        """One full iteration of the event loop: asyncio's _run_once, step
        for step (the steps are above the class), then the writes its
        callbacks held go out."""
        # The clock as last read in this iteration, while no Python code has
        # run since (-1: not so).  One read serves the timeout, the start of
        # a timed poll, and the popping of due timers where it can.
        cdef double now = -1.0
        cdef int64_t timeout_ns = _choose_timeout(self, &now)
        # The callbacks scheduled before this poll (by the last batch: the
        # task steps its reads woke).  The writes they make leave as they
        # end, before the poll's handles run ("Write coalescing").
        cdef size_t carried = ring_len(&self._ready)
        _poll_events(self, timeout_ns, &now)
        if heap_len(&self._timers):
            _queue_due_timers(self, now)
        # This is the only place where callbacks are actually *called*.
        # All other places just add them to ready.
        _run_batch(self, carried)
        # What the rest of the batch wrote to each transport leaves now, in
        # one writev per transport (stream.pyx, "Write coalescing").
        _send_held_writes(self)
        # Those that ran an iteration ago have had a full iteration for
        # their holder to let go (a task resumed by now drops its sleep's
        # timer): drop them, then this iteration's wait their turn.
        self._drop_released(&self._released[1 - self._released_now])
        self._released_now = 1 - self._released_now
        # Snapshots are shared within an iteration's burst of scheduling;
        # across iterations they would only keep old values alive.
        forget_context_snapshot()
        return 0

    # Handles the program still holds after they ran
    #
    # A handle leaves the ready queue untracked by the cycle collector (see
    # Handle._queued).  If nobody else holds it, it dies as the loop lets
    # go and is never tracked again.  If someone does, it must be tracked
    # once more, or a cycle through it (handle -> callback -> object ->
    # handle) could never be collected.  But tracking puts it in the
    # youngest generation, and most such holders let go almost at once: a
    # task's sleep() holds its timer until the task resumes, one iteration
    # later.  Tracking thousands of those per iteration makes every young
    # collection walk them.  So the loop keeps such a handle one iteration
    # longer (one reference, counted in _queued, its references reported by
    # the loop's traverse as for any queued handle), then drops it: tracked
    # again only if it is still held.  A cycle through it is collected one
    # iteration later, never lost.

    cdef void _release_ran(self, Handle handle) noexcept:
        """The ready queue is done with `handle` (its _queued lowered)."""
        if handle._queued or Py_REFCNT(handle) == 1 or PyObject_GC_IsTracked(handle):
            return   # in a container still, dying, or tracked already
        if ring_push(&self._released[self._released_now], <void *>handle) < 0:
            PyObject_GC_Track(<void *>handle)   # no memory: track it now
            return
        Py_INCREF(handle)
        handle._queued += 1

    cdef void _drop_released(self, ready_ring *ring) noexcept:
        cdef void *item
        while True:
            item = ring_pop(ring)
            if item == NULL:
                break
            handle_dequeued(<Handle>item)   # tracked again only if held
            Py_DECREF(<object>item)

    cdef void _update_callback_hooks(self) noexcept:
        # Under _stall_lock: set_debug() and _stall_swap() may race.
        xt_store_int(&self._callback_hooks,
                     xt_load_int(&self._debug) or self._stall is not None)

    cdef int _run_ready(self, Handle handle) except -1:
        """Run one handle in debug mode: track it and time it."""
        cdef double t0, dt
        try:
            self._current_handle = handle
            t0 = monotonic_now()
            handle_run(handle)
            dt = monotonic_now() - t0
            if dt >= self.slow_callback_duration:
                _logger.warning('Executing %s took %.3f seconds',
                                _format_handle(handle), dt)
        finally:
            self._current_handle = None
        return 0

    # The stall watchdog's hooks (stall.pyx arms it; src/stall.h).

    cdef object _stall_swap(self, object watch):
        """Arm `watch` (None: disarm); return the watch it replaces."""
        xt_lock(&self._stall_lock)
        old = self._stall
        self._stall = watch
        self._update_callback_hooks()
        xt_unlock(&self._stall_lock)
        return old

    cdef int _stall_ended(self, Handle handle) except -1:
        """The callback the watchdog flagged has returned."""
        xt_lock(&self._stall_lock)
        watch = self._stall
        xt_unlock(&self._stall_lock)
        if watch is not None:
            watch._callback_ended(handle)
        return 0

    cdef int _flush_writes(self) except -1:
        """Have every transport holding writes send them (schedule_flush).
        One that raises leaves the rest noted, for the next callback's end
        (or run_forever()'s, or close())."""
        cdef PyObject *item
        while self._flushes.first != NULL:
            item = self._flushes.first
            self._flushes.first = <PyObject *>(ring_pop(&self._flushes.rest)
                                               if ring_len(&self._flushes.rest) else NULL)
            try:
                _write_flusher(<object>item)
            finally:
                Py_DECREF(<object>item)   # the list's reference
        return 0

    cdef void _drop_flushes(self) noexcept:
        cdef PyObject *item
        while self._flushes.first != NULL:
            item = self._flushes.first
            self._flushes.first = <PyObject *>ring_pop(&self._flushes.rest)
            Py_DECREF(<object>item)

    cdef int _poll(self, int64_t timeout_ns, double *now) except -1:
        """Wait for events (timeout_ns: 0 not at all, -1 for ever) and queue
        their handles.  *now: _run_iteration's clock (see there); a poll
        that may block takes it as its start.  Left as the clock read as
        such a poll returned (telemetry times it; the due timers are popped
        by it, a few instructions later), else -1 (a poll that does not
        wait has no read of its own: the timers get a fresh one)."""
        cdef int n, i, fd, events, rearm
        cdef bint sleeping = False
        cdef void *item
        cdef Handle handle
        if self._forked:
            self._reopen_after_fork()
        if timeout_ns != 0:
            # From here until ring_awake(), a push from another thread
            # writes to the wake-up fd.  A push since _run_iteration looked
            # at the ring (which chose this timeout) makes ring_sleep() say
            # 0: then we must not block.
            sleeping = ring_sleep(&self._ready)
            if not sleeping:
                timeout_ns = 0
        if sleeping:
            if MINLOOP_TELEMETRY:
                if now[0] < 0:
                    now[0] = monotonic_now()
                tm_sleep_begin(self._tm, now[0])
        else:
            tm_poll_immediate(self._tm)
        # What the loop holds as it polls (`top` shows it): a syscall
        # follows anyway.
        tm_polling(self._tm, fdt_watched(&self._fd_table), heap_len(&self._timers))
        now[0] = -1.0
        with nogil:
            n = poller_wait(&self._poller, self._events, timeout_ns)
        if sleeping:
            if MINLOOP_TELEMETRY:
                now[0] = monotonic_now()
                tm_sleep_end(self._tm, now[0])
            ring_awake(&self._ready)
        if n < 0:
            if n == -EINTR:
                now[0] = -1.0   # handlers run below
                # Run Python-level signal handlers now (KeyboardInterrupt
                # propagates from here), as PEP 475 retries do.
                PyErr_CheckSignals()
                return 0
            _raise_errno(n)
        for i in range(n):
            fd = self._events[i].fd
            events = self._events[i].events
            if fd == self._wakeup.read_fd:
                wakeup_drain(&self._wakeup)
                continue
            if not fdt_has(&self._fd_table, fd):
                continue
            tm_fd_event(self._tm)
            rearm = fdt_fired(&self._fd_table, fd, events)
            if rearm:
                # A one-shot registration fired for an event not for its
                # waiter: arm it again, or it would wait forever.
                self._set_interest(fd, rearm)
                continue
            # Re-read the slot each time: releasing a cancelled handle can
            # run arbitrary code that reallocates the table (fd stays in
            # it: the table never shrinks while the loop lives).
            item = fdt_item(&self._fd_table, fd, POLLER_READ) if events & POLLER_READ else NULL
            if item != NULL:
                handle = <Handle>item
                if handle_cancelled(handle):
                    self._set_fd_handle(fd, POLLER_READ, None)
                else:
                    self._push_ready(handle)
            item = fdt_item(&self._fd_table, fd, POLLER_WRITE) if events & POLLER_WRITE else NULL
            if item != NULL:
                handle = <Handle>item
                if handle_cancelled(handle):
                    self._set_fd_handle(fd, POLLER_WRITE, None)
                else:
                    self._push_ready(handle)
        return 0

    # ------------------------------------------------------------------
    # Telemetry: what the loop counts and times about itself
    # (src/telemetry.h says where each number comes from; the objects are
    # loop_metrics.pyx's).  Any thread may call these while the loop runs.

    def stats(self):
        """An immutable snapshot of the loop's counters (a LoopStats)."""
        _telemetry_built('stats()')
        return make_stats(self._tm, &self._timers, &self._fd_table,
                          ring_len(&self._ready), monotonic_now())

    def utilization(self, previous=None, earlier=None):
        """Event-loop utilization, as Node's performance.eventLoopUtilization():
        of the time the loop has spent running (inside run_forever()), idle
        is the seconds blocked in the poller and active the rest, and
        utilization = active / (idle + active) (0.0 before any).  Given an
        earlier result as `previous`, the same for the time since it; given
        two, as Node's eventLoopUtilization(u1, u2), the same between them
        (`previous` the later, `earlier` the earlier; no clock is read)."""
        _telemetry_built('utilization()')
        if earlier is not None:
            if previous is None:
                raise TypeError('utilization(): earlier given without previous')
            return utilization_between(previous, earlier)
        return make_utilization(self._tm, monotonic_now(), previous)

    @property
    def lag(self):
        """How late timers fire: now - when() of every timer as the loop
        pops it (a Histogram, in seconds)."""
        _telemetry_built('lag')
        return histogram_view(self, tm_lag(self._tm))

    @property
    def busy_time(self):
        """The loop's busy stretches: from a poll's return to the next
        poll's start, for polls that may block (a Histogram, in seconds).
        A stretch is as many iterations as run without a poll that may
        block (the mean iteration: active time / iterations)."""
        _telemetry_built('busy_time')
        return histogram_view(self, tm_busy(self._tm))

    @property
    def iteration_time(self):
        """Deprecated: loop.busy_time, under the name it had (it never
        measured one iteration)."""
        _warnings.warn('loop.iteration_time is loop.busy_time: it measures busy '
                       'stretches (from a poll that may block to the next), which '
                       'span many iterations, not one', DeprecationWarning, stacklevel=2)
        return self.busy_time

    @property
    def stalls(self):
        """The stalls the watchdog found (loop.set_stall_handler() or
        set_stall_threshold() armed), by duration (a Histogram, in seconds;
        its count is the number of stalls)."""
        _telemetry_built('stalls')
        return histogram_view(self, tm_stall(self._tm))

    @property
    def _fd_events(self):
        """Events the poller reported for fds other than the wake-up fd
        (kept in both builds: tests read it)."""
        return tm_fd_events(self._tm)

    # ------------------------------------------------------------------
    # Error handlers: asyncio's, counted (stats().exceptions).

    def call_exception_handler(self, context):
        """Call the current event loop's exception handler (asyncio's)."""
        tm_exception(self._tm)
        _call_exception_handler(self, context)

    # ------------------------------------------------------------------
    # fd callbacks

    # The table, its one-shot registrations and what the kernel is told are
    # src/fd_table.h's (see "The fd table and the kernel" there).  Here the
    # loop adds what C does not know: references, fork and exceptions.

    @property
    def _user_fds(self):
        """fds with interest armed, other than the loop's own wake-up fd:
        while it is 0 and callbacks are ready, a poll could observe nothing."""
        return fdt_armed(&self._fd_table)

    cdef int _set_interest(self, int fd, int mask) except -1:
        """Make the kernel's registration for fd `mask` (a poller.h mask)."""
        cdef int rc
        if self._forked:
            self._reopen_after_fork()
        rc = fdt_set_interest(&self._fd_table, &self._poller, fd, mask)
        if rc < 0:
            _raise_errno(rc)
        self._poller_changes += rc   # 1: poller_modify made a syscall
        return 0

    cdef object _set_fd_handle(self, int fd, int which, Handle handle,
                               bint oneshot=False):
        """Install (or, with None, clear) fd's reader or writer.

        `oneshot`: the handle is a one-shot waiter.  Returns the handle it
        replaced, or None.  The poller is updated first, so on error the
        table is left as it was.
        """
        cdef void *old = NULL
        cdef int rc
        self._reserve_fd(fd)
        if self._forked:
            self._reopen_after_fork()
        rc = fdt_install(&self._fd_table, &self._poller, fd, which,
                         <void *>handle if handle is not None else NULL,
                         oneshot, &old)
        if rc < 0:
            _raise_errno(rc)
        self._poller_changes += rc
        # The table's reference to the new handle (no code ran since it was
        # installed).
        if handle is not None:
            Py_INCREF(handle)
            handle_enqueued(handle)
        if fdt_idle(&self._fd_table, fd):
            self._fd_objects.pop(fd, None)
        if old == NULL:
            return None
        result = <object>old
        handle_dequeued(<Handle>old)
        Py_DECREF(result)   # the table's reference; `result` holds its own
        return result

    # The one-shot waiters' API (sock_ops.pyx).  fd is the socket's fileno()
    # at the time of the wait.

    cdef Handle _add_oneshot_handle(self, int fd, int which, object callback):
        """Install callback as fd's one-shot reader or writer.

        Like _add_fd_handle (the replaced handle is cancelled), but the
        callback must, each time it runs, either remove itself with
        _remove_oneshot() or call _rearm_oneshot() to wait again.
        """
        _check_open(self)
        check_loop_thread(self)
        if fd < 0:
            raise ValueError(f"Invalid file descriptor: {fd}")
        cdef Handle handle = new_handle(callback, (), self, None, xt_load_int(&self._debug))
        old = self._set_fd_handle(fd, which, handle, True)
        if old is not None:
            handle_cancel(<Handle>old)
        return handle

    cdef int _rearm_oneshot(self, int fd, int which, Handle handle) except -1:
        """Wait again for fd, if `handle` is still its reader/writer (if
        add_reader()/add_writer() replaced it, it is not ours to arm)."""
        cdef int rc
        if self._closed:
            return 0
        check_loop_thread(self)
        if self._forked:
            self._reopen_after_fork()
        rc = fdt_rearm(&self._fd_table, &self._poller, fd, which, <void *>handle)
        if rc < 0:
            _raise_errno(rc)
        self._poller_changes += rc
        return 0

    cdef int _remove_oneshot(self, int fd, int which, Handle handle) except -1:
        """remove_reader/remove_writer of `handle`, if still installed."""
        if self._closed:
            return 0
        check_loop_thread(self)
        if fdt_get(&self._fd_table, fd, which) != <void *>handle:
            return 0
        old = self._set_fd_handle(fd, which, None)
        handle_cancel(<Handle>old)
        return 0

    def _fd_state(self, int fd):
        """(kernel mask, one-shot bits, reader, writer) of fd (for tests)."""
        cdef void *reader = fdt_get(&self._fd_table, fd, POLLER_READ)
        cdef void *writer = fdt_get(&self._fd_table, fd, POLLER_WRITE)
        return (fdt_mask(&self._fd_table, fd), fdt_oneshot(&self._fd_table, fd),
                <object>reader if reader != NULL else None,
                <object>writer if writer != NULL else None)

    cdef int _fileobj_to_fd(self, object fileobj) except -1:
        cdef object fd = fileobj_fd(fileobj)
        if fd < 0:
            raise ValueError(f"Invalid file descriptor: {fd}")
        return fd

    cdef int _lookup_fd(self, object fileobj) except -2:
        """The fd to remove for fileobj, even if it was closed since."""
        try:
            return self._fileobj_to_fd(fileobj)
        except ValueError:
            for fd, obj in self._fd_objects.items():
                if obj is fileobj:
                    return fd
            raise

    cdef Handle _add_fd_handle(self, object fd, int which, object callback,
                               tuple args, object context):
        """Install a new reader or writer for fd, cancelling the one it
        replaces.  It runs in `context`, or, if None, in a copy of the
        current one (asyncio's Handle(..., context=None))."""
        _check_open(self)
        check_loop_thread(self)
        cdef int fdn = self._fileobj_to_fd(fd)
        cdef Handle handle = new_handle(callback, args, self, context, xt_load_int(&self._debug))
        old = self._set_fd_handle(fdn, which, handle)
        if not isinstance(fd, int):
            self._fd_objects[fdn] = fd
        if old is not None:
            handle_cancel(<Handle>old)
        return handle

    def _add_reader(self, fd, callback, *args):
        return self._add_fd_handle(fd, POLLER_READ, callback, args, None)

    def _add_writer(self, fd, callback, *args):
        return self._add_fd_handle(fd, POLLER_WRITE, callback, args, None)

    def _remove_reader(self, fd):
        return self._remove_fd_handle(fd, POLLER_READ)

    def _remove_writer(self, fd):
        return self._remove_fd_handle(fd, POLLER_WRITE)

    cdef bint _remove_fd_handle(self, object fd, int which) except -1:
        if self._closed:
            return False
        check_loop_thread(self)
        cdef int fdn = self._lookup_fd(fd)
        if fdt_get(&self._fd_table, fdn, which) == NULL:
            return False
        old = self._set_fd_handle(fdn, which, None)
        handle_cancel(<Handle>old)
        return True

    # ------------------------------------------------------------------
    # Transports' fds: asyncio's loop._transports is fd_owners.pxd's and
    # fd_owners.pyx's (over the fd table); the table's growth is the loop's

    cdef int _reserve_fd(self, int fd) except -1:
        """Make room for fd in the table (fdt_grow).  Growing moves the
        slots, which a dying transport's disown_fd() may be writing to from
        another thread: under the owners' lock."""
        cdef int rc = 0
        if not fdt_has(&self._fd_table, fd):
            xt_lock(&self._owners_lock)
            rc = fdt_grow(&self._fd_table, fd)
            xt_unlock(&self._owners_lock)
        if rc == -ENOMEM:
            raise MemoryError()
        if rc < 0:
            _raise_errno(rc)
        return 0

    # add_reader() & co: asyncio's selector loop's, with its check that no
    # transport owns the fd, self._ensure_fd_no_transport() (fd_owners.pyx's,
    # bound on Loop, or a subclass's).

    def add_reader(self, fd, callback, *args):
        """Start watching the file descriptor for read availability."""
        self._ensure_fd_no_transport(fd)
        self._add_reader(fd, callback, *args)

    def remove_reader(self, fd):
        """Stop watching the file descriptor for read availability."""
        self._ensure_fd_no_transport(fd)
        return self._remove_fd_handle(fd, POLLER_READ)

    def add_writer(self, fd, callback, *args):
        """Start watching the file descriptor for write availability."""
        self._ensure_fd_no_transport(fd)
        self._add_writer(fd, callback, *args)

    def remove_writer(self, fd):
        """Stop watching the file descriptor for write availability."""
        self._ensure_fd_no_transport(fd)
        return self._remove_fd_handle(fd, POLLER_WRITE)

    # ------------------------------------------------------------------
    # Teardown

    cdef void _clear_ready(self):
        cdef void *item
        while True:
            item = ring_pop(&self._ready)
            if item == NULL:
                break
            handle_dequeued(<Handle>item)
            Py_DECREF(<object>item)
        self._drop_released(&self._released[0])
        self._drop_released(&self._released[1])

    cdef void _clear_timers(self):
        cdef void *item
        while True:
            item = heap_pop(&self._timers)
            if item == NULL:
                break
            tm_timers_dropped(self._tm, 1)
            handle_dequeued(<Handle>item)
            Py_DECREF(<object>item)

    cdef void _clear_fd_table(self):
        """Drop every reader and writer without telling the kernel.

        Only for a loop that is closing (or garbage): closing the poller's fd
        drops its interest set (see fdt_drain).
        """
        cdef int cursor = 0
        cdef void *item
        while True:
            # The table lets go of each before its release runs any code.
            item = fdt_drain(&self._fd_table, &cursor)
            if item == NULL:
                break
            handle_dequeued(<Handle>item)
            Py_DECREF(<object>item)

    def _close_core(self):
        """Drop every callback and release the loop's own fds."""
        # Writes held back when the loop stopped on an exception: asyncio
        # would have sent them already.  (What a failed send schedules is
        # dropped below with the rest.)
        try:
            _send_held_writes(self)
        finally:
            self._drop_flushes()
        xt_store_int(&self._closed, True)
        # A closed loop has no stall watchdog (its thread is joined).
        watch = self._stall_swap(None)
        if watch is not None:
            watch.stop()
        # Other threads may still be pushing: from here on the ring refuses
        # them (RuntimeError('Event loop is closed')), and once ring_close()
        # returns no thread is about to write to the wake-up fd, which is
        # closed below.  A push that landed before it is dropped with the
        # rest, as asyncio's close() clears its ready queue.
        ring_close(&self._ready)
        forget_context_snapshot()
        self._clear_ready()
        self._clear_timers()
        self._clear_fd_table()
        self._fd_objects.clear()
        heap_free(&self._timers)
        ring_free(&self._ready)
        ring_free(&self._released[0])
        ring_free(&self._released[1])
        ring_free(&self._flushes.rest)
        self._release_poller()
        wakeup_close(&self._wakeup)
        # `top` sees it no more (the page stays mapped: stats() reads it).
        tm_page_closed(tm_page_of(self._tm), &self._page_fd)

    @property
    def _telemetry_page(self):
        """(memfd, loop id) of the page `top` reads; memfd -1 where
        there is none (closed, or not shareable here)."""
        return self._page_fd, tm_page_of(self._tm).loop_id


# ----------------------------------------------------------------------
# call_soon
#
# Its Python entry is src/soon_method.h's rather than Cython's: asyncio's C
# Task passes context= under a keyword-name object of its own, which
# Cython's parser matches only by value (about 125 instructions per task
# step on 3.11); that entry matches it by identity.  call_soon_threadsafe
# has the same signature and the same entry, which also makes no tuple
# for a callback without arguments.

cdef void _name_thread_in_page(tm_loop *tm) noexcept:
    # The Python thread's name for `top` (src/telemetry_page.h), when a run
    # begins on another thread than the last: rare, and off the hot path.
    try:
        name = _threading.current_thread().name.encode('utf-8', 'replace')
    except BaseException:
        return
    tm_page_thread_name(tm_page_of(tm), name[:TM_THREAD_NAME - 1])


cdef object _call_soon(object loop, object callback, object args, object context):
    """LoopCore.call_soon(callback, *args, context=None): its body, called
    by the entry with `loop` a LoopCore (checked) and `args` a tuple."""
    cdef LoopCore self = <LoopCore>loop
    _check_open(self)
    cdef bint debug = xt_load_int(&self._debug)
    if debug:
        check_loop_thread(self, True)
        self._check_callback_fast(callback, 'call_soon')
    elif not PyCallable_Check(callback):
        # asyncio only checks in debug mode and then fails later inside
        # the loop; failing here, at the caller, is cheap and clearer.
        self._check_callback_fast(callback, 'call_soon')
    cdef Handle handle = new_handle(callback, <tuple>args, self, context, debug)
    self._push_ready(handle)
    return handle


soon_method_install(LoopCore, b"call_soon", <soon_body>_call_soon,
                    b"Arrange for a callback to be called as soon as possible.\n\n"
                    b"Callbacks run in the order in which they are registered, each\n"
                    b"exactly once.")


cdef object _call_soon_threadsafe(object loop, object callback, object args,
                                  object context):
    """LoopCore.call_soon_threadsafe(callback, *args, context=None)."""
    cdef LoopCore self = <LoopCore>loop
    _check_open(self)
    cdef bint debug = xt_load_int(&self._debug)
    if debug or not PyCallable_Check(callback):
        self._check_callback_fast(callback, 'call_soon_threadsafe')
    cdef Handle handle
    if _THREADSAFE_HANDLES:
        # An asyncio._ThreadSafeHandle, as asyncio returns from 3.14: a
        # cancel() from another thread waits while the callback runs.
        handle = new_threadsafe_handle(callback, <tuple>args, self, context, debug)
    else:
        handle = new_handle(callback, <tuple>args, self, context, debug)
    self._push_threadsafe(handle)
    return handle


soon_method_install(LoopCore, b"call_soon_threadsafe",
                    <soon_body>_call_soon_threadsafe,
                    b"Like call_soon(), but thread-safe.")


# ----------------------------------------------------------------------
# fork()

_live_loops = weakref.WeakSet()


def _before_fork():
    # A callback that forks after writing: what it holds (stream.pyx, "Write
    # coalescing") goes out now, from the parent alone, as asyncio's went
    # out at write() -- else parent and child would both send it.
    cdef LoopCore loop
    for obj in list(_live_loops):
        loop = <LoopCore>obj
        if loop._flushes.first != NULL and loop._flushes.in_callback:
            loop._flush_writes()


def _after_fork_in_child():
    cdef LoopCore loop
    for obj in list(_live_loops):
        loop = <LoopCore>obj
        # Closed loops too: their rings' locks are taken again when they are
        # freed, and another thread of the parent may have held one at fork().
        ring_after_fork(&loop._ready)
        ring_after_fork(&loop._released[0])
        ring_after_fork(&loop._released[1])
        ring_after_fork(&loop._flushes.rest)
        # Held writes of a fork from another thread are the parent's to send.
        loop._drop_flushes()
        xt_init(&loop._owners_lock)   # as the rings' locks
        # The page is the parent's still: a copy of the child's own.
        tm_page_after_fork(tm_page_of(loop._tm), &loop._page_fd)
        if not loop._closed:
            loop._forked = True


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


cdef bint _is_own_run_once(LoopCore loop, object run_once) except -1:
    """Whether `run_once` (loop._run_once, looked up) is LoopCore's own,
    bound to `loop`: a bound built-in method equals another with the same
    function and the same self."""
    own = LoopCore._run_once.__get__(loop, type(loop))
    return type(run_once) is type(own) and run_once == own


# ----------------------------------------------------------------------
# Garbage collection
#
# The ready queue, the heap and the fd table are C containers, invisible to
# the cycle collector, yet each handle in them refers back to the loop.  An
# unclosed loop dropped with callbacks pending would leak (and never warn
# "unclosed event loop").  So LoopCore's traverse and clear slots are
# extended to visit and drop what those containers hold.

#
# Queued handles are untracked (see Handle._queued), so the loop reports
# their references as its own: for the collector, a queued handle is part of
# the loop.  That is exact while the loop is alive.  When an unclosed loop
# becomes garbage, its finalizer (Loop.__del__ -> close()) empties the
# containers before anything is cleared, so a handle that outlives the loop
# (held by user code) never has its references cleared under it.

cdef gc_traverseproc _base_traverse = NULL
cdef gc_inquiry _base_clear = NULL
cdef unsigned long _traverse_epoch = 0


cdef inline int _visit_handle(void *item, gc_visitproc visit, void *arg,
                              unsigned long epoch) noexcept:
    cdef Handle handle = <Handle>item
    if PyObject_GC_IsTracked(handle):
        return visit(<PyObject *>item, arg)
    if handle_gc_seen(handle, epoch):
        return 0   # already reported in this traverse
    return (<gc_type *>Py_TYPE(handle)).tp_traverse(<PyObject *>item, visit, arg)


cdef int _core_traverse(PyObject *obj, gc_visitproc visit, void *arg) noexcept:
    global _traverse_epoch
    cdef LoopCore self = <LoopCore>obj
    cdef size_t i
    cdef int fd, rc, j
    cdef unsigned long epoch
    cdef ready_ring *ring
    cdef void *item
    if _base_traverse != NULL:
        rc = _base_traverse(obj, visit, arg)
        if rc:
            return rc
    _traverse_epoch += 1
    epoch = _traverse_epoch
    for i in range(ring_len(&self._ready)):
        rc = _visit_handle(ring_at(&self._ready, i), visit, arg, epoch)
        if rc:
            return rc
    for i in range(heap_len(&self._timers)):
        rc = _visit_handle(heap_item_at(&self._timers, i), visit, arg, epoch)
        if rc:
            return rc
    for j in range(2):
        ring = &self._released[j]
        for i in range(ring_len(ring)):
            rc = _visit_handle(ring_at(ring, i), visit, arg, epoch)
            if rc:
                return rc
    for fd in range(fdt_size(&self._fd_table)):
        item = fdt_get(&self._fd_table, fd, POLLER_READ)
        if item != NULL:
            rc = _visit_handle(item, visit, arg, epoch)
            if rc:
                return rc
        item = fdt_get(&self._fd_table, fd, POLLER_WRITE)
        if item != NULL:
            rc = _visit_handle(item, visit, arg, epoch)
            if rc:
                return rc
    return 0


cdef int _core_clear(PyObject *obj) noexcept:
    cdef LoopCore self = <LoopCore>obj
    self._clear_ready()
    self._clear_timers()
    self._clear_fd_table()
    if _base_clear != NULL:
        return _base_clear(obj)
    return 0


cdef _install_gc_hooks():
    global _base_traverse, _base_clear
    cdef gc_type *tp = <gc_type *>LoopCore
    _base_traverse = tp.tp_traverse
    _base_clear = tp.tp_clear
    tp.tp_traverse = _core_traverse
    tp.tp_clear = _core_clear


_install_gc_hooks()


def _alloc_faults(str site, long skip=-1, long fails=0):
    """Test builds only: includes.pxd's arm_alloc_faults for this module."""
    return arm_alloc_faults(site, skip, fails)
