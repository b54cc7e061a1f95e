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
 *   entries[]  the heap proper: {when, seq, slot} in 16 bytes.  The four
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
 * Draining.  The loop moves every due timer to its ready queue at once
 * (heap_drain_due), and a burst -- 100k timeouts armed together -- makes
 * that many at once.  Popping them one by one costs a sift each, whose
 * last levels miss the caches; when a quarter or more of a heap too big
 * for the caches is due, the due entries are instead picked out in one
 * sequential pass, radix-sorted, and the rest rebuilt into a heap in
 * linear time.  Either way an entry's slot is freed, and its item told,
 * only once the queue took the item, so a refused one is put back as it
 * was.
 *
 * Memory: one block holds the three arrays; it doubles when full, and
 * halves when less than a quarter full (a surviving timer whose slot lies
 * beyond the smaller block takes a free one within it, and its item is
 * told), down to HEAP_MIN_CAP: a burst of a million timers that are all
 * cancelled gives its memory back.
 */
#ifndef MINLOOP_TIMER_HEAP_H
#define MINLOOP_TIMER_HEAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "telemetry.h"

/* The deadline is kept as an integer that orders as the double does
 * (heap_key()), and seq and slot share one word with seq on top, so that
 * "earlier" is one 128-bit comparison: (key, order). */
typedef struct {
    uint64_t key;    /* heap_key(when) */
    uint64_t order;  /* seq << 32 | slot; seq counts pushes from seq_base */
} heap_entry;

static inline uint32_t heap_entry_slot(const heap_entry *e) { return (uint32_t)e->order; }
static inline uint32_t heap_entry_seq(const heap_entry *e) { return (uint32_t)(e->order >> 32); }

/* A deadline as an unsigned integer in the same order: a double's bits
 * order as integers for positive values and in reverse for negative ones,
 * so those are flipped whole and the others get the sign bit set.  -0.0 is
 * made 0.0 first: the two are equal deadlines (FIFO), not two.  Never NaN
 * (the loop refuses it). */
static inline uint64_t heap_key(double when)
{
    union { double d; uint64_t u; } v;
    v.d = when + 0.0;   /* -0.0 + 0.0 is 0.0 */
    return (v.u >> 63) ? ~v.u : v.u | ((uint64_t)1 << 63);
}

static inline double heap_when(uint64_t key)
{
    union { double d; uint64_t u; } v;
    v.u = (key >> 63) ? key & ~((uint64_t)1 << 63) : ~key;
    return v.d;
}

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
    uint64_t removed;     /* heap_remove()s (cancellations), for telemetry:
                           * any thread may read it (heap_removed()) */
} timer_heap;

#define HEAP_NO_SLOT UINT32_MAX

/* Where heap_drain_due() hands the due items, in order, each with its
 * deadline (0.0 where telemetry, its one user, is compiled out): 0 when
 * it took the item, anything else to refuse it. */
typedef int (*heap_sink)(void *ctx, void *item, double when);

/* How many timers leave together: enough for their memory accesses to
 * overlap, few enough for a stack array. */
#define HEAP_DUE_BATCH 64

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
/* Hands every timer due before `end` (when < end) to sink(ctx, item, when),
 * earliest first, each leaving the heap (pos -1) once the sink took it --
 * as popping while the earliest is due would, but cheaper:
 *   - timers leave in batches, the memory each leaves behind (its slot, the
 *     word in its item) reached for the whole batch at once, so that those
 *     cache misses overlap;
 *   - when a good part of a big heap is due, they are sorted out in a few
 *     linear passes instead of a sift of misses each (heap_drain_bulk);
 *   - the block shrinks once, at the end, so a drain of every timer renames
 *     no slot.
 * If the sink refuses an item, that timer and every later one stay in the
 * heap as they were, and the refusal is returned; else 0.  The sink must
 * not use the heap. */
int heap_drain_due(timer_heap *h, double end, heap_sink sink, void *ctx);

/* The earliest item, or NULL when empty; *when receives its deadline. */
static inline void *heap_peek(const timer_heap *h, double *when)
{
    if (h->len == 0)
        return NULL;
    *when = heap_when(h->entries[0].key);
    return h->slots[heap_entry_slot(&h->entries[0])].item;
}

/* The item at index i (i < len), for walking the heap in no order. */
static inline void *heap_item_at(const timer_heap *h, size_t i)
{
    return h->slots[heap_entry_slot(&h->entries[i])].item;
}

static inline size_t heap_len(const timer_heap *h) { return h->len; }
/* Pushes ever made (any thread). */
static inline uint64_t heap_pushes(const timer_heap *h) { return TM_LOAD(h->next_seq); }
/* Timers heap_remove() took out, ever (0 where telemetry is compiled out). */
static inline uint64_t heap_removed(const timer_heap *h) { return TM_LOAD(h->removed); }
static inline size_t heap_capacity(const timer_heap *h) { return h->cap; }

#endif
