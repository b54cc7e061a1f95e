# cython: freethreading_compatible=True
"""Handle and TimerHandle: the objects call_soon() and call_at() return.

Subclasses of asyncio.events.Handle/TimerHandle (through the C types of
src/handle_bases.c), with the same public surface and repr.  The loop runs
them through the C-level `handle_run`, which enters the handle's context
with the C API (no Context.run() call per callback).

Differs from asyncio: cancel() takes a timer out of the loop's heap at once;
the private attributes are read-only; a handle cannot be made by calling
its class.
"""

import sys
from contextvars import Context as _Context

from asyncio import format_helpers as _format_helpers

from . import _asyncio_compat

from cpython.contextvars cimport (PyContext_CheckExact, PyContext_Copy,
                                  PyContext_CopyCurrent, PyContext_Enter,
                                  PyContext_Exit)
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_SIZE
from cpython.ref cimport Py_DECREF, Py_REFCNT, Py_XDECREF

from .includes cimport (heap_remove, PyObject_Vectorcall_raw,
                        PyObject_Call_raw, PySequence_Tuple_raw, PyContext_Enter_raw,
                        PyThreadState, PyThreadState_Get,
                        MINLOOP_KNOWN_CONTEXT_LAYOUT, minloop_context_vars,
                        minloop_context_weakrefs, MINLOOP_CONTEXT_WEAKREFS_OFFSET,
                        XT_GUARD_THREADS, PyThread_get_thread_ident)


cdef extern from "threadsafe_handle.h":
    # The monitor of call_soon_threadsafe()'s handles (its header says why).
    int minloop_ts_run_begins(void *h)
    void minloop_ts_run_ended(void *h)
    int minloop_ts_cancel(void *h)
    int minloop_ts_cancelled(void *h)
    int minloop_ts_init()
    bint minloop_ts_running_here(void *h)


cdef bint _FORMAT_TAKES_DEBUG = _asyncio_compat.FORMAT_TAKES_DEBUG
cdef object _format_callback_source = _format_helpers._format_callback_source
cdef object _extract_stack = _format_helpers.extract_stack
cdef object _getframe = sys._getframe


cdef str _format_callback(object callback, object args, bint debug):
    if _FORMAT_TAKES_DEBUG:
        return _format_callback_source(callback, args, debug=debug)
    return _format_callback_source(callback, args)


# The types' shared surface.  They are siblings (see handles.pxd): what
# every kind shows Python the same way (the constructor refused, __repr__,
# get_context(), cancelled(), a read-only property over each of
# asyncio.Handle's __slots__) is their C bases' (src/handle_bases.c,
# "asyncio's surface"); each class body below names what differs between
# the kinds or calls into this module, and the behaviour lives in the
# module-level functions, which take any kind as `Handle`.

cdef list _repr_info(Handle h):
    minloop_handle_check_slots(<void *>h)
    info = [type(h).__name__]
    if h._cancelled is True:
        info.append('cancelled')
    if h._callback is not None:
        info.append(_format_callback(h._callback, handle_args(h), h._debug))
        minloop_handle_check_slots(<void *>h)   # reprs are user code
    if h._source_traceback:
        frame = h._source_traceback[-1]
        info.append(f'created at {frame[0]}:{frame[1]}')
    return info


cdef inline bint _snapshot_alone(Handle h) noexcept:
    """Whether h is the only holder of the snapshot it shares.

    Then no other handle, no later call_soon() (the cache holds its own
    reference) and no program can see the snapshot but through h: it is h's
    own context in all but name, and making h a private copy of it would
    only allocate.  The common case: the one callback an iteration scheduled
    (a chain of call_soon()s, a lone timer), once forget_context_snapshot()
    has dropped the cache's reference."""
    return minloop_handle_context_alone(<void *>h)


# ----------------------------------------------------------------------
# Arguments
#
# Most callbacks take one or two arguments: a future's done callbacks and a
# task's wake-up take the future, a sleep's timer takes the future and its
# result.  asyncio keeps them in a tuple, one more object per callback for
# the cycle collector to count; a burst of them (100k timers firing, each
# waking its task) starts young collections that walk every object the
# program made since the last one.  So one or two arguments are kept in the
# handle itself (_arg0, _arg1; _inline_args says how many), and the tuple
# asyncio's _args holds is made only when somebody asks for it (then kept
# there, as asyncio would have it).  src/handle_bases.c's make_handle()
# keeps them so ("Making handles", below).


