/* ready_ring: a growable FIFO ring buffer of opaque pointers.
 *
 * Used for the loop's ready queue.  It is not thread-safe by itself: every
 * caller holds the GIL, which serialises call_soon_threadsafe() from other
 * threads with the loop thread.  Header-only so push/pop inline into the
 * Cython hot path.
 */
#ifndef MINLOOP_READY_RING_H
#define MINLOOP_READY_RING_H

#include <stdlib.h>
#include <stddef.h>

#define RING_MIN_CAP 256  /* a power of two, so indexes wrap with a mask */

typedef struct {
    void **items;
    size_t head;  /* index of the oldest item */
    size_t len;
    size_t cap;   /* always a power of two (or 0 before the first push) */
} ready_ring;

static inline void ring_init(ready_ring *r)
{
    r->items = NULL;
    r->head = 0;
    r->len = 0;
    r->cap = 0;
}

static inline void ring_free(ready_ring *r)
{
    free(r->items);
    ring_init(r);
}

static int ring_grow(ready_ring *r)
{
    size_t cap = r->cap ? r->cap * 2 : RING_MIN_CAP;
    void **items = malloc(cap * sizeof(void *));
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

/* 0 on success, -1 when memory cannot be allocated. */
static inline int ring_push(ready_ring *r, void *item)
{
    if (r->len == r->cap && ring_grow(r) < 0)
        return -1;
    r->items[(r->head + r->len) & (r->cap - 1)] = item;
    r->len++;
    return 0;
}

/* The oldest item, or NULL when empty. */
static inline void *ring_pop(ready_ring *r)
{
    if (r->len == 0)
        return NULL;
    void *item = r->items[r->head];
    r->head = (r->head + 1) & (r->cap - 1);
    r->len--;
    return item;
}

static inline size_t ring_len(const ready_ring *r) { return r->len; }

/* The i-th oldest item (i < len), for walking the queue without popping. */
static inline void *ring_at(const ready_ring *r, size_t i)
{
    return r->items[(r->head + i) & (r->cap - 1)];
}

#endif
