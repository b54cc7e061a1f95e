/* timer_heap: a 4-ary min-heap of timers ordered by (when, seq).
 *
 * The heap stores opaque item pointers; it never dereferences them.  Each
 * entry also carries a pointer to a `ssize_t` that the item owns, where the
 * heap keeps the item's current position (or -1 once it has left the heap).
 * That back-pointer is what makes removal of an arbitrary timer O(log n):
 * a cancelled timer knows where it sits without a search.
 *
 * `seq` is a per-heap counter assigned at push time, so two timers with the
 * same deadline come out in the order they were pushed (FIFO), as asyncio
 * users expect from call_at() with equal `when`s.
 */
#ifndef MINLOOP_TIMER_HEAP_H
#define MINLOOP_TIMER_HEAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    double when;
    uint64_t seq;
    void *item;
    ssize_t *pos;  /* owned by the item: its index in `entries`, -1 when out */
} heap_entry;

typedef struct {
    heap_entry *entries;
    size_t len;
    size_t cap;
    uint64_t next_seq;
} timer_heap;

void heap_init(timer_heap *h);
/* Frees the array only; the caller must have drained the items first. */
void heap_free(timer_heap *h);
/* 0 on success, -1 when memory cannot be allocated (the heap is unchanged). */
int heap_push(timer_heap *h, double when, void *item, ssize_t *pos);
/* The earliest item, or NULL when empty; *when receives its deadline. */
void *heap_peek(const timer_heap *h, double *when);
/* Removes and returns the earliest item (NULL when empty). */
void *heap_pop(timer_heap *h);
/* Removes the item at index `i` (taken from its pos slot) and returns it. */
void *heap_remove(timer_heap *h, size_t i);

/* The item at index i (i < len), for walking the heap in no order. */
static inline void *heap_item_at(const timer_heap *h, size_t i) { return h->entries[i].item; }

static inline size_t heap_len(const timer_heap *h) { return h->len; }
static inline size_t heap_capacity(const timer_heap *h) { return h->cap; }

#endif