cdef inline object handle_args(Handle h):
    """The arguments as asyncio's _args holds them: a tuple, or None once
    cancelled (or whatever asyncio's own descriptor put there)."""
    return minloop_handle_args(<void *>h)


cdef int handle_cancel(Handle h) except -1:
    minloop_handle_check_slots(<void *>h)
    if h._cancelled is True:
        return 0
    return _cancel_now(h)


cdef int _cancel_now(Handle h) except -1:
    """cancel()'s work: on the loop's thread, or while no thread runs it."""
    cdef Py_ssize_t pos
    if isinstance(h, TimerHandle):
        pos = (<TimerHandle>h)._heap_pos
        if pos >= 0:
            # A timer leaves the heap now (O(log n)), so a server that arms
            # and cancels millions of timeouts holds no dead timers.  The
            # caller holds a reference to h, so dropping the heap's is safe.
            heap_remove((<TimerHandle>h)._heap, <size_t>pos)
            handle_dequeued(h)
            Py_DECREF(h)
    h._cancelled = True
    if h._debug:
        frozen = repr(h)
        minloop_handle_check_slots(<void *>h)   # reprs are user code
        h._repr = frozen
    # Drop the references at once, as asyncio does: a cancelled callback
    # must not keep its arguments alive until it is skipped.
    h._callback = None
    h._args = None
    minloop_handle_drop_inline_args(<void *>h)
    return 0


# cancel() from another thread
#
# The heap, the handle's fields and the loop's bookkeeping (_queued) are the
# loop's thread's: with the GIL, cancel() changes them at once from any
# thread, as asyncio's does.  On a free-threaded build, a thread other than
# the one running the loop only raises the flag -- so cancelled() is True at
# once, and the loop skips the handle if it comes up first -- and asks the
# loop's thread to do the rest (heap removal, dropping the callback and its
# arguments): asyncio's own advice, call_soon_threadsafe(handle.cancel).

cdef inline int _cancel(Handle h) except -1:
    """cancel() as the program calls it (the loop calls handle_cancel)."""
    if XT_GUARD_THREADS and _foreign_thread(h):
        return _cancel_later(h)
    return handle_cancel(h)


cdef bint _foreign_thread(Handle h) except -1:
    """Whether h's loop is running in a thread other than this one."""
    minloop_handle_check_slots(<void *>h)
    ident = h._loop._thread_id   # None unless running (read atomically)
    return ident is not None and ident != PyThread_get_thread_ident()


cdef int _cancel_later(Handle h) except -1:
    if h._cancelled is True:
        return 0
    # One word, from False to True, immortal objects both: no reference
    # count changes, and the loop reads either value whole.
    h._cancelled = True
    return _finish_cancel_later(h)


cdef int _finish_cancel_later(Handle h) except -1:
    """Ask the loop's thread to do the rest of a cancel() (_finish_cancel)."""
    try:
        h._loop.call_soon_threadsafe(_finish_cancel, h)
    except RuntimeError:
        pass   # closed since: close() dropped the heap with h in it
    return 0


def _finish_cancel(h):
    """The loop's half of a cancel() made in another thread."""
    # Either type: a timer's layout starts with a Handle's (handles.pxd).
    minloop_handle_check_slots(<void *>h)
    _cancel_now(<Handle>h)


cdef int _run_threadsafe(Handle h) except -1:
    """What asyncio's _ThreadSafeHandle._run() does under its lock: skip
    the callback if cancelled since the loop looked, and make a cancel()
    from another thread wait until it returns.  handle_run() finds this
    thread in _runner and runs the callback (and so does a nested _run()
    of the handle from its own callback)."""
    if not minloop_ts_run_begins(<void *>h):
        return 0
    try:
        return handle_run(h)
    finally:
        minloop_ts_run_ended(<void *>h)


