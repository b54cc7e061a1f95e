/* stall: the watchdog behind loop.set_stall_handler() (minloop/stall.pyx
 * runs it in a thread and makes the reports; docs/telemetry.md).
 *
 * What it rests on
 *
 *  - The loop pays no clock read per callback.  It already bumps
 *    `callbacks` (telemetry.h) as each callback starts: that count names
 *    the callback running now.  The watchdog wakes every `period` (a
 *    quarter of the threshold, at most 20 ms) and reads, without the GIL,
 *    that count and the clock sequence lock's count, which moves whenever
 *    the loop starts or ends a run or a poll that may block, with the
 *    words saying whether the loop runs and whether it sleeps in the
 *    poller.  Seeing the same callback count and the same clock count,
 *    with the loop running and not asleep, on two wake-ups `threshold`
 *    apart means that one callback has run all that time: a stall.
 *  - The reads are relaxed atomic loads of aligned 64- and 32-bit words
 *    (TM_LOAD): on x86-64 and arm64 the plain `mov`/`ldr` a GIL build
 *    makes, never torn, and no data race in C's sense on a free-threaded
 *    build (docs/threading.md, item 19).  A stale value is a wake-up late.
 *  - The watchdog never needs the GIL to notice a stall: a callback that
 *    holds the GIL in C for seconds is seen as it is.  It flags the
 *    callback (stall_flag, a release store) at once; the loop sees the flag
 *    as that callback returns (tm_stalled) and makes the report then, on
 *    its own thread, with the handle in hand -- so no borrowed pointer to
 *    the running callback is ever read by another thread.
 *  - The watchdog then takes the GIL to sample the loop thread's stack.
 *    Before it samples, it checks under `mu` that the loop has not yet
 *    passed the end of that callback (`ended`, set by the loop under `mu`
 *    before it runs any Python code after the callback): with the GIL, the
 *    loop's thread is then parked inside the callback, at the line that
 *    blocks or at a bytecode boundary of a busy loop.
 *
 * Duration: the callback began after the last wake-up that saw something
 * else (`before`) and ended when the loop read the clock on seeing the
 * flag, so the reported duration is never short and at most one period
 * long.  A callback that runs between threshold and threshold + period may
 * go unreported (it must be seen on two wake-ups threshold apart).
 *
 * `mu` is held for a few loads and stores, never while waiting for the GIL
 * (the timed wait releases it), so the loop's thread may take it with the
 * GIL held.
 */
#ifndef MINLOOP_STALL_H
#define MINLOOP_STALL_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "telemetry.h"

#define STALL_MAX_PERIOD_NS 20000000LL   /* 20 ms */
#define STALL_MIN_PERIOD_NS 100000LL     /* 0.1 ms */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tm_loop *tm;
    int64_t threshold_ns, period_ns;
    int stop;
    /* What the last wake-up saw, and since when. */
    int busy;                 /* running, not asleep in the poller */
    uint64_t callbacks;
    uint32_t clock;
    int64_t first_seen;       /* the first wake-up that saw it */
    int64_t before;           /* the wake-up before: something else */
    int64_t last_wake;
    /* The last callback flagged, when it began at the earliest, and the
     * last one whose end the loop has seen. */
    uint64_t flagged;
    int64_t since;
    uint64_t ended;
} stall_watch;

static inline int64_t stall_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int stall_init(stall_watch *w, tm_loop *tm, int64_t threshold_ns)
{
    int rc;
    memset(w, 0, sizeof *w);
    w->tm = tm;
    w->threshold_ns = threshold_ns;
    w->period_ns = threshold_ns / 4;
    if (w->period_ns > STALL_MAX_PERIOD_NS)
        w->period_ns = STALL_MAX_PERIOD_NS;
    if (w->period_ns < STALL_MIN_PERIOD_NS)
        w->period_ns = STALL_MIN_PERIOD_NS;
    w->last_wake = w->first_seen = w->before = stall_now_ns();
    if ((rc = pthread_mutex_init(&w->mu, NULL)) != 0)
        return -rc;
    /* The default clock: see stall_sleep_until. */
    if ((rc = pthread_cond_init(&w->cv, NULL)) != 0)
        goto fail_mutex;
    return 0;
fail_mutex:
    pthread_mutex_destroy(&w->mu);
    return -rc;
}

