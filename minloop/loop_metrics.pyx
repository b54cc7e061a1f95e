# cython: freethreading_compatible=True
"""The objects a loop's telemetry is read through: loop.stats() gives a
LoopStats, loop.utilization() a Utilization, loop.lag and
loop.busy_time a Histogram.

The numbers are the loop's own C state (src/telemetry.h, which says where
each comes from and what it costs); these objects only copy them out.  Any
thread may read them while the loop runs (docs/threading.md, item 18).
asyncio has no counterpart: a program that wants these on asyncio's loop
hand-rolls a probe, which sees less (tests/test_telemetry.py shows what).
"""

from libc.math cimport INFINITY
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memset

from .includes cimport (TM_BUCKETS, XT_GUARD_THREADS, tm_read_counters, tm_read_clock,
                        tm_hist_read, tm_hist_reset, tm_bucket_bound, heap_pushes,
                        heap_removed, fdt_watched, fdt_watched_max)


# ns to seconds: a division is correctly rounded (1536 ns is 1.536e-06 s).
cdef double NS = 1e9


def _bounds():
    """Each bucket's inclusive upper bound, in seconds (the last: inf)."""
    cdef int i
    return tuple(INFINITY if i == TM_BUCKETS - 1 else tm_bucket_bound(i) / NS
                 for i in range(TM_BUCKETS))


#: The histograms' bucket bounds in seconds, shared by every histogram: a
#: bucket holds the values in (previous bound, bound].
BOUNDS = _bounds()


cdef class LoopStats:
    """An immutable snapshot of a loop's counters (loop.stats()).

    Counts are since the loop was created.  `iterations` is the sum of the
    three kinds of poll, one per iteration: `polls_blocked` (made with a
    timeout, so they may block: their time is the idle time),
    `polls_immediate` (a zero timeout: callbacks were ready) and
    `polls_skipped` (no fd to watch and callbacks ready: no syscall).
    `callbacks` counts callbacks run (cancelled ones are skipped, not run);
    `ready` is the ready queue's length now and `ready_max` the largest batch
    an iteration ran.  Timers: `timers_live` = scheduled - fired - cancelled
    (and those still pending when the loop closed); `timers_max` is the most
    pending as an iteration went to pop the due ones (sampled there, once
    an iteration).  `fds_watched`: fds with a reader or writer now
    (`fds_max`: at most); `fd_events`: events the poller reported for them.
    `exceptions`: calls of the loop's call_exception_handler().  `time`:
    loop.time() when the snapshot was taken.
    """

    _fields = ('time', 'iterations', 'callbacks', 'polls_blocked', 'polls_immediate',
               'polls_skipped', 'fd_events', 'fds_watched', 'fds_max', 'ready',
               'ready_max', 'timers_scheduled', 'timers_fired', 'timers_cancelled',
               'timers_live', 'timers_max', 'exceptions')

    def _asdict(self):
        """The fields as a dict, in _fields' order."""
        return {name: getattr(self, name) for name in self._fields}

    def __repr__(self):
        return 'LoopStats(' + ', '.join(
            f'{name}={getattr(self, name)!r}' for name in self._fields) + ')'

    def __reduce__(self):
        raise TypeError('cannot pickle LoopStats: use _asdict()')


cdef LoopStats make_stats(tm_loop *tm, timer_heap *heap, fd_table *fdt,
                          size_t ready, double now):
    cdef tm_counters c
    cdef LoopStats s = LoopStats.__new__(LoopStats)
    # From here to the end, C only: with the GIL, one moment of the loop.
    tm_read_counters(tm, &c)
    s.time = now
    s.iterations = c.polls_blocked + c.polls_immediate + c.polls_skipped
    s.callbacks = c.callbacks
    s.polls_blocked = c.polls_blocked
    s.polls_immediate = c.polls_immediate
    s.polls_skipped = c.polls_skipped
    s.fd_events = c.fd_events
    s.fds_watched = fdt_watched(fdt)
    s.fds_max = fdt_watched_max(fdt)
    s.ready = ready
    s.ready_max = c.ready_max
    s.timers_scheduled = heap_pushes(heap)
    s.timers_fired = c.timers_fired
    s.timers_cancelled = heap_removed(heap)
    cdef uint64_t gone = c.timers_fired + s.timers_cancelled + c.timers_dropped
    # Read one after the other: on a free-threaded build a timer may have
    # gone since `scheduled` was read.
    s.timers_live = s.timers_scheduled - gone if s.timers_scheduled > gone else 0
    s.timers_max = c.timers_max
    s.exceptions = c.exceptions
    return s


cdef class Utilization:
    """Event-loop utilization, Node's definition (loop.utilization()).

    `idle`: seconds the loop spent blocked in the poller; `active`: the rest
    of the time it spent running (inside run_forever()); `utilization`:
    active / (idle + active), 0.0 when both are 0.  Pass one as `previous`
    to loop.utilization() for the figures since it was taken, or two
    (loop.utilization(later, earlier)) for those between them.
    """

    def __repr__(self):
        return (f'Utilization(idle={self.idle!r}, active={self.active!r}, '
                f'utilization={self.utilization!r})')


cdef Utilization make_utilization(tm_loop *tm, double now, object previous):
    cdef int64_t elapsed, idle_ns
    tm_read_clock(tm, now, &elapsed, &idle_ns)
    return _utilization(idle_ns / NS, (elapsed - idle_ns) / NS, previous)