cdef int handle_run(Handle h) except -1:
    # One body for every handle (a second copy, or a call, would cost every
    # callback): a thread-safe handle first goes through its monitor.
    if h._threadsafe and not minloop_ts_running_here(<void *>h):
        return _run_threadsafe(h)
    cdef object snapshot = None
    cdef object context
    cdef PyObject *result
    cdef PyObject *unpacked
    minloop_handle_check_slots(<void *>h)
    if h._context_shared and _snapshot_alone(h):
        # Nobody else holds it: run in it, as asyncio runs a handle in the
        # copy it made for that handle alone.
        h._context_shared = False
        context = h._context
    elif h._context_shared:
        # Run in a private copy (a callback's var.set() must not reach the
        # other handles sharing the snapshot).  It becomes the handle's own
        # context, as asyncio's handle has one.
        snapshot = h._context
        context = _private_copy(snapshot)
        h._context = context
        h._context_shared = False
    else:
        context = h._context
    cdef object callback = h._callback
    cdef object args = h._args
    cdef object arg0, arg1   # bound only where used (no None to count)
    cdef PyObject *argv[2]
    # Our own references: the callback may cancel its handle, which drops
    # the handle's (asyncio's call holds the unpacked arguments likewise).
    cdef unsigned int inline_args = h._inline_args
    # The callback is called with the argv[:inline_args] vector when the
    # arguments are kept inline or there are none; else from the tuple.
    cdef bint vector = inline_args != 0 or (PyTuple_CheckExact(args) and
                                       PyTuple_GET_SIZE(args) == 0)
    if inline_args:
        arg0 = <object>h._arg0
        argv[0] = <PyObject *>arg0
        if inline_args == 2:
            arg1 = <object>h._arg1
            argv[1] = <PyObject *>arg1
    # No try blocks here: Cython saves and restores the handled exception
    # around each, which costs a thread-state lookup (through TLS from
    # 3.12) on every callback.  A failure goes to _report_raised().
    if PyContext_Enter_raw(context) < 0:
        # Already entered (a nested run in the same context): asyncio's
        # Context.run() fails inside the handle's try, so it is reported.
        return _report_raised(h, None)
    if vector:
        # Straight to the callable's vectorcall (a Python function's
        # frame), without Cython's search for the fastest way to call.
        result = PyObject_Vectorcall_raw(callback, argv, inline_args, NULL)
    elif PyTuple_CheckExact(args):
        result = PyObject_Call_raw(callback, args, NULL)
    else:
        # Not ours (see minloop_handle_check_slots()): callback(*args).
        unpacked = PySequence_Tuple_raw(args)
        result = NULL
        if unpacked != NULL:
            result = PyObject_Call_raw(callback, <object>unpacked, NULL)
            Py_XDECREF(unpacked)
    if result == NULL:
        return _report_raised(h, context)
    Py_XDECREF(result)
    PyContext_Exit(context)
    if snapshot is not None:
        _share_again(h, snapshot, context)
    return 0


cdef int _raise_pending() except -1:
    # Hands the exception already set to the caller's except clause.
    return -1


cdef int _report_raised(Handle h, object context) except -1:
    """What asyncio's Handle._run does when its call raised (the exception
    set): in its except clause, so the exception is the one being handled
    (sys.exc_info()) while the loop's exception handler runs.  `context`:
    the one entered, left first as Context.run() would; None if entering
    it failed."""
    try:
        _raise_pending()
    except BaseException as exc:
        if context is not None:
            PyContext_Exit(context)
        if isinstance(exc, (SystemExit, KeyboardInterrupt)):
            raise
        _report(h, exc)
    return 0


cdef _report(Handle h, exc):
    minloop_handle_check_slots(<void *>h)
    cb = _format_callback(h._callback, handle_args(h), h._debug)
    minloop_handle_check_slots(<void *>h)   # reprs are user code
    context = {
        'message': f'Exception in callback {cb}',
        'exception': exc,
        'handle': h,
    }
    if h._source_traceback:
        context['source_traceback'] = h._source_traceback
    h._loop.call_exception_handler(context)


cdef inline bint _timers_equal(TimerHandle a, TimerHandle b) except -1:
    minloop_handle_check_slots(<void *>a)
    minloop_handle_check_slots(<void *>b)
    return (a._when == b._when and a._callback == b._callback and
            handle_args(<Handle>a) == handle_args(<Handle>b) and a._cancelled is b._cancelled)