static inline void stall_destroy(stall_watch *w)
{
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

/* In a forked child: the watchdog thread is gone, and may have held `mu`
 * as the parent forked. */
static inline void stall_after_fork(stall_watch *w)
{
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->stop = 1;
}

/* One look at the loop: 1 busy (running, not asleep in the poller), 0 not,
 * -1 the loop is writing its clock words (it is moving). */
static inline int stall_sight(const tm_loop *t, uint64_t *callbacks, uint32_t *clock)
{
#if MINLOOP_TELEMETRY
    uint32_t s1 = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
    int64_t run_since = TM_LOAD(t->run_since);
    int64_t sleep_since = TM_LOAD(t->sleep_since);
    *callbacks = TM_LOAD(t->callbacks);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint32_t s2 = TM_LOAD(t->seq);
    if ((s1 & 1) || s1 != s2)
        return -1;
    *clock = s1;
    return run_since != 0 && sleep_since == 0;
#else
    (void)t; *callbacks = 0; *clock = 0;
    return 0;
#endif
}

/* Sleep until `deadline` (stall_now_ns's clock), or until signalled.  The
 * wait is taken as the time left, afresh for each sleep: macOS waits
 * relative; elsewhere the condition variable keeps its default clock,
 * CLOCK_REALTIME, and the deadline is that clock's now plus what is left.
 * (A monotonic condition variable takes pthread_condattr_setclock, whose
 * symbol in glibc 2.34+ is versioned GLIBC_2.34: a wheel built there would
 * not load on older glibc.  A step of the realtime clock moves one sleep,
 * no more; the stall's own times are monotonic.) */
static inline void stall_sleep_until(stall_watch *w, int64_t deadline)
{
    int64_t left = deadline - stall_now_ns();
    struct timespec ts;
    if (left <= 0)
        return;
#ifdef __APPLE__
    ts.tv_sec = (time_t)(left / 1000000000LL);
    ts.tv_nsec = (long)(left % 1000000000LL);
    pthread_cond_timedwait_relative_np(&w->cv, &w->mu, &ts);
#else
    {
        int64_t until;
        clock_gettime(CLOCK_REALTIME, &ts);
        until = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + left;
        ts.tv_sec = (time_t)(until / 1000000000LL);
        ts.tv_nsec = (long)(until % 1000000000LL);
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
#endif
}

/* The watchdog's thread, without the GIL: watch until a callback has run
 * for the threshold (1, its number in *callback, flagged for the loop) or
 * until stopped (0). */
static inline int stall_wait(stall_watch *w, uint64_t *callback)
{
    int found = 0;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        int64_t now = stall_now_ns();
        uint64_t cb = 0;
        uint32_t clock = 0;
        int busy = stall_sight(w->tm, &cb, &clock);
        if (busy != 1 || !w->busy || cb != w->callbacks || clock != w->clock) {
            /* It moved since the last wake-up: a new stretch. */
            w->before = w->last_wake;
            w->first_seen = now;
            w->busy = busy == 1;
            w->callbacks = cb;
            w->clock = clock;
        } else if (now - w->first_seen >= w->threshold_ns && w->flagged != cb) {
            w->flagged = cb;
            w->since = w->before;
#if MINLOOP_TELEMETRY
            __atomic_store_n(&w->tm->stall_flag, cb, __ATOMIC_RELEASE);
#endif
            *callback = cb;
            found = 1;
        }
        w->last_wake = now;
        if (found)
            break;
        stall_sleep_until(w, now + w->period_ns);
    }
    pthread_mutex_unlock(&w->mu);
    return found;
}

static inline void stall_stop(stall_watch *w)
{
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* The loop's thread, as flagged callback `cb` returns, before any Python
 * code runs: 1 (and when it began at the earliest, in *since) if it is
 * the one flagged and not yet reported; from here on it is not sampled. */
static inline int stall_end(stall_watch *w, uint64_t cb, int64_t *since)
{
    int ours;
    pthread_mutex_lock(&w->mu);
    ours = w->flagged == cb && w->ended != cb;
    if (ours) {
        w->ended = cb;
        *since = w->since;
    }
    pthread_mutex_unlock(&w->mu);
    return ours;
}

/* The watchdog, holding the GIL: the loop's thread is still inside
 * flagged callback `cb` (so its stack is that callback's). */
static inline int stall_still_in(stall_watch *w, uint64_t cb)
{
    int in;
    pthread_mutex_lock(&w->mu);
    in = w->ended != cb && tm_callbacks(w->tm) == cb;
    pthread_mutex_unlock(&w->mu);
    return in;
}

#endif
