/* telemetry: what a loop counts and times about itself, at no cost it would
 * notice (loop.stats(), loop.utilization(), loop.lag, loop.busy_time,
 * loop.stalls;
 * minloop/loop_metrics.pyx makes the Python objects).
 *
 * Where each number comes from
 *
 *  - Counters are plain integers bumped where the loop already does the work:
 *    a callback run, a batch started (the ready queue's high-water mark), a
 *    poll skipped / made with a zero timeout / made with a timeout, an fd
 *    event, a timer scheduled or fired, a report to the exception handler.
 *    Timers scheduled and cancelled are counted by the heap (its pushes,
 *    heap_remove), fired ones by the lag histogram (its total), watched fds
 *    by the fd table (fdt_install): they are the places that know.
 *  - Time is read only where it is free.  A poll that may block (one with a
 *    timeout) is a syscall that sleeps: the two clock reads around it give
 *    the idle time (Node's event-loop utilization, ELU), and the busy time
 *    since the previous one's return (the busy-time histogram, loop.busy_time).  The
 *    read before it is the one the loop already made to choose the timeout
 *    when a timer is pending; the read after it is the one the loop then
 *    uses to pop the due timers, whose lateness (now - when) fills the lag
 *    histogram.  A poll that is skipped or has a zero timeout reads no clock,
 *    and no callback ever does.
 *
 * Histograms
 *
 * Fixed log-linear buckets over nanoseconds: bucket 0 holds values up to
 * 2^10 ns (about 1 us); above it each power of two [2^e, 2^(e+1)) is split
 * into TM_SUB equal buckets, up to 2^36 ns (68.7 s); the last bucket holds
 * everything longer.  A bucket holds the values in (previous bound, bound],
 * so its bound is an inclusive upper bound, as Prometheus' `le` and
 * OpenTelemetry's explicit bounds are: the buckets map one to one onto
 * theirs.  Recording takes the bucket from the value's bits as a double (a
 * shift and a subtraction) and increments it; exact min, max and sum are
 * kept beside the buckets.
 *
 * Other threads (docs/threading.md, item 18)
 *
 * Only the loop's thread writes (exceptions aside: call_exception_handler()
 * may be called from any thread, so that counter is an atomic add).  Every
 * word another thread may read is written and read as a relaxed atomic
 * (TM_LOAD/TM_STORE): on x86-64 and arm64 these are the plain loads and
 * stores the GIL build would make, and on a free-threaded build no read is
 * torn.  Each counter is exact; two counters read one after the other may be
 * a few events apart on a free-threaded build (never with the GIL, where a
 * reader runs only while the loop's thread is between two of these C
 * sections).  What must agree is made to: the iteration count is the sum of
 * the three kinds of poll, a histogram's count is the sum of its buckets,
 * and the clock words (run time, idle time, and when the current run and
 * the current sleep began) are written under a sequence lock, so a reader
 * never counts a sleep twice or not at all.
 *
 * MINLOOP_NO_TELEMETRY (setup.py's switch) compiles all of it out: the
 * functions below become empty and the struct keeps only what the loop
 * itself needs (the skipped-poll count that paces its signal checks, the
 * fd-event count its tests read).
 */
#ifndef MINLOOP_TELEMETRY_H
#define MINLOOP_TELEMETRY_H

#include <stdint.h>
#include <string.h>

#ifdef MINLOOP_NO_TELEMETRY
#define MINLOOP_TELEMETRY 0
#else
#define MINLOOP_TELEMETRY 1
#endif

/* A word one thread writes and any thread reads. */
#define TM_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define TM_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
/* One writer: a load, an add and a store (no locked instruction). */
#define TM_BUMP(x) TM_STORE((x), TM_LOAD(x) + 1)
#define TM_RAISE(x, v) do { if ((v) > TM_LOAD(x)) TM_STORE((x), (v)); } while (0)

/* ------------------------------------------------------------------ */
/* Histograms */

#define TM_MIN_EXP 10                 /* bucket 0: up to 2^10 ns */
#define TM_MAX_EXP 36                 /* last finite bound: 2^36 ns */
#define TM_SUB_BITS 2
#define TM_SUB (1 << TM_SUB_BITS)     /* buckets per power of two */
#define TM_BUCKETS (1 + (TM_MAX_EXP - TM_MIN_EXP) * TM_SUB + 1)

/* The recorder never zeroes anything: counts[] and sum only grow (so the
 * loop's count of fired timers is the lag histogram's total), and reset()
 * takes a baseline that readers subtract.  min and max are since the last
 * reset.  Values come as ns in a double (the bucket comes from its bits)
 * and are kept as whole ns. */