cdef object _compare_timers(TimerHandle a, object other, int op):
    if not isinstance(other, TimerHandle):
        return NotImplemented
    cdef TimerHandle b = <TimerHandle>other
    if op == 0:    # <
        return a._when < b._when
    if op == 4:    # >
        return a._when > b._when
    if op == 2:    # ==
        return _timers_equal(a, b)
    if op == 3:    # !=
        return not _timers_equal(a, b)
    if op == 1:    # <=
        return a._when < b._when or _timers_equal(a, b)
    return a._when > b._when or _timers_equal(a, b)   # >=


cdef class Handle(HandleBase):
    """Object returned by callback registration methods."""

    def _repr_info(self):
        return _repr_info(self)

    def cancel(self):
        _cancel(self)

    def _run(self):
        handle_run(self)


cdef class TimerHandle(TimerHandleBase):
    """Object returned by timed callback registration methods."""

    def _repr_info(self):
        info = _repr_info(<Handle>self)
        pos = 2 if self._cancelled is True else 1
        info.insert(pos, f'when={self._when}')
        return info

    def cancel(self):
        _cancel(<Handle>self)

    def _run(self):
        handle_run(<Handle>self)

    def __hash__(self):
        return hash(self._when)

    def __richcmp__(self, other, int op):
        return _compare_timers(self, other, op)

    def when(self):
        """Return a scheduled callback time.

        The time is an absolute timestamp, using the same time
        reference as loop.time().
        """
        return self._when

    # asyncio.TimerHandle's own slots, read-only (the C base has the rest).
    @property
    def _scheduled(self):
        return self._heap_pos >= 0

    @property
    def _when(self):
        return self._when


cdef class _ThreadSafeHandle(ThreadSafeHandleBase):
    """What call_soon_threadsafe() returns from Python 3.14: cancel() and
    cancelled() from another thread wait while the callback runs."""

    def _repr_info(self):
        return _repr_info(<Handle>self)

    def cancel(self):
        if not minloop_ts_cancel(<void *>self):
            return   # cancelled already
        if XT_GUARD_THREADS and _foreign_thread(<Handle>self):
            # The loop's thread drops the callback (see _cancel_later).
            _finish_cancel_later(<Handle>self)
            return
        _cancel_now(<Handle>self)

    def cancelled(self):
        return bool(minloop_ts_cancelled(<void *>self))

    def _run(self):
        handle_run(<Handle>self)

    # asyncio._ThreadSafeHandle's own slot, read-only (the C base has the
    # rest).  `_lock` is asyncio's RLock: the handle has none
    # (src/threadsafe_handle.h stands for it).
    @property
    def _lock(self):
        return None


# ----------------------------------------------------------------------
# Context snapshots
#
# asyncio copies the current context for every callback scheduled without
# context= (contextvars.copy_context()), and each copy is a new object for
# the cycle collector to count and walk.  Yet a server schedules thousands of
# callbacks from one unchanged context.  A context's variables live in an
# immutable map (a HAMT) that every ContextVar.set()/reset() replaces, so
# while the current context still holds the very map our last copy holds,
# that copy has the same values and is shared.  Nobody ever enters a shared
# snapshot: a handle takes its private copy (PyContext_Copy, from CPython's
# free list) when it runs or when its context is asked for, so each callback
# still runs in a context of its own, with the values current when it was
# scheduled.  A snapshot that only one handle still holds is no longer
# shared, and that handle takes it as its own (_snapshot_alone).  A copy
# that a run left as it found it is given back (_share_again) and kept as
# the spare, the next run's copy of a snapshot with the same variables
# (_private_copy): a burst of handles from one context (a thread's
# call_soon_threadsafe()s, timers armed together) then makes no copy per
# run.  The snapshot and the spare are dropped as each iteration ends,
# unless they hold no variables (forget_context_snapshot).  Where the
# layout is unknown or fails the import-time check, every handle gets its
# own copy at once, as in asyncio.

cdef bint _share_snapshots = False
cdef PyObject *_snapshot_vars = NULL   # the snapshot's variables (it keeps them alive)
cdef object _snapshot = None
# A private copy nobody else holds, entered by none, with no weak reference:
# a new copy of any snapshot with its variables in all but identity.
cdef object _spare = None
# The variables of a context that has none (set at import, below).
cdef PyObject *_no_vars = NULL
cdef object _EMPTY_CONTEXT = _Context()


