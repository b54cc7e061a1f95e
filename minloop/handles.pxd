from .includes cimport timer_heap


cdef class Handle:
    cdef:
        readonly object _callback
        readonly tuple _args
        readonly object _context
        readonly object _loop
        readonly bint _cancelled
        readonly object _source_traceback
        # The repr frozen at cancel() in debug mode, as asyncio keeps it for
        # the "Executing <Handle ...> took N seconds" warning.
        object _repr
        bint _debug

    cdef int _run_callback(self) except -1
    cdef int _cancel(self) except -1
    cdef _report(self, exc)


cdef class TimerHandle(Handle):
    cdef:
        readonly double _when
        # Position in the owning loop's heap (kept there by the heap), -1
        # once the timer has left it; the heap holds one reference meanwhile.
        Py_ssize_t _heap_pos
        timer_heap *_heap

    cdef bint _equal(self, TimerHandle o) except -1


cdef Handle new_handle(object callback, tuple args, object loop,
                       object context, bint debug)

cdef TimerHandle new_timer(double when, object callback, tuple args,
                           object loop, object context, bint debug,
                           timer_heap *heap)
