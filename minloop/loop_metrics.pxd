from .includes cimport (tm_loop, tm_histogram, tm_hist_copy, tm_counters, timer_heap,
                        fd_table)


cdef class LoopStats:
    cdef readonly double time
    cdef readonly unsigned long long iterations, callbacks
    cdef readonly unsigned long long polls_blocked, polls_immediate, polls_skipped
    cdef readonly unsigned long long fd_events, fds_watched, fds_max
    cdef readonly unsigned long long ready, ready_max
    cdef readonly unsigned long long timers_scheduled, timers_fired, timers_cancelled
    cdef readonly unsigned long long timers_live, timers_max
    cdef readonly unsigned long long exceptions


cdef class Utilization:
    cdef readonly double idle, active, utilization


cdef class HistogramSnapshot:
    cdef tm_hist_copy _copy


cdef class Histogram:
    cdef object _loop
    cdef tm_histogram *_h


# The loop's side (loop.pyx): each reads the C state before it makes any
# Python object, so with the GIL the loop's thread cannot run in between.
cdef LoopStats make_stats(tm_loop *tm, timer_heap *heap, fd_table *fdt,
                          size_t ready, double now)
cdef Utilization make_utilization(tm_loop *tm, double now, object previous)
cdef Utilization utilization_between(object later, object earlier)
cdef Histogram histogram_view(object loop, tm_histogram *h)
