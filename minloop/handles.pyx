"""Handle and TimerHandle: the objects call_soon() and call_at() return.

Same public surface and repr as asyncio.events.Handle/TimerHandle.  The loop
runs them through the C-level `_run_callback`, which enters the handle's
context with the C API (no Context.run() call per callback).
"""

import sys

from asyncio import format_helpers as _format_helpers

from . import _asyncio_compat

cimport cython
from cpython.contextvars cimport (PyContext_CheckExact, PyContext_Copy,
                                  PyContext_CopyCurrent, PyContext_Enter,
                                  PyContext_Exit)
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_REFCNT

from .includes cimport heap_remove


cdef extern from "Python.h":
    # CPython's thread state (cpython/pystate.h): the current context.
    ctypedef struct PyThreadState:
        PyObject *context
    PyThreadState *PyThreadState_Get()


cdef extern from *:
    """
    /* The layout of a contextvars.Context, as CPython 3.7 to 3.13 define it
     * (internal/pycore_context.h): its variables live in an immutable HAMT
     * that every ContextVar.set()/reset() replaces.  Used only where this
     * build knows the layout, and only after _check_context_layout() has
     * confirmed it at import time (the version gate: src/py_compat.h). */
    #include "py_compat.h"
    typedef struct {
        PyObject_HEAD
        PyObject *ctx_prev;
        PyObject *ctx_vars;
        PyObject *ctx_weakreflist;
        int ctx_entered;
    } minloop_context_layout;
    #define minloop_context_vars(ctx) (((minloop_context_layout *)(ctx))->ctx_vars)
    """
    bint MINLOOP_KNOWN_CONTEXT_LAYOUT
    PyObject *minloop_context_vars(PyObject *ctx)


cdef bint _FORMAT_TAKES_DEBUG = _asyncio_compat.FORMAT_TAKES_DEBUG
cdef object _format_callback_source = _format_helpers._format_callback_source
cdef object _extract_stack = _format_helpers.extract_stack
cdef object _getframe = sys._getframe


cdef str _format_callback(object callback, tuple args, bint debug):
    if _FORMAT_TAKES_DEBUG:
        return _format_callback_source(callback, args, debug=debug)
    return _format_callback_source(callback, args)


# Handles come from free lists big enough for a burst of a busy iteration
# (every timer that fires wakes a task through a new handle): an object
# taken from a free list is not counted as an allocation by the cycle
# collector, which starts a collection every 700 counted allocations.
# TimerHandle adds no field, so Cython's free list takes both types.  At
# most 4096 dead handles are kept (about 600 KiB).
@cython.freelist(4096)
cdef class Handle:
    """Object returned by callback registration methods."""

    def __init__(self, *args, **kwargs):
        raise TypeError("minloop handles are created by the event loop "
                        "(call_soon, call_later, call_at)")

    def _repr_info(self):
        info = [type(self).__name__]
        if self._cancelled:
            info.append('cancelled')
        if self._callback is not None:
            info.append(_format_callback(self._callback, self._args, self._debug))
        if self._source_traceback:
            frame = self._source_traceback[-1]
            info.append(f'created at {frame[0]}:{frame[1]}')
        return info

    def __repr__(self):
        if self._repr is not None:
            return self._repr
        return '<{}>'.format(' '.join(self._repr_info()))

    def get_context(self):
        return self._own_context()

    @property
    def _context(self):
        return self._own_context()

    cdef object _own_context(self):
        """The handle's own context, copied from the shared snapshot once."""
        if self._context_shared:
            self._context = PyContext_Copy(self._context)
            self._context_shared = False
        return self._context

    def cancel(self):
        self._cancel()

    cdef int _cancel(self) except -1:
        if not self._cancelled:
            self._cancelled = True
            if self._debug:
                self._repr = repr(self)
            # Drop the references at once, as asyncio does: a cancelled
            # callback must not keep its arguments alive until it is skipped.
            self._callback = None
            self._args = None
        return 0

    def cancelled(self):
        return self._cancelled

    def _run(self):
        self._run_callback()

    cdef int _run_callback(self) except -1:
        cdef object snapshot = None
        cdef object context
        if self._context_shared:
            # Run in a private copy (a callback's var.set() must not reach
            # the other handles sharing the snapshot).  It becomes the
            # handle's own context, as asyncio's handle has one.
            snapshot = self._context
            context = PyContext_Copy(snapshot)
            self._context = context
            self._context_shared = False
        else:
            context = self._context
        cdef object callback = self._callback
        cdef tuple args = self._args
        try:
            PyContext_Enter(context)
        except Exception as exc:
            # Already entered (a nested run in the same context): asyncio's
            # Context.run() fails inside the handle's try, so it is reported.
            self._report(exc)
            return 0
        try:
            if args:
                callback(*args)
            else:
                callback()
        except BaseException as exc:
            # Leave the context before reporting, as Context.run() would.
            PyContext_Exit(context)
            if isinstance(exc, (SystemExit, KeyboardInterrupt)):
                raise
            self._report(exc)
            return 0
        PyContext_Exit(context)
        if snapshot is not None:
            _share_again(self, snapshot, context)
        return 0

    cdef _report(self, exc):
        cb = _format_callback(self._callback, self._args, self._debug)
        context = {
            'message': f'Exception in callback {cb}',
            'exception': exc,
            'handle': self,
        }
        if self._source_traceback:
            context['source_traceback'] = self._source_traceback
        self._loop.call_exception_handler(context)