typedef struct {
    uint64_t counts[TM_BUCKETS];
    uint64_t sum;
    uint64_t min;                     /* UINT64_MAX while empty */
    uint64_t max;
    uint64_t base_counts[TM_BUCKETS]; /* counts[] at the last reset */
    uint64_t base_sum;
} tm_histogram;

/* The bucket of a value of `ns` (> 0, or it is bucket 0's).  A positive
 * double's bits order as the value does, and their top (exponent, first
 * TM_SUB_BITS bits of the mantissa) name a power of two and its quarter:
 * exactly these buckets.  Taking them from the next double down puts a
 * value equal to a bound in the bucket it bounds. */
#define TM_KEY_SHIFT (52 - TM_SUB_BITS)
#define TM_KEY_BASE ((((uint64_t)1023 + TM_MIN_EXP) << TM_SUB_BITS) - 1)

static inline unsigned tm_bucket(double ns)
{
    if (!(ns > (double)((uint64_t)1 << TM_MIN_EXP)))
        return 0;   /* also NaN */
    uint64_t bits;
    memcpy(&bits, &ns, sizeof bits);
    uint64_t k = ((bits - 1) >> TM_KEY_SHIFT) - TM_KEY_BASE;
    return k < TM_BUCKETS - 1 ? (unsigned)k : TM_BUCKETS - 1;
}

/* Bucket i's inclusive upper bound in ns (UINT64_MAX for the last). */
static inline uint64_t tm_bucket_bound(unsigned i)
{
    if (i == 0)
        return (uint64_t)1 << TM_MIN_EXP;
    if (i >= TM_BUCKETS - 1)
        return UINT64_MAX;
    unsigned e = TM_MIN_EXP + (i - 1) / TM_SUB, sub = (i - 1) % TM_SUB;
    return ((uint64_t)1 << e) + (uint64_t)(sub + 1) * ((uint64_t)1 << (e - TM_SUB_BITS));
}

static inline void tm_hist_init(tm_histogram *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

/* The loop's thread (loop_metrics.pyx refuses other threads where they
 * really run at once). */
static inline void tm_hist_reset(tm_histogram *h)
{
    for (unsigned i = 0; i < TM_BUCKETS; i++)
        TM_STORE(h->base_counts[i], TM_LOAD(h->counts[i]));
    TM_STORE(h->base_sum, TM_LOAD(h->sum));
    TM_STORE(h->max, 0);
    TM_STORE(h->min, UINT64_MAX);
}

/* A value of `ns` as whole ns: early (or NaN) is on time, 0. */
static inline uint64_t tm_hist_value(double ns)
{
    if (!(ns > 0.0))
        return 0;
    if (ns > 4e18)
        return (uint64_t)4e18;
    return (uint64_t)(int64_t)ns;
}

/* Counts a value in its bucket and the sum (not min and max). */
static inline uint64_t tm_hist_add(tm_histogram *h, double ns)
{
    unsigned i;
    if (ns > (double)((uint64_t)1 << TM_MIN_EXP)) {
        uint64_t bits;
        memcpy(&bits, &ns, sizeof bits);
        uint64_t k = ((bits - 1) >> TM_KEY_SHIFT) - TM_KEY_BASE;
        if (k < TM_BUCKETS - 1) {
            i = (unsigned)k;
        } else {
            i = TM_BUCKETS - 1;
            if (ns > 4e18)   /* kept a whole number of ns */
                ns = 4e18;
        }
    } else {
        i = 0;
        if (!(ns > 0.0))   /* early (or NaN): on time */
            ns = 0.0;
    }
    uint64_t v = (uint64_t)(int64_t)ns;
    TM_BUMP(h->counts[i]);
    TM_STORE(h->sum, TM_LOAD(h->sum) + v);
    return v;
}

/* Values from `lo` to `hi` ns were added. */
static inline void tm_hist_extremes(tm_histogram *h, uint64_t lo, uint64_t hi)
{
    if (lo < TM_LOAD(h->min))
        TM_STORE(h->min, lo);
    if (hi > TM_LOAD(h->max))
        TM_STORE(h->max, hi);
}

static inline void tm_hist_record(tm_histogram *h, double ns)
{
    uint64_t v = tm_hist_add(h, ns);
    tm_hist_extremes(h, v, v);
}

/* Values ever recorded (no baseline). */
static inline uint64_t tm_hist_total(const tm_histogram *h)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < TM_BUCKETS; i++)
        n += TM_LOAD(h->counts[i]);
    return n;
}

