from cpython.object cimport PyObject

from .includes cimport (timer_heap, PyObject_GC_IsTracked, PyObject_GC_Track,
                        PyObject_GC_UnTrack)


# The C types under our handles (src/handle_bases.c, whose header comment
# says why they exist): HandleBase extends asyncio.Handle, TimerHandleBase
# asyncio.TimerHandle.  A TimerHandle's layout, MinloopTimerHandle, is a
# Handle's, MinloopHandle, and three fields more (src/handle_bases.h, where
# each field is described): the loop reads any handle as a Handle, and a
# timer's own fields only through a TimerHandle.  A Cython module that
# subclasses them must be built with CYTHON_USE_TYPE_SPECS=1 (setup.py does).
cdef extern from "handle_bases.h":
    ctypedef class minloop._handle_bases.HandleBase [object MinloopHandle]:
        # asyncio's slots, with asyncio's meaning.
        # A tuple, or None once cancelled -- as we store it; see
        # minloop_handle_check_slots() for why no code may rely on that.
        cdef object _args
        cdef object _callback
        cdef object _cancelled      # True or False (test with `is True`)
        cdef object _context
        cdef object _loop
        cdef object _repr
        cdef object _source_traceback
        # Ours.
        cdef PyObject *_arg0          # _inline_args > 0 (handles.pyx, "Arguments")
        cdef PyObject *_arg1          # _inline_args == 2; never a _ThreadSafeHandle's
        cdef unsigned int _queued
        cdef unsigned int _inline_args
        cdef unsigned int _context_shared
        cdef unsigned int _debug
        cdef unsigned int _threadsafe

    # The same fields, then a timer's.
    ctypedef class minloop._handle_bases.TimerHandleBase [object MinloopTimerHandle]:
        cdef object _args
        cdef object _callback
        cdef object _cancelled
        cdef object _context
        cdef object _loop
        cdef object _repr
        cdef object _source_traceback
        cdef PyObject *_arg0
        cdef PyObject *_arg1
        cdef double _when
        cdef Py_ssize_t _heap_pos
        cdef timer_heap *_heap
        cdef unsigned int _queued
        cdef unsigned int _inline_args
        cdef unsigned int _context_shared
        cdef unsigned int _debug
        cdef unsigned int _threadsafe

    # The type call_soon_threadsafe() returns where asyncio has a
    # _ThreadSafeHandle (3.14+), which it extends; a Handle's fields, with
    # _arg1's word holding the thread running its callback instead
    # (src/threadsafe_handle.h reads it, as _runner): it keeps one argument
    # inline at most.
    ctypedef class minloop._handle_bases.ThreadSafeHandleBase [object MinloopThreadSafeHandle]:
        cdef object _args
        cdef object _callback
        cdef object _cancelled
        cdef object _context
        cdef object _loop
        cdef object _repr
        cdef object _source_traceback
        cdef PyObject *_arg0
        cdef unsigned int _queued
        cdef unsigned int _inline_args
        cdef unsigned int _context_shared
        cdef unsigned int _debug
        cdef unsigned int _threadsafe

    bint minloop_handle_gc_seen(void *h, unsigned long epoch)
    # Whether the handle holds the only reference to its context (read
    # without taking one, as Cython would).
    bint minloop_handle_context_alone(void *h)
    # Puts None back into any of asyncio's slots deleted through asyncio's
    # own descriptors; call before reading them (handle_bases.h says why).
    void minloop_handle_check_slots(void *h)
    # What every kind of handle shares (handle_bases.h says what each does).
    void minloop_handle_drop_inline_args(void *h)
    object minloop_handle_args(void *h)
    object minloop_handle_own_context(void *h)
    # Gives a Cython subclass its base's dealloc/traverse/clear slots
    # (handles.pyx, at import; handle_bases.h says why).
    int minloop_handle_take_base_slots(object type) except -1


# Siblings, not parent and child: CPython refuses a TimerHandle with both
# our Handle and asyncio.TimerHandle as bases (handle_bases.c).  They add
# methods only, and no C methods (a vtable would differ between them):
# what the loop calls is the module-level functions below, which take
# either type as `Handle` (a timer's layout starts with a Handle's; the loop
# casts, and reads a timer's own fields through a TimerHandle).
cdef class Handle(HandleBase):
    pass


cdef class TimerHandle(TimerHandleBase):
    pass


# Named as asyncio's, whose repr shows the class name.
cdef class _ThreadSafeHandle(ThreadSafeHandleBase):
    pass


cdef void forget_context_snapshot() noexcept

cdef Handle new_handle(object callback, tuple args, object loop,
                       object context, bint debug)

# call_soon_threadsafe()'s handle (run and cancelled under the monitor of
# src/threadsafe_handle.h); returned as a Handle, the loop's one view.
cdef Handle new_threadsafe_handle(object callback, tuple args, object loop,
                                  object context, bint debug)

cdef TimerHandle new_timer(double when, object callback, tuple args,
                           object loop, object context, bint debug,
                           timer_heap *heap)

# Runs the callback in the handle's context; exceptions go to the loop's
# exception handler (SystemExit and KeyboardInterrupt propagate).
cdef int handle_run(Handle h) except -1

# cancel(), for either type (a timer leaves its heap at once).
cdef int handle_cancel(Handle h) except -1


cdef inline bint handle_cancelled(Handle h) noexcept:
    return h._cancelled is True


# Call after a loop container took its reference to `h`.
cdef inline void handle_enqueued(Handle h) noexcept:
    h._queued += 1
    if h._queued == 1 and PyObject_GC_IsTracked(h):
        PyObject_GC_UnTrack(<void *>h)


# Call before a loop container drops its reference to `h`.
cdef inline void handle_dequeued(Handle h) noexcept:
    h._queued -= 1
    if h._queued == 0 and not PyObject_GC_IsTracked(h):
        PyObject_GC_Track(<void *>h)


# For the loop's traverse: whether `h` was reported already in the traverse
# numbered `epoch` (marks it otherwise).  See handle_bases.h for why the
# comparison must happen there.
cdef inline bint handle_gc_seen(Handle h, unsigned long epoch) noexcept:
    return minloop_handle_gc_seen(<void *>h, epoch)
