# cython: language_level=3
"""Handle and TimerHandle: the objects call_soon() and call_at() return.

Same public surface and repr as asyncio.events.Handle/TimerHandle.  The loop
runs them through the C-level `_run_callback`, which enters the handle's
context with the C API (no Context.run() call per callback).
"""

import sys

from asyncio import format_helpers as _format_helpers

cimport cython
from cpython.contextvars cimport (PyContext_CheckExact, PyContext_CopyCurrent,
                                  PyContext_Enter, PyContext_Exit)
from cpython.ref cimport Py_DECREF

from .includes cimport heap_remove

# asyncio 3.13 added a `debug` keyword to the helper that formats callbacks.
cdef bint _FORMAT_TAKES_DEBUG = sys.version_info >= (3, 13)
cdef object _format_callback_source = _format_helpers._format_callback_source
cdef object _extract_stack = _format_helpers.extract_stack
cdef object _getframe = sys._getframe


cdef str _format_callback(object callback, tuple args, bint debug):
    if _FORMAT_TAKES_DEBUG:
        return _format_callback_source(callback, args, debug=debug)
    return _format_callback_source(callback, args)


@cython.freelist(256)
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
        cdef object context = self._context
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


cdef inline int _init_handle(Handle h, object callback, tuple args,
                              object loop, object context, bint debug) except -1:
    if context is None:
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
