/* ready_ring: a growable FIFO ring buffer of opaque pointers, and the
 * hand-off through which other threads queue work for the loop's thread.
 *
 * Used for the loop's ready queue.  The loop's thread is the one consumer:
 * it pops, and it sleeps in the poller when the ring is empty.  Any thread
 * may push (call_soon_threadsafe()).  Every operation but ring_len() and
 * ring_at() takes the ring's lock, which on a GIL build is nothing at all (the GIL
 * serialises these calls: none of them runs Python code or releases it) and
 * on a free-threaded build a PyMutex (src/cross_thread.h).
 *
 * The sleep protocol, so that a push never misses a sleeping consumer and
 * the consumer is woken at most once per sleep:
 *   consumer: ring_sleep() -> 1: block in the poller; 0: something came in
 *             since the timeout was chosen, poll without blocking.
 *             ring_awake() once the poller returns.
 *   producer: ring_push_wake() -> 1: the consumer was asleep; the caller
 *             writes to the wake-up fd (wakeup_signal()).
 * Both sides test and set `sleeping` under the lock, so either the push
 * lands before ring_sleep() looks (and the consumer does not block) or the
 * producer sees `sleeping` (and wakes it).
 *
 * Closing, while other threads may still push or write to the wake-up fd:
 * ring_close() refuses later pushes (-2) and waits until every producer
 * that was told to wake the consumer has done so and said ring_woken(), so
 * the loop may close its wake-up fd right after: no producer writes to an
 * fd number the process has since reused.  (Another thread's plain wake-up,
 * asyncio's _write_to_self(), brackets its write with ring_wake_begin() and
 * ring_woken() for the same reason.)  Between ring_push_wake() -> 1 and
 * ring_woken() the producer must run no Python code (it must not wait for
 * anything ring_close()'s caller may hold); ring_close() waits for it
 * detached from the interpreter, so it is called with the interpreter
 * attached, never inside `with nogil`.
 *
 * Header-only so push/pop inline into the Cython hot path.
 */
#ifndef MINLOOP_READY_RING_H
#define MINLOOP_READY_RING_H

#include "alloc_faults.h"
#include "cross_thread.h"

#include <sched.h>
#include <stdlib.h>
#include <stddef.h>

#define RING_MIN_CAP 256  /* a power of two, so indexes wrap with a mask */

typedef struct {
    void **items;
    size_t head;  /* index of the oldest item */
    size_t len;
    size_t cap;   /* always a power of two (or 0 before the first push) */
    int sleeping; /* the consumer is (about to be) blocked waiting for pushes */
    int closed;   /* ring_close() was called: pushes are refused */
    unsigned long wakeups;  /* pushes that found the consumer asleep */
    unsigned long waking;   /* producers between a wake-up verdict and ring_woken() */
    xt_mutex lock;
} ready_ring;

static inline void ring_init(ready_ring *r)
{
    r->items = NULL;
    r->head = 0;
    r->len = 0;
    r->cap = 0;
    r->sleeping = 0;
    r->closed = 0;
    r->wakeups = 0;
    r->waking = 0;
    xt_init(&r->lock);
}

/* Frees the buffer; the ring stays usable (empty), its flags as they were. */
static inline void ring_free(ready_ring *r)
{
    xt_lock(&r->lock);
    void **items = r->items;
    r->items = NULL;
    r->head = 0;
    XT_STORE(r->len, 0);
    r->cap = 0;
    xt_unlock(&r->lock);
    free(items);
}

/* Under the lock. */
static int ring_grow(ready_ring *r)
{
    size_t cap = r->cap ? r->cap * 2 : RING_MIN_CAP;
    void **items = af_fails(AF_READY_RING) ? NULL : malloc(cap * sizeof(void *));
    if (items == NULL)
        return -1;
    for (size_t i = 0; i < r->len; i++)
        items[i] = r->items[(r->head + i) & (r->cap - 1)];
    free(r->items);
    r->items = items;
    r->head = 0;
    r->cap = cap;
    return 0;
}

/* Under the lock: 0, -1 when memory cannot be allocated, -2 when closed. */
static inline int ring_push_locked(ready_ring *r, void *item)
{
    if (r->closed)
        return -2;
    if (r->len == r->cap && ring_grow(r) < 0)
        return -1;
    r->items[(r->head + r->len) & (r->cap - 1)] = item;
    XT_STORE(r->len, r->len + 1);
    return 0;
}

/* Queue an item (any thread).  0 on success, -1 when memory cannot be
 * allocated, -2 when the ring is closed; on failure nothing is queued. */