/* ------------------------------------------------------------------ */
/* A loop's telemetry */

typedef struct {
    /* Kept in both builds: the loop reads them for its own ends. */
    uint64_t polls_skipped;
    uint64_t fd_events;
#if MINLOOP_TELEMETRY
    uint64_t callbacks;
    uint64_t polls_immediate;     /* a zero timeout */
    uint64_t polls_blocked;       /* a timeout: may block, timed */
    uint64_t ready_max;           /* the largest batch of ready callbacks */
    /* Timers scheduled are the heap's pushes (heap_pushes()), fired ones
     * the lag histogram's total, cancelled ones the heap's removals. */
    uint64_t timers_dropped;      /* still pending when the loop closed */
    uint64_t timers_max;
    uint64_t exceptions;
    /* What the loop holds (for `top`, which reads them from another
     * process: telemetry_page.h): the last batch of ready callbacks, and
     * the fds watched and timers pending as of the last poll made (an
     * iteration that skips the poll, with callbacks ready and no fd to
     * watch, does not update them). */
    uint64_t ready_now;
    uint64_t timers_now;
    uint64_t fds_now;
    /* The clock words, under `seq` (odd while the loop writes them).  Times
     * are ns of the loop's clock; 0 in run_since/sleep_since: not now. */
    uint32_t seq;
    int64_t run_ns;               /* time inside run_forever(), ended runs */
    int64_t run_since;            /* the current run began */
    int64_t idle_ns;              /* time blocked in the poller, in runs */
    int64_t sleep_since;          /* the current sleep began */
    int64_t woke;                 /* the last sleep ended (read by top) */
    tm_histogram lag;             /* timers: now - when, as they fire */
    tm_histogram busy;            /* from a poll's return to the next poll */
    /* The stall watchdog (src/stall.h): the `callbacks` count of the
     * callback it found stalled, which an armed loop looks for as each
     * callback returns (tm_stalled). */
    uint64_t stall_flag;
    /* The stalls it found, by duration (its count: the stalls), recorded
     * by the loop's thread as each stalled callback returns (stall.pyx),
     * whatever the handler does. */
    tm_histogram stall;
#endif
} tm_loop;

static inline int64_t tm_ns(double seconds) { return (int64_t)(seconds * 1e9); }

static inline void tm_init(tm_loop *t)
{
    memset(t, 0, sizeof *t);
#if MINLOOP_TELEMETRY
    tm_hist_init(&t->lag);
    tm_hist_init(&t->busy);
    tm_hist_init(&t->stall);
#endif
}

/* The loop's own counters (both builds). */

static inline uint64_t tm_poll_skipped(tm_loop *t)
{
    uint64_t n = TM_LOAD(t->polls_skipped) + 1;
    TM_STORE(t->polls_skipped, n);
    return n;
}

static inline void tm_fd_event(tm_loop *t) { TM_BUMP(t->fd_events); }
static inline uint64_t tm_fd_events(const tm_loop *t) { return TM_LOAD(t->fd_events); }

#if MINLOOP_TELEMETRY

static inline void tm_callback(tm_loop *t) { TM_BUMP(t->callbacks); }
/* Once an iteration, as it runs its batch of ready callbacks. */
static inline void tm_batch(tm_loop *t, size_t ready)
{
    TM_RAISE(t->ready_max, (uint64_t)ready);
    TM_STORE(t->ready_now, (uint64_t)ready);
}

/* A poll is made (a syscall follows anyway): the fds watched and the
 * timers pending then. */
static inline void tm_polling(tm_loop *t, uint64_t fds, size_t timers)
{
    TM_STORE(t->fds_now, fds);
    TM_STORE(t->timers_now, (uint64_t)timers);
}
static inline void tm_poll_immediate(tm_loop *t) { TM_BUMP(t->polls_immediate); }

/* The timers pending as an iteration pops the due ones (its high-water
 * mark is sampled there, once an iteration, not at every push). */
static inline void tm_timers_pending(tm_loop *t, size_t live)
{
    TM_RAISE(t->timers_max, (uint64_t)live);
}

/* A drain of due timers by one clock read `now` hands them over earliest
 * first, so the latest of them is the first and the least late the last:
 * each is counted as it goes, min and max are set once, at the end. */
static inline void tm_timer_fired(tm_loop *t, double now, double when)
{
    tm_hist_add(&t->lag, (now - when) * 1e9);
}

static inline void tm_timers_fired(tm_loop *t, double now, double first, double last)
{
    tm_hist_extremes(&t->lag, tm_hist_value((now - last) * 1e9),
                     tm_hist_value((now - first) * 1e9));
}