cdef inline PyObject *_snapshot_borrowed() except NULL:
    """The current context's snapshot; the cache holds it until the next
    call, or the iteration's end."""
    global _snapshot_vars, _snapshot
    cdef PyObject *current = PyThreadState_Get().context
    if current != NULL and minloop_context_vars(current) == _snapshot_vars:
        return <PyObject *>_snapshot   # same variables, same values: same snapshot
    snapshot = PyContext_CopyCurrent()
    _snapshot_vars = minloop_context_vars(<PyObject *>snapshot)
    _snapshot = snapshot
    return <PyObject *>_snapshot


cdef void forget_context_snapshot() noexcept:
    """Drop the cached snapshot, so that it does not keep the values of a
    finished request's context variables alive once its handles are gone.
    A snapshot and a spare without variables keep nothing alive, and stay:
    a chain of callbacks from a context nobody set a variable in then makes
    no context per callback (call_soon_chain on 3.14: 2,226 -> 2,132
    instructions a callback, zuvloop's 2,247)."""
    global _snapshot_vars, _snapshot, _spare
    if _snapshot_vars != NULL and _snapshot_vars != _no_vars:
        _snapshot_vars = NULL
        _snapshot = None
    if (_spare is not None and
            minloop_context_vars(<PyObject *>_spare) != _no_vars):
        _spare = None


cdef inline object _private_copy(object snapshot):
    """A context of the handle's own with the snapshot's values: the spare,
    if it holds the very same variables, else a new copy."""
    global _spare
    cdef object spare = _spare
    if (spare is not None and minloop_context_vars(<PyObject *>spare) ==
            minloop_context_vars(<PyObject *>snapshot)):
        _spare = None
        return spare
    return PyContext_Copy(snapshot)


def _check_context_layout():
    """Confirm at import time what snapshot sharing assumes of CPython."""
    import contextvars
    probe = contextvars.ContextVar('minloop_probe')

    def check():
        current = PyThreadState_Get().context
        before = minloop_context_vars(current)
        copy = PyContext_CopyCurrent()
        shares = minloop_context_vars(<PyObject *>copy) == before
        probe.set(1)
        after = minloop_context_vars(PyThreadState_Get().context)
        return (shares and after != before and after != NULL and
                type(<object>after).__name__ == 'hamt' and
                probe not in copy and len(<object>after) == len(copy) + 1 and
                # Where the spare's weak references are looked for.
                contextvars.Context.__weakrefoffset__ ==
                MINLOOP_CONTEXT_WEAKREFS_OFFSET)

    return bool(contextvars.copy_context().run(check))


if MINLOOP_KNOWN_CONTEXT_LAYOUT:
    _share_snapshots = _check_context_layout()
if _share_snapshots:
    # CPython keeps one empty map, which every context without variables
    # holds (_EMPTY_CONTEXT keeps it alive).  Were there another, contexts
    # holding it would only be dropped each iteration, as the rest are.
    _no_vars = minloop_context_vars(<PyObject *>_EMPTY_CONTEXT)


cdef inline void _share_again(Handle h, object snapshot, object context) noexcept:
    """Give back the private copy a run made, if nothing can tell.

    A handle the program keeps (a timer stored as self._handle, say) would
    otherwise hold a context of its own from its run on: one allocation per
    run that lives on, and enough of them start the cycle collector while
    held timers fire.  If the callback set no variable (the copy still holds
    the snapshot's map) and nobody took the copy (only `h` and the caller
    refer to it), the copy is the snapshot in all but identity, so the
    handle shares the snapshot again, and the copy becomes the spare
    (_private_copy), or goes back to CPython's free list if something holds
    a weak reference to it.
    """
    global _spare
    if (Py_REFCNT(context) == 2 and
            minloop_context_vars(<PyObject *>context) ==
            minloop_context_vars(<PyObject *>snapshot)):
        h._context = snapshot
        h._context_shared = True
        # Nobody took it (no weak reference either): the next run's copy.
        if minloop_context_weakrefs(<PyObject *>context) == NULL:
            _spare = context


