#include "timer_heap.h"

#include <stdlib.h>

/* The array never shrinks below this many entries, and shrinks by half when
 * it is less than a quarter full, so a burst of a million timers that are
 * all cancelled gives its memory back. */
#define HEAP_MIN_CAP 64

/* Children per node.  With a few hundred thousand timers the heap outgrows
 * the caches, and every level a timer moves through costs a miss in the
 * array and another where the moved timer's position is written back (its
 * handle).  Four children halve the levels of a binary heap; the four
 * compared siblings sit in two adjacent cache lines. */
#define HEAP_ARITY 4

static inline size_t parent_of(size_t i) { return (i - 1) / HEAP_ARITY; }

static inline int entry_less(const heap_entry *a, const heap_entry *b)
{
    if (a->when != b->when)
        return a->when < b->when;
    return a->seq < b->seq;
}

static inline void place(timer_heap *h, size_t i, heap_entry e)
{
    h->entries[i] = e;
    *e.pos = (ssize_t)i;
}

static void sift_up(timer_heap *h, size_t i)
{
    heap_entry e = h->entries[i];
    while (i > 0) {
        size_t parent = parent_of(i);
        if (!entry_less(&e, &h->entries[parent]))
            break;
        place(h, i, h->entries[parent]);
        i = parent;
    }
    place(h, i, e);
}

static void sift_down(timer_heap *h, size_t i)
{
    heap_entry e = h->entries[i];
    size_t n = h->len;
    for (;;) {
        size_t first = HEAP_ARITY * i + 1;
        if (first >= n)
            break;
        size_t end = first + HEAP_ARITY < n ? first + HEAP_ARITY : n;
        size_t child = first;  /* the earliest of i's children */
        for (size_t c = first + 1; c < end; c++)
            if (entry_less(&h->entries[c], &h->entries[child]))
                child = c;
        if (!entry_less(&h->entries[child], &e))
            break;
        place(h, i, h->entries[child]);
        i = child;
    }
    place(h, i, e);
}

static int resize(timer_heap *h, size_t cap)
{
    heap_entry *p = realloc(h->entries, cap * sizeof(heap_entry));
    if (p == NULL)
        return -1;
    h->entries = p;
    h->cap = cap;
    return 0;
}

static void maybe_shrink(timer_heap *h)
{
    if (h->cap > HEAP_MIN_CAP && h->len < h->cap / 4)
        (void)resize(h, h->cap / 2);  /* a failed shrink just keeps the memory */
}

void heap_init(timer_heap *h)
{
    h->entries = NULL;
    h->len = 0;
    h->cap = 0;
    h->next_seq = 0;
}

void heap_free(timer_heap *h)
{
    free(h->entries);
    heap_init(h);
}

int heap_push(timer_heap *h, double when, void *item, ssize_t *pos)
{
    if (h->len == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : HEAP_MIN_CAP;
        if (resize(h, cap) < 0)
            return -1;
    }
    heap_entry e = {when, h->next_seq++, item, pos};
    h->entries[h->len] = e;
    *pos = (ssize_t)h->len;
    h->len++;
    sift_up(h, h->len - 1);
    return 0;
}

void *heap_peek(const timer_heap *h, double *when)
{
    if (h->len == 0)
        return NULL;
    *when = h->entries[0].when;
    return h->entries[0].item;
}

void *heap_remove(timer_heap *h, size_t i)
{
    if (i >= h->len)
        return NULL;
    heap_entry removed = h->entries[i];
    *removed.pos = -1;
    h->len--;
    if (i != h->len) {
        /* Move the last entry into the hole and restore the order in
         * whichever direction it is broken. */
        place(h, i, h->entries[h->len]);
        if (i > 0 && entry_less(&h->entries[i], &h->entries[parent_of(i)]))
            sift_up(h, i);
        else
            sift_down(h, i);
    }
    maybe_shrink(h);
    return removed.item;
}

void *heap_pop(timer_heap *h)
{
    return heap_remove(h, 0);
}
