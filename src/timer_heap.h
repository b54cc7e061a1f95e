/* timer_heap: a 4-ary min-heap of timers ordered by (when, seq).
 *
 * The heap stores opaque item pointers; it never dereferences them.  Each
 * item owns a `ssize_t` (its `pos` slot, given at push) where the heap
 * keeps a token for it while it is in the heap, and -1 once it has left.
 * `heap_remove(token)` takes that timer out in O(log n): a cancelled timer
 * knows where it sits without a search.
 *
 * `seq` orders timers with the same deadline by push order (FIFO), as
 * asyncio users expect from call_at() with equal `when`s.
 *
 * Why the layout is what it is.  With a few hundred thousand timers the
 * heap outgrows the caches, and what a pop costs is memory traffic, not
 * instructions.  A pop moves one entry up per level (about nine levels at
 * 200k timers).  If each entry carried a pointer to its item's position,
 * every move would write that position into a handle that has not been
 * touched since it was scheduled: one cache miss per level, in memory
 * spread over every live handle.  So the heap keeps an indirection of its
 * own instead:
 *
 *   entries[]  the heap proper: {when, seq, slot}, 16 bytes.  The four
 *              children of a node fill exactly one 64-byte cache line (the
 *              array is placed so that every group of siblings starts on a
 *              line), so each level of a sift costs one line.
 *   where[]    slot -> index in entries[], 4 bytes a timer: the only thing
 *              a move writes besides the entry itself.  At 200k timers it
 *              is 800 KB, where the handles are some 35 MB.
 *   slots[]    slot -> {item, pos}: read when a timer enters or leaves.
 *
 * A slot is a timer's stable name while it is in the heap, and the token
 * written into its `pos`: the item's memory is written once when the timer
 * enters and once when it leaves, never while it moves.  Free slots are
 * chained through where[] (last freed, first reused: still in cache).
 *
 * `seq` is 32 bits so that an entry fits 16 bytes.  It counts from
 * `seq_base`; when 2^32 pushes have used it up, the entries in the heap
 * are renumbered 0..len-1 in (when, seq) order (their relative order is
 * all a seq means), once per four billion pushes.  `next_seq` still counts
 * every push ever made (the loop compares two readings of it).
 *
 * Memory: one block holds the three arrays; it doubles when full, and
 * halves when less than a quarter full (the slots are then renumbered to
 * the entries' indexes, so the surviving timers' names fit the smaller
 * block), down to HEAP_MIN_CAP: a burst of a million timers that are all
 * cancelled gives its memory back.
 */
#ifndef MINLOOP_TIMER_HEAP_H
#define MINLOOP_TIMER_HEAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    double when;
    uint32_t seq;   /* push order, counted from the heap's seq_base */
    uint32_t slot;  /* index in slots[] and where[] */
} heap_entry;

typedef struct {
    void *item;
    ssize_t *pos;   /* owned by the item: its slot, -1 when out */
} heap_slot;

typedef struct {
    heap_entry *entries;  /* [0, len) in heap order; see above for placement */
    heap_slot *slots;     /* [0, cap) */
    uint32_t *where;      /* [0, cap): index in entries, or the next free slot */
    void *block;          /* the one allocation holding all three */
    size_t len;
    size_t cap;
    uint32_t free_slot;   /* first free slot, HEAP_NO_SLOT when none */
    uint64_t next_seq;    /* pushes ever made */
    uint64_t seq_base;    /* an entry's seq is its push's next_seq - seq_base */
} timer_heap;

#define HEAP_NO_SLOT UINT32_MAX

void heap_init(timer_heap *h);
/* Frees the memory only; the caller must have drained the items first. */
void heap_free(timer_heap *h);
/* 0 on success, -1 when memory cannot be allocated (the heap is unchanged). */
int heap_push(timer_heap *h, double when, void *item, ssize_t *pos);
/* Removes and returns the earliest item (NULL when empty). */
void *heap_pop(timer_heap *h);
/* Removes the item whose pos slot holds `token` and returns it; NULL (and
 * nothing changes) if no item in the heap has that token. */
void *heap_remove(timer_heap *h, size_t token);

/* The earliest item, or NULL when empty; *when receives its deadline. */
static inline void *heap_peek(const timer_heap *h, double *when)
{
    if (h->len == 0)
        return NULL;
    *when = h->entries[0].when;
    return h->slots[h->entries[0].slot].item;
}

/* The item at index i (i < len), for walking the heap in no order. */
static inline void *heap_item_at(const timer_heap *h, size_t i)
{
    return h->slots[h->entries[i].slot].item;
}

static inline size_t heap_len(const timer_heap *h) { return h->len; }
static inline size_t heap_capacity(const timer_heap *h) { return h->cap; }

#endif