# ----------------------------------------------------------------------
# Making handles
#
# src/handle_bases.c makes them (its free lists are there), each field set
# once from what call_soon() & co. were given: Handle.__new__() would set
# every field to None first, and each assignment here would then change
# two reference counts (3.14, call_soon_chain: 35 instructions a callback).

cdef extern from *:
    """
    static const MinloopHandleCAPI *minloop_handle_capi = NULL;

    static int
    minloop_handle_capi_import(void)
    {
        minloop_handle_capi = (const MinloopHandleCAPI *)PyCapsule_Import(
            MINLOOP_HANDLE_CAPI_NAME, 0);
        return minloop_handle_capi == NULL ? -1 : 0;
    }

    enum { MINLOOP_MAKE_HANDLE, MINLOOP_MAKE_TIMER, MINLOOP_MAKE_THREADSAFE };

    static inline PyObject *
    minloop_make_handle(int kind, PyObject *type, PyObject *callback,
                        PyObject *args, PyObject *context, PyObject *loop)
    {
        minloop_make_handle_fn make =
            kind == MINLOOP_MAKE_HANDLE ? minloop_handle_capi->make_handle :
            kind == MINLOOP_MAKE_TIMER ? minloop_handle_capi->make_timer :
            minloop_handle_capi->make_threadsafe;
        return make((PyTypeObject *)type, callback, args, context, loop);
    }
    """
    int minloop_handle_capi_import() except -1
    enum:
        MINLOOP_MAKE_HANDLE
        MINLOOP_MAKE_TIMER
        MINLOOP_MAKE_THREADSAFE
    Handle minloop_make_handle(int kind, object type, object callback, object args,
                               PyObject *context, object loop)


minloop_handle_capi_import()


cdef inline Handle _make(int kind, object cls, object callback, tuple args,
                         object loop, object context, bint debug):
    cdef bint shared = False
    cdef object copy      # asyncio's copy, where snapshots are not shared
    cdef PyObject *ctx    # borrowed: the snapshot cache, `copy` or the caller holds it
    cdef Handle h
    if context is None:
        if _share_snapshots:
            shared = True
            ctx = _snapshot_borrowed()
        else:
            copy = PyContext_CopyCurrent()
            ctx = <PyObject *>copy
    elif PyContext_CheckExact(context):
        ctx = <PyObject *>context
    else:
        # asyncio fails only when the callback is due; say so at the call.
        raise TypeError(f'context must be a contextvars.Context, '
                        f'got {type(context).__name__}')
    h = minloop_make_handle(kind, cls, callback, args, ctx, loop)
    h._context_shared = shared
    if debug:
        h._debug = True
        # The innermost Python frame is the caller of call_soon & co.:
        # the loop's own methods are compiled and add none.
        h._source_traceback = _extract_stack(_getframe(0))
    return h


cdef Handle new_handle(object callback, tuple args, object loop,
                       object context, bint debug):
    return _make(MINLOOP_MAKE_HANDLE, Handle, callback, args, loop, context, debug)


cdef Handle new_threadsafe_handle(object callback, tuple args, object loop,
                                  object context, bint debug):
    return _make(MINLOOP_MAKE_THREADSAFE, _ThreadSafeHandle, callback, args, loop,
                 context, debug)


cdef TimerHandle new_timer(double when, object callback, tuple args,
                           object loop, object context, bint debug,
                           timer_heap *heap):
    cdef TimerHandle h = <TimerHandle>_make(MINLOOP_MAKE_TIMER, TimerHandle, callback,
                                            args, loop, context, debug)
    h._when = when
    h._heap = heap      # its _heap_pos is -1: in no heap yet
    return h


# ----------------------------------------------------------------------
# The types' slots
#
# Handle and TimerHandle add no field to their C bases, whose tp_dealloc,
# tp_traverse and tp_clear already cover the whole object (and keep a free
# list per layout, handle_bases.c).  Cython's generated slots would only
# call the base's, after a GC untrack and re-track, for every handle that
# dies: the types take the base's slots instead.  The free lists recognise
# our types by that tp_dealloc, so this must happen before the first handle
# is made.

minloop_handle_take_base_slots(Handle)
minloop_handle_take_base_slots(TimerHandle)
minloop_handle_take_base_slots(_ThreadSafeHandle)
if minloop_ts_init() < 0:
    raise ImportError("minloop.handles: pthread_atfork failed")