static inline int ring_push(ready_ring *r, void *item)
{
    xt_lock(&r->lock);
    int rc = ring_push_locked(r, item);
    xt_unlock(&r->lock);
    return rc;
}

/* ring_push() for another thread than the consumer's: 1 when the item is
 * queued and the consumer was asleep (the caller must wake it, then call
 * ring_woken(); later pushes of the same sleep get 0), else as ring_push(). */
static inline int ring_push_wake(ready_ring *r, void *item)
{
    xt_lock(&r->lock);
    int rc = ring_push_locked(r, item);
    if (rc == 0 && r->sleeping) {
        r->sleeping = 0;
        r->wakeups++;
        XT_STORE(r->waking, r->waking + 1);
        rc = 1;
    }
    xt_unlock(&r->lock);
    return rc;
}

/* Before writing to the wake-up fd without a push: 0 when the ring is
 * closed (do not write), else 1 (write, then call ring_woken()). */
static inline int ring_wake_begin(ready_ring *r)
{
    xt_lock(&r->lock);
    int open = !r->closed;
    if (open)
        XT_STORE(r->waking, r->waking + 1);
    xt_unlock(&r->lock);
    return open;
}

/* The wake-up ring_push_wake() or ring_wake_begin() asked for is written. */
static inline void ring_woken(ready_ring *r)
{
    xt_lock(&r->lock);
    XT_STORE(r->waking, r->waking - 1);
    xt_unlock(&r->lock);
}

/* The oldest item, or NULL when empty (the consumer's thread). */
static inline void *ring_pop(ready_ring *r)
{
    void *item = NULL;
    xt_lock(&r->lock);
    if (r->len) {
        item = r->items[r->head];
        r->head = (r->head + 1) & (r->cap - 1);
        XT_STORE(r->len, r->len - 1);
    }
    xt_unlock(&r->lock);
    return item;
}

/* Without the lock: the cycle collector's traverse calls it while the
 * world is stopped, when a thread parked on the lock may hold it (a
 * PyMutex is handed to a waiter, which cannot resume until the world
 * does).  A push racing with it is seen by the next look, or by
 * ring_sleep(), which looks under the lock. */
static inline size_t ring_len(const ready_ring *r)
{
    return XT_LOAD(r->len);
}

/* The consumer is about to block waiting for pushes: 1 (marked asleep) when
 * the ring is empty, 0 when an item arrived and it must not block. */
static inline int ring_sleep(ready_ring *r)
{
    xt_lock(&r->lock);
    int empty = r->len == 0;
    if (empty)
        r->sleeping = 1;
    xt_unlock(&r->lock);
    return empty;
}

/* The consumer's wait returned: pushes need not wake it. */
static inline void ring_awake(ready_ring *r)
{
    xt_lock(&r->lock);
    r->sleeping = 0;
    xt_unlock(&r->lock);
}

/* Refuse every later push (-2): a push racing with the loop's close() either
 * lands before it, and close() drops it with the rest, or fails.  Returns
 * once no producer is about to write to the wake-up fd. */
static inline void ring_close(ready_ring *r)
{
    xt_lock(&r->lock);
    r->closed = 1;
    xt_unlock(&r->lock);
#if XT_LOCKED
    /* A producer's window is one write(2) with no Python code in it.  The
     * lock, not a bare load, orders its write before our caller's close.
     * Its ring_woken() may park on the lock, and a parked thread handed
     * the lock re-attaches to the interpreter before it returns, which
     * waits out a pending stop-the-world pause; that pause waits for every
     * attached thread.  So we wait detached (cross_thread.h), or a
     * collection started by a third thread would deadlock the three. */
    XT_DETACH_BEGIN
    for (;;) {
        xt_lock(&r->lock);
        unsigned long waking = r->waking;
        xt_unlock(&r->lock);
        if (!waking)
            break;
        sched_yield();
    }
    XT_DETACH_END
#endif
}

/* In a forked child (one thread): a lock another thread of the parent held
 * at fork() would stay held forever, and its producers are gone. */
static inline void ring_after_fork(ready_ring *r)
{
    xt_init(&r->lock);
    r->sleeping = 0;
    r->waking = 0;
}

static inline unsigned long ring_wakeups(ready_ring *r)
{
    xt_lock(&r->lock);
    unsigned long n = r->wakeups;
    xt_unlock(&r->lock);
    return n;
}

/* The i-th oldest item (i < len), for walking the queue without popping.
 * Unlocked: only where no other thread can push (the cycle collector's
 * traverse, which on a free-threaded build stops the world). */
static inline void *ring_at(const ready_ring *r, size_t i)
{
    return r->items[(r->head + i) & (r->cap - 1)];
}

#endif