cdef class TimerHandle(Handle):
    """Object returned by timed callback registration methods."""

    @property
    def _when(self):
        return self._when

    def _repr_info(self):
        info = Handle._repr_info(self)
        pos = 2 if self._cancelled else 1
        info.insert(pos, f'when={self._when}')
        return info

    @property
    def _scheduled(self):
        return self._heap_pos >= 0

    def __hash__(self):
        return hash(self._when)

    def __richcmp__(self, other, int op):
        if not isinstance(other, TimerHandle):
            return NotImplemented
        cdef TimerHandle o = <TimerHandle>other
        if op == 0:    # <
            return self._when < o._when
        if op == 4:    # >
            return self._when > o._when
        if op == 2:    # ==
            return self._equal(o)
        if op == 3:    # !=
            return not self._equal(o)
        if op == 1:    # <=
            return self._when < o._when or self._equal(o)
        return self._when > o._when or self._equal(o)   # >=

    cdef bint _equal(self, TimerHandle o) except -1:
        return (self._when == o._when and self._callback == o._callback and
                self._args == o._args and self._cancelled == o._cancelled)

    cdef int _cancel(self) except -1:
        cdef Py_ssize_t pos = self._heap_pos
        if not self._cancelled and pos >= 0:
            # Leave the heap now (O(log n)), so a server that arms and
            # cancels millions of timeouts holds no dead timers.  The caller
            # holds a reference to self, so dropping the heap's is safe.
            heap_remove(self._heap, <size_t>pos)
            handle_dequeued(self)
            Py_DECREF(self)
        return Handle._cancel(self)

    def when(self):
        """Return a scheduled callback time.

        The time is an absolute timestamp, using the same time
        reference as loop.time().
        """
        return self._when


# ----------------------------------------------------------------------
# Context snapshots
#
# asyncio copies the current context for every callback scheduled without
# context= (contextvars.copy_context()), and each copy is a new object for
# the cycle collector to count and walk.  Yet a server schedules thousands of
# callbacks from one unchanged context.  A context's variables live in an
# immutable map (a HAMT) that every ContextVar.set()/reset() replaces, so
# while the current context still holds the very map our last copy holds,
# that copy has the same values and is shared.  Nobody ever enters the shared
# snapshot: a handle takes its private copy (PyContext_Copy, from CPython's
# free list) when it runs or when its context is asked for, so each callback
# still runs in a context of its own, with the values current when it was
# scheduled.  Where the layout is unknown or fails the import-time check,
# every handle gets its own copy at once, as in asyncio.

cdef bint _share_snapshots = False
cdef PyObject *_snapshot_vars = NULL   # the snapshot's variables (it keeps them alive)
cdef object _snapshot = None


cdef inline object _context_snapshot():
    global _snapshot_vars, _snapshot
    cdef PyObject *current = PyThreadState_Get().context
    if current != NULL and minloop_context_vars(current) == _snapshot_vars:
        return _snapshot   # same variables, same values: same snapshot
    snapshot = PyContext_CopyCurrent()
    _snapshot_vars = minloop_context_vars(<PyObject *>snapshot)
    _snapshot = snapshot
    return snapshot


cdef void forget_context_snapshot() noexcept:
    """Drop the cached snapshot, so that it does not keep the values of a
    finished request's context variables alive once its handles are gone."""
    global _snapshot_vars, _snapshot
    if _snapshot_vars != NULL:
        _snapshot_vars = NULL
        _snapshot = None


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
                probe not in copy and len(<object>after) == len(copy) + 1)

    return bool(contextvars.copy_context().run(check))


if MINLOOP_KNOWN_CONTEXT_LAYOUT:
    _share_snapshots = _check_context_layout()


cdef inline void _share_again(Handle h, object snapshot, object context) noexcept:
    """Give back the private copy a run made, if nothing can tell.

    A handle the program keeps (a timer stored as self._handle, say) would
    otherwise hold a context of its own from its run on: one allocation per
    run that lives on, and enough of them start the cycle collector while
    held timers fire.  If the callback set no variable (the copy still holds
    the snapshot's map) and nobody took the copy (only `h` and the caller
    refer to it), the copy is the snapshot in all but identity, so the
    handle shares the snapshot again and the copy goes back to CPython's
    free list at once.
    """
    if (Py_REFCNT(context) == 2 and
            minloop_context_vars(<PyObject *>context) ==
            minloop_context_vars(<PyObject *>snapshot)):
        h._context = snapshot
        h._context_shared = True


cdef inline int _init_handle(Handle h, object callback, tuple args,
                              object loop, object context, bint debug) except -1:
    if context is None:
        if _share_snapshots:
            context = _context_snapshot()
            h._context_shared = True
        else:
            context = PyContext_CopyCurrent()
    elif not PyContext_CheckExact(context):
        # asyncio fails only when the callback is due; say so at the call.
        raise TypeError(f'context must be a contextvars.Context, '
                        f'got {type(context).__name__}')
    h._callback = callback
    h._args = args
    h._context = context
    h._loop = loop
    h._debug = debug
    if debug:
        # The innermost Python frame is the caller of call_soon & co.:
        # the loop's own methods are compiled and add none.
        h._source_traceback = _extract_stack(_getframe(0))
    return 0


cdef Handle new_handle(object callback, tuple args, object loop,
                       object context, bint debug):
    cdef Handle h = Handle.__new__(Handle)
    _init_handle(h, callback, args, loop, context, debug)
    return h


cdef TimerHandle new_timer(double when, object callback, tuple args,
                           object loop, object context, bint debug,
                           timer_heap *heap):
    cdef TimerHandle h = TimerHandle.__new__(TimerHandle)
    _init_handle(h, callback, args, loop, context, debug)
    h._when = when
    h._heap_pos = -1
    h._heap = heap
    return h
