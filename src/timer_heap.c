#include "timer_heap.h"

#include <stdlib.h>
#include <string.h>

/* The block never shrinks below this many timers, and halves when it is
 * less than a quarter full (timer_heap.h, "Memory"). */
#define HEAP_MIN_CAP 64

/* Slots are 32-bit names and HEAP_NO_SLOT is not one: capacities are powers
 * of two from HEAP_MIN_CAP, so the largest is 2^31. */
#define HEAP_MAX_CAP ((size_t)1 << 31)

/* The largest seq an entry may hold before the heap renumbers (see
 * timer_heap.h).  Tests build the heap with a small value to renumber often. */
#ifndef HEAP_SEQ_MAX
#define HEAP_SEQ_MAX UINT32_MAX
#endif

/* Children per node: four 16-byte entries are one cache line. */
#define HEAP_ARITY 4

#define HEAP_LINE 64

/* entries[] starts this many entries past a line boundary, so that the
 * children of node i, entries[4i+1 .. 4i+4], start on one: (4i+1+3)*16 is
 * a multiple of 64.  The root sits alone at the end of the first line. */
#define HEAP_SKEW (HEAP_LINE / sizeof(heap_entry) - 1)

/* ---------------------------------------------------------------------
 * Order */

/* Strictly earlier: by deadline, then by push order.  Written without
 * short-circuits so that the compiler can pick the earliest of four
 * siblings without branches, which the data makes unpredictable. */
static inline int heap_less(const heap_entry *a, const heap_entry *b)
{
    return (a->when < b->when) | ((a->when == b->when) & (a->seq < b->seq));
}

static inline size_t heap_parent(size_t i) { return (i - 1) / HEAP_ARITY; }

/* Puts e at index i and records where its slot now is. */
static inline void heap_place(timer_heap *h, size_t i, heap_entry e)
{
    h->entries[i] = e;
    h->where[e.slot] = (uint32_t)i;
}

/* Puts e into the hole at i, moving later ancestors down past it. */
static void heap_sift_up(timer_heap *h, size_t i, heap_entry e)
{
    while (i > 0) {
        size_t parent = heap_parent(i);
        if (!heap_less(&e, &h->entries[parent]))
            break;
        heap_place(h, i, h->entries[parent]);
        i = parent;
    }
    heap_place(h, i, e);
}

/* Moves the hole at i down to a leaf, each level pulling up the earliest
 * child, and returns the leaf.  Pulling up the earliest child keeps every
 * subtree in order, so the caller may fill the hole with any entry and
 * sift it up (Floyd's "bottom-up" removal): the entry that refills a pop's
 * hole is the last one, which belongs near the leaves, so this costs three
 * comparisons a level where a classic sift-down costs four and then gives
 * up most of its levels anyway. */
static size_t heap_descend(timer_heap *h, size_t i)
{
    const heap_entry *e = h->entries;
    size_t n = h->len;
    for (;;) {
        size_t c = HEAP_ARITY * i + 1, child;
        if (c + HEAP_ARITY <= n) {
            /* All four children: a small tournament, two independent
             * comparisons and then the final. */
            size_t a = c + heap_less(&e[c + 1], &e[c]);
            size_t b = c + 2 + heap_less(&e[c + 3], &e[c + 2]);
            child = heap_less(&e[b], &e[a]) ? b : a;
        } else if (c < n) {
            child = c;
            for (size_t k = c + 1; k < n; k++)
                if (heap_less(&e[k], &e[child]))
                    child = k;
        } else {
            return i;
        }
        heap_place(h, i, e[child]);
        i = child;
    }
}

/* ---------------------------------------------------------------------
 * Memory */

static size_t heap_block_size(size_t cap)
{
    /* Line alignment slack, entries (with the skew), slots, where. */
    return HEAP_LINE + (cap + HEAP_SKEW) * sizeof(heap_entry)
        + cap * sizeof(heap_slot) + cap * sizeof(uint32_t);
}

/* Moves the heap into a new block of `cap` timers (cap >= len).  Growing
 * keeps every slot's name and frees the new ones; shrinking renames the
 * slot of entries[i] to i (and tells its item), so that every live name
 * fits the smaller arrays.  -1 if the block cannot be allocated (the heap
 * is unchanged). */