static inline void tm_timers_dropped(tm_loop *t, size_t n)
{
    TM_STORE(t->timers_dropped, TM_LOAD(t->timers_dropped) + n);
}

/* Any thread. */
static inline void tm_exception(tm_loop *t)
{
    __atomic_fetch_add(&t->exceptions, 1, __ATOMIC_RELAXED);
}

/* The sequence lock's writer side (the loop's thread only). */
static inline void tm_clock_begin(tm_loop *t)
{
    TM_STORE(t->seq, TM_LOAD(t->seq) + 1);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static inline void tm_clock_end(tm_loop *t)
{
    __atomic_store_n(&t->seq, TM_LOAD(t->seq) + 1, __ATOMIC_RELEASE);
}

/* run_forever() begins and ends (now: its clock read there). */
static inline void tm_run_begin(tm_loop *t, double now)
{
    int64_t ns = tm_ns(now);
    tm_clock_begin(t);
    TM_STORE(t->run_since, ns);
    tm_clock_end(t);
    TM_STORE(t->woke, ns);
}

static inline void tm_run_end(tm_loop *t, double now)
{
    int64_t since = TM_LOAD(t->run_since);
    tm_clock_begin(t);
    if (since)
        TM_STORE(t->run_ns, TM_LOAD(t->run_ns) + (tm_ns(now) - since));
    TM_STORE(t->run_since, 0);
    tm_clock_end(t);
}

/* Around a poll with a timeout: `now` read just before it, then just after. */
static inline void tm_sleep_begin(tm_loop *t, double now)
{
    int64_t ns = tm_ns(now);
    TM_BUMP(t->polls_blocked);
    if (t->woke)
        tm_hist_record(&t->busy, (double)(ns - t->woke));
    tm_clock_begin(t);
    TM_STORE(t->sleep_since, ns);
    tm_clock_end(t);
}

static inline void tm_sleep_end(tm_loop *t, double now)
{
    int64_t ns = tm_ns(now), since = TM_LOAD(t->sleep_since);
    tm_clock_begin(t);
    /* Idle only within a run: a loop stepped by hand (_run_once) has no
     * elapsed time to be idle in. */
    if (TM_LOAD(t->run_since) && ns > since)
        TM_STORE(t->idle_ns, TM_LOAD(t->idle_ns) + (ns - since));
    TM_STORE(t->sleep_since, 0);
    tm_clock_end(t);
    TM_STORE(t->woke, ns);
}

/* The stall watchdog's word (src/stall.h).  As each callback returns, an
 * armed loop asks whether the watchdog named it (two loads; a loop with no
 * handler does not ask: loop.pyx's _callback_hooks).  The callback's
 * number is `callbacks`, bumped as it started. */
static inline int tm_stalled(const tm_loop *t)
{
    return TM_LOAD(t->stall_flag) == TM_LOAD(t->callbacks);
}

static inline uint64_t tm_callbacks(const tm_loop *t) { return TM_LOAD(t->callbacks); }

#else  /* MINLOOP_TELEMETRY */

/* Compiled out: nothing is counted, no clock is read for it. */
static inline int tm_stalled(const tm_loop *t) { (void)t; return 0; }
static inline uint64_t tm_callbacks(const tm_loop *t) { (void)t; return 0; }
static inline void tm_callback(tm_loop *t) { (void)t; }
static inline void tm_batch(tm_loop *t, size_t ready) { (void)t; (void)ready; }
static inline void tm_polling(tm_loop *t, uint64_t fds, size_t timers)
{ (void)t; (void)fds; (void)timers; }
static inline void tm_poll_immediate(tm_loop *t) { (void)t; }
static inline void tm_timers_pending(tm_loop *t, size_t live) { (void)t; (void)live; }
static inline void tm_timer_fired(tm_loop *t, double now, double when)
{ (void)t; (void)now; (void)when; }
static inline void tm_timers_fired(tm_loop *t, double now, double first, double last)
{ (void)t; (void)now; (void)first; (void)last; }
static inline void tm_timers_dropped(tm_loop *t, size_t n) { (void)t; (void)n; }
static inline void tm_exception(tm_loop *t) { (void)t; }
static inline void tm_run_begin(tm_loop *t, double now) { (void)t; (void)now; }
static inline void tm_run_end(tm_loop *t, double now) { (void)t; (void)now; }
static inline void tm_sleep_begin(tm_loop *t, double now) { (void)t; (void)now; }
static inline void tm_sleep_end(tm_loop *t, double now) { (void)t; (void)now; }

#endif  /* MINLOOP_TELEMETRY */

/* ------------------------------------------------------------------ */
/* Readers (any thread; both builds: compiled out, they read zeros) */

/* The counters, each read once. */
typedef struct {
    uint64_t callbacks, polls_skipped, polls_immediate, polls_blocked;
    uint64_t fd_events, ready_max, timers_fired;
    uint64_t timers_dropped, timers_max, exceptions;
} tm_counters;

static inline void tm_read_counters(const tm_loop *t, tm_counters *out)
{
    memset(out, 0, sizeof *out);
    out->polls_skipped = TM_LOAD(t->polls_skipped);
    out->fd_events = TM_LOAD(t->fd_events);
#if MINLOOP_TELEMETRY
    out->callbacks = TM_LOAD(t->callbacks);
    out->polls_immediate = TM_LOAD(t->polls_immediate);
    out->polls_blocked = TM_LOAD(t->polls_blocked);
    out->ready_max = TM_LOAD(t->ready_max);
    out->timers_fired = tm_hist_total(&t->lag);
    out->timers_dropped = TM_LOAD(t->timers_dropped);
    out->timers_max = TM_LOAD(t->timers_max);
    out->exceptions = TM_LOAD(t->exceptions);
#endif
}

/* What the loop held as of its last iteration (telemetry_page.h's top). */
static inline void tm_read_held(const tm_loop *t, uint64_t *ready, uint64_t *timers,
                                uint64_t *fds)
{
#if MINLOOP_TELEMETRY
    *ready = TM_LOAD(t->ready_now);
    *timers = TM_LOAD(t->timers_now);
    *fds = TM_LOAD(t->fds_now);
#else
    (void)t;
    *ready = *timers = *fds = 0;
#endif
}

/* The loop's histograms (NULL: compiled out). */
static inline tm_histogram *tm_lag(tm_loop *t)
{
#if MINLOOP_TELEMETRY
    return &t->lag;
#else
    (void)t;
    return NULL;
#endif
}

static inline tm_histogram *tm_busy(tm_loop *t)
{
#if MINLOOP_TELEMETRY
    return &t->busy;
#else
    (void)t;
    return NULL;
#endif
}

static inline tm_histogram *tm_stall(tm_loop *t)
{
#if MINLOOP_TELEMETRY
    return &t->stall;
#else
    (void)t;
    return NULL;
#endif
}

/* A copy for a reader: since the last reset, counts[] read once, count
 * their sum.  A reset in another thread during the read may leave a bucket
 * below its baseline: it reads 0. */
typedef struct {
    uint64_t counts[TM_BUCKETS];
    uint64_t count;
    double sum, min, max;   /* ns; min and max 0 when empty */
} tm_hist_copy;

static inline void tm_hist_read(const tm_histogram *h, tm_hist_copy *out)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < TM_BUCKETS; i++) {
        uint64_t c = TM_LOAD(h->counts[i]), base = TM_LOAD(h->base_counts[i]);
        n += out->counts[i] = c > base ? c - base : 0;
    }
    out->count = n;
    uint64_t sum = TM_LOAD(h->sum), base_sum = TM_LOAD(h->base_sum);
    uint64_t min = TM_LOAD(h->min), max = TM_LOAD(h->max);
    out->sum = sum > base_sum ? (double)(sum - base_sum) : 0.0;
    out->min = (double)min;
    out->max = (double)max;
    if (n == 0 || min > max)
        out->min = out->max = 0;
}

/* The clock words at `now`: the time spent in runs and, of it, idle,
 * counting the run and the sleep going on. */
static inline void tm_read_clock(const tm_loop *t, double now,
                                 int64_t *elapsed, int64_t *idle)
{
#if MINLOOP_TELEMETRY
    int64_t ns = tm_ns(now), run, run_since, idle_ns, sleep_since;
    uint32_t s1, s2;
    do {
        s1 = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
        run = TM_LOAD(t->run_ns);
        run_since = TM_LOAD(t->run_since);
        idle_ns = TM_LOAD(t->idle_ns);
        sleep_since = TM_LOAD(t->sleep_since);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        s2 = TM_LOAD(t->seq);
    } while ((s1 & 1) || s1 != s2);
    if (run_since && ns > run_since) {
        run += ns - run_since;
        if (sleep_since && ns > sleep_since)
            idle_ns += ns - sleep_since;
    }
    if (idle_ns > run)   /* never more idle than elapsed */
        idle_ns = run;
    *elapsed = run;
    *idle = idle_ns;
#else
    (void)t; (void)now;
    *elapsed = *idle = 0;
#endif
}

#endif