cdef Utilization utilization_between(object later, object earlier):
    """Node's eventLoopUtilization(u1, u2): from `earlier` to `later`, two
    earlier results, with no clock read."""
    return _utilization(<double>later.idle, <double>later.active, earlier)


cdef Utilization _utilization(double idle, double active, object previous):
    if previous is not None:
        # Node's delta: any object with idle and active, in seconds.
        idle -= <double>previous.idle
        active -= <double>previous.active
    cdef Utilization u = Utilization.__new__(Utilization)
    u.idle = idle
    u.active = active
    u.utilization = active / (idle + active) if idle + active > 0 else 0.0
    return u


cdef class HistogramSnapshot:
    """A histogram's counts as read at one moment (Histogram.snapshot()):
    count, sum, min, max and mean in seconds, percentile(p), buckets()."""

    @property
    def count(self):
        """How many values were recorded (the sum of the buckets)."""
        return self._copy.count

    @property
    def sum(self):
        """The sum of the values, in seconds."""
        return self._copy.sum / NS

    @property
    def min(self):
        """The smallest value, in seconds (0.0 when empty)."""
        return self._copy.min / NS

    @property
    def max(self):
        """The largest value, in seconds (0.0 when empty)."""
        return self._copy.max / NS

    @property
    def mean(self):
        """The mean value, in seconds (0.0 when empty)."""
        if self._copy.count == 0:
            return 0.0
        return self._copy.sum / NS / self._copy.count

    def percentile(self, p):
        """The value below which p percent of the values lie, in seconds
        (0 <= p <= 100), interpolated within its bucket; min and max are
        exact."""
        cdef double q = p
        if not 0.0 <= q <= 100.0:
            raise ValueError(f'percentile must be between 0 and 100, got {p!r}')
        cdef uint64_t n = self._copy.count
        if n == 0:
            return 0.0
        if q == 0.0:
            return self.min
        if q == 100.0:
            return self.max
        cdef double rank = q / 100.0 * n
        cdef double cum = 0.0, lo, hi, c
        cdef double low = self._copy.min, high = self._copy.max
        cdef int i
        for i in range(TM_BUCKETS):
            c = <double>self._copy.counts[i]
            if c != 0 and cum + c >= rank:
                lo = tm_bucket_bound(i - 1) if i else 0.0
                hi = tm_bucket_bound(i) if i < TM_BUCKETS - 1 else high
                if lo < low:
                    lo = low
                if hi > high:
                    hi = high
                return (lo + (hi - lo) * ((rank - cum) / c)) / NS
            cum += c
        return self.max

    def buckets(self):
        """Every bucket as (upper bound in seconds, count), in order; a
        bucket holds the values in (previous bound, bound], the last bound
        is inf (Prometheus' and OpenTelemetry's buckets, one to one)."""
        cdef int i
        return [(BOUNDS[i], self._copy.counts[i]) for i in range(TM_BUCKETS)]

    @property
    def bounds(self):
        """The buckets' upper bounds in seconds (BOUNDS)."""
        return BOUNDS

    def __repr__(self):
        return (f'{type(self).__name__}(count={self.count}, min={self.min!r}, '
                f'p50={self.percentile(50)!r}, p99={self.percentile(99)!r}, '
                f'max={self.max!r})')


cdef class Histogram:
    """One of a loop's histograms, live (loop.lag, loop.busy_time):
    each attribute reads the counts afresh; snapshot() reads them once for
    several.  Fixed log-linear buckets, four per power of two, from about
    1 us (everything below is in the first) to 68.7 s (everything above is
    in the last, whose bound is inf).  Values are in seconds."""

    def snapshot(self):
        """The counts now, as a HistogramSnapshot."""
        cdef HistogramSnapshot s = HistogramSnapshot.__new__(HistogramSnapshot)
        tm_hist_read(self._h, &s._copy)
        return s

    def reset(self):
        """Forget every value recorded so far.  On a free-threaded build,
        only from the loop's thread while it runs (RuntimeError else)."""
        if XT_GUARD_THREADS:
            self._loop._check_thread()
        tm_hist_reset(self._h)

    @property
    def count(self):
        """How many values were recorded (the sum of the buckets)."""
        return self.snapshot().count

    @property
    def sum(self):
        """The sum of the values, in seconds."""
        return self.snapshot().sum

    @property
    def min(self):
        """The smallest value, in seconds (0.0 when empty)."""
        return self.snapshot().min

    @property
    def max(self):
        """The largest value, in seconds (0.0 when empty)."""
        return self.snapshot().max

    @property
    def mean(self):
        """The mean value, in seconds (0.0 when empty)."""
        return self.snapshot().mean

    def percentile(self, p):
        """As HistogramSnapshot.percentile(), of the counts now."""
        return self.snapshot().percentile(p)

    def buckets(self):
        """As HistogramSnapshot.buckets(), of the counts now."""
        return self.snapshot().buckets()

    @property
    def bounds(self):
        """The buckets' upper bounds in seconds (BOUNDS)."""
        return BOUNDS

    def __repr__(self):
        return repr(self.snapshot()).replace('HistogramSnapshot', 'Histogram', 1)


cdef Histogram histogram_view(object loop, tm_histogram *h):
    cdef Histogram view = Histogram.__new__(Histogram)
    view._loop = loop
    view._h = h
    return view