static int heap_resize(timer_heap *h, size_t cap)
{
    if (cap > HEAP_MAX_CAP || cap > (SIZE_MAX - HEAP_LINE) / 64)
        return -1;
    void *block = malloc(heap_block_size(cap));
    if (block == NULL)
        return -1;
    uintptr_t line = ((uintptr_t)block + HEAP_LINE - 1) & ~(uintptr_t)(HEAP_LINE - 1);
    heap_entry *entries = (heap_entry *)line + HEAP_SKEW;
    heap_slot *slots = (heap_slot *)(entries + cap);
    uint32_t *where = (uint32_t *)(slots + cap);
    size_t len = h->len, s;

    if (len)
        memcpy(entries, h->entries, len * sizeof(heap_entry));
    if (cap > h->cap) {
        if (h->cap) {
            memcpy(slots, h->slots, h->cap * sizeof(heap_slot));
            memcpy(where, h->where, h->cap * sizeof(uint32_t));
        }
        for (s = h->cap; s < cap; s++)
            where[s] = s + 1 < cap ? (uint32_t)(s + 1) : h->free_slot;
        h->free_slot = (uint32_t)h->cap;
    } else {
        for (s = 0; s < len; s++) {
            slots[s] = h->slots[entries[s].slot];
            entries[s].slot = (uint32_t)s;
            where[s] = (uint32_t)s;
            *slots[s].pos = (ssize_t)s;
        }
        for (s = len; s < cap; s++)
            where[s] = s + 1 < cap ? (uint32_t)(s + 1) : HEAP_NO_SLOT;
        h->free_slot = len < cap ? (uint32_t)len : HEAP_NO_SLOT;
    }
    free(h->block);
    h->block = block;
    h->entries = entries;
    h->slots = slots;
    h->where = where;
    h->cap = cap;
    return 0;
}

static void heap_maybe_shrink(timer_heap *h)
{
    if (h->cap > HEAP_MIN_CAP && h->len < h->cap / 4)
        (void)heap_resize(h, h->cap / 2);  /* a failed shrink keeps the memory */
}

static int heap_compare_entries(const void *pa, const void *pb)
{
    const heap_entry *a = pa, *b = pb;
    return heap_less(a, b) ? -1 : heap_less(b, a);
}

/* Gives the entries seqs 0..len-1 in (when, seq) order, which keeps every
 * comparison between them as it was, and restarts the count after them.
 * -1 if the scratch copy cannot be allocated (nothing changes). */
static int heap_renumber(timer_heap *h)
{
    size_t len = h->len, r;
    if (len > HEAP_SEQ_MAX)
        return -1;  /* only a test build's tiny HEAP_SEQ_MAX gets here */
    if (len) {
        heap_entry *sorted = malloc(len * sizeof(heap_entry));
        if (sorted == NULL)
            return -1;
        memcpy(sorted, h->entries, len * sizeof(heap_entry));
        qsort(sorted, len, sizeof(heap_entry), heap_compare_entries);
        for (r = 0; r < len; r++)
            h->entries[h->where[sorted[r].slot]].seq = (uint32_t)r;
        free(sorted);
    }
    h->seq_base = h->next_seq - len;
    return 0;
}

/* ---------------------------------------------------------------------
 * The interface */

void heap_init(timer_heap *h)
{
    h->entries = NULL;
    h->slots = NULL;
    h->where = NULL;
    h->block = NULL;
    h->len = 0;
    h->cap = 0;
    h->free_slot = HEAP_NO_SLOT;
    h->next_seq = 0;
    h->seq_base = 0;
}

void heap_free(timer_heap *h)
{
    free(h->block);
    heap_init(h);
}

int heap_push(timer_heap *h, double when, void *item, ssize_t *pos)
{
    if (h->len == h->cap && heap_resize(h, h->cap ? h->cap * 2 : HEAP_MIN_CAP) < 0)
        return -1;
    if (h->next_seq - h->seq_base > HEAP_SEQ_MAX && heap_renumber(h) < 0)
        return -1;
    uint32_t slot = h->free_slot;
    h->free_slot = h->where[slot];
    h->slots[slot].item = item;
    h->slots[slot].pos = pos;
    *pos = (ssize_t)slot;
    heap_entry e = {when, (uint32_t)(h->next_seq - h->seq_base), slot};
    h->next_seq++;
    heap_sift_up(h, h->len++, e);
    return 0;
}

/* Takes out the entry at index i: its slot is freed and its item told. */
static void *heap_take(timer_heap *h, size_t i)
{
    uint32_t slot = h->entries[i].slot;
    heap_slot gone = h->slots[slot];
    *gone.pos = -1;
    h->where[slot] = h->free_slot;
    h->free_slot = slot;
    h->len--;
    if (i != h->len) {
        /* The last entry refills the hole once it has sunk to a leaf. */
        heap_entry last = h->entries[h->len];
        heap_sift_up(h, heap_descend(h, i), last);
    }
    heap_maybe_shrink(h);
    return gone.item;
}

void *heap_pop(timer_heap *h)
{
    return h->len ? heap_take(h, 0) : NULL;
}

void *heap_remove(timer_heap *h, size_t token)
{
    if (token >= h->cap)
        return NULL;
    size_t i = h->where[token];
    /* A free slot's where[] names another slot, never an entry that has
     * this one. */
    if (i >= h->len || h->entries[i].slot != token)
        return NULL;
    return heap_take(h, i);
}
