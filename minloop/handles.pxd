from .includes cimport timer_heap


cdef extern from "Python.h":
    int PyObject_GC_IsTracked(object o)
    void PyObject_GC_Track(void *o)
    void PyObject_GC_UnTrack(void *o)


cdef class Handle:
    # Fields: objects first, then the C numbers, the 4-byte ones together,
    # so that no padding is spent between them (a transport's reader is a
    # handle too: its size is paid per connection).
    cdef:
        readonly object _callback
        readonly tuple _args
        # The context the callback runs in.  While `_context_shared`, it is
        # a snapshot shared with other handles (see _context_snapshot in
        # handles.pyx) that nobody may enter: the handle takes a private
        # copy when it runs or when someone asks for its context.
        object _context
        readonly object _loop
        readonly object _source_traceback
        # asyncio's handles take weak references (its __slots__ has
        # __weakref__); so do ours.
        object __weakref__
        # The repr frozen at cancel() in debug mode, as asyncio keeps it for
        # the "Executing <Handle ...> took N seconds" warning.
        object _repr
        # TimerHandle's fields.  They live here so that both types have one
        # size and share one free list (see handles.pyx); a plain Handle
        # leaves them unused.
        double _when
        # Position in the owning loop's heap (kept there by the heap), -1
        # once the timer has left it; the heap holds one reference meanwhile.
        Py_ssize_t _heap_pos
        timer_heap *_heap
        # Marks the handle as reported in one traverse of its loop, so a
        # handle held twice (fd table and ready ring) is reported once.
        unsigned long _gc_epoch
        bint _context_shared
        readonly bint _cancelled
        bint _debug
        # How many of the loop's C containers (ready ring, timer heap, fd
        # table) hold this handle.  While it is in any, the handle is not
        # tracked by the cycle collector: the loop's traverse reports the
        # handle's references instead (see loop.pyx), so a million queued
        # callbacks do not make every collection walk a million objects.
        unsigned int _queued

    cdef int _run_callback(self) except -1
    cdef int _cancel(self) except -1
    cdef object _own_context(self)
    cdef _report(self, exc)


cdef class TimerHandle(Handle):
    cdef bint _equal(self, TimerHandle o) except -1


cdef void forget_context_snapshot() noexcept

cdef Handle new_handle(object callback, tuple args, object loop,
                       object context, bint debug)

cdef TimerHandle new_timer(double when, object callback, tuple args,
                           object loop, object context, bint debug,
                           timer_heap *heap)


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

