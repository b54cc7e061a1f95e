#include "timer_heap.h"
#include "alloc_faults.h"

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

#if defined(__GNUC__) || defined(__clang__)
#define HEAP_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#define HEAP_PREFETCH_W(p) __builtin_prefetch((p), 1, 3)
#else
#define HEAP_PREFETCH(p) ((void)(p))
#define HEAP_PREFETCH_W(p) ((void)(p))
#endif

/* heap_drain_due() sorts the due timers out of a heap of at least
 * HEAP_BULK_MIN_LEN (one that has outgrown the caches: smaller ones pop
 * cheaply) when at least 1/HEAP_BULK_SHARE of them are due (then the
 * linear passes over the whole heap cost less than the pops). */
#ifndef HEAP_BULK_MIN_LEN
#define HEAP_BULK_MIN_LEN 16384
#endif
#define HEAP_BULK_SHARE 4

/* Children per node: four 16-byte entries are one cache line. */
#define HEAP_ARITY 4

#define HEAP_LINE 64

/* entries[] starts this many entries past a line boundary, so that the
 * children of node i, entries[4i+1 .. 4i+4], start on one: (4i+1+3)*16 is
 * a multiple of 64.  The root sits alone at the end of the first line. */
#define HEAP_SKEW (HEAP_LINE / sizeof(heap_entry) - 1)

/* ---------------------------------------------------------------------
 * Order */

/* Strictly earlier: by deadline, then by push order (the slot below the
 * seq never decides: seqs differ).  One comparison of two 128-bit numbers
 * where the compiler has them, which picks the earliest of four siblings
 * without branches, which the data makes unpredictable. */
#ifdef __SIZEOF_INT128__
__extension__ typedef unsigned __int128 heap_u128;  /* a GCC/Clang extension */
#endif

static inline int heap_less(const heap_entry *a, const heap_entry *b)
{
#ifdef __SIZEOF_INT128__
    return ((heap_u128)a->key << 64 | a->order) < ((heap_u128)b->key << 64 | b->order);
#else
    return (a->key < b->key) | ((a->key == b->key) & (a->order < b->order));
#endif
}

static inline heap_entry heap_make_entry(uint64_t key, uint32_t seq, uint32_t slot)
{
    heap_entry e = {key, (uint64_t)seq << 32 | slot};
    return e;
}

static inline size_t heap_parent(size_t i) { return (i - 1) / HEAP_ARITY; }

/* Puts e at index i and records where its slot now is. */
static inline void heap_place(timer_heap *h, size_t i, heap_entry e)
{
    h->entries[i] = e;
    h->where[heap_entry_slot(&e)] = (uint32_t)i;
}

/* Puts e into the hole at i, moving later ancestors down past it. */
static inline void heap_sift_up(timer_heap *h, size_t i, heap_entry e)
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
            /* The four children's own children are four adjacent lines,
             * one of which the next level reads: ask for all of them now,
             * so that the miss overlaps with this level's work instead of
             * following it (in a heap that outgrew the caches, each of the
             * last few levels is a miss). */
            size_t g = HEAP_ARITY * c + 1;
            if (g + 3 * HEAP_ARITY < n) {
                HEAP_PREFETCH(&e[g]);
                HEAP_PREFETCH(&e[g + HEAP_ARITY]);
                HEAP_PREFETCH(&e[g + 2 * HEAP_ARITY]);
                HEAP_PREFETCH(&e[g + 3 * HEAP_ARITY]);
            }
            /* All four children: a small tournament, two independent
             * comparisons and then the final. */
            size_t a = c + (size_t)heap_less(&e[c + 1], &e[c]);
            size_t b = c + 2 + (size_t)heap_less(&e[c + 3], &e[c + 2]);
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
 * live slots that the smaller arrays cannot hold.  -1 if the block cannot
 * be allocated (the heap is unchanged). */
static int heap_resize(timer_heap *h, size_t cap)
{
    if (cap > HEAP_MAX_CAP || cap > (SIZE_MAX - HEAP_LINE) / 64)
        return -1;
    void *block = af_fails(AF_TIMER_HEAP) ? NULL : malloc(heap_block_size(cap));
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
        /* Shrinking.  A live slot below the new cap keeps its name (most
         * do); one above it takes a free name below, and its item is told
         * (a write into a handle that may be cold, so as few as we can).
         * where[] first marks the names in use. */
        size_t i, f = 0;
        for (s = 0; s < cap; s++)
            where[s] = HEAP_NO_SLOT;
        for (i = 0; i < len; i++) {
            s = heap_entry_slot(&entries[i]);
            if (s < cap) {
                slots[s] = h->slots[s];
                where[s] = (uint32_t)i;
            }
        }
        for (i = 0; i < len; i++) {
            s = heap_entry_slot(&entries[i]);
            if (s >= cap) {
                while (where[f] != HEAP_NO_SLOT)
                    f++;
                slots[f] = h->slots[s];
                where[f] = (uint32_t)i;
                entries[i] = heap_make_entry(entries[i].key, heap_entry_seq(&entries[i]),
                                             (uint32_t)f);
                *slots[f].pos = (ssize_t)f;
            }
        }
        /* The names left unmarked are free, chained lowest first. */
        uint32_t head = HEAP_NO_SLOT;
        for (s = cap; s-- > 0;)
            if (where[s] == HEAP_NO_SLOT) {
                where[s] = head;
                head = (uint32_t)s;
            }
        h->free_slot = head;
    }
    free(h->block);
    h->block = block;
    h->entries = entries;
    h->slots = slots;
    h->where = where;
    h->cap = cap;
    return 0;
}

/* Halves the block while it is less than a quarter full, in one move. */
static void heap_maybe_shrink(timer_heap *h)
{
    size_t cap = h->cap;
    while (cap > HEAP_MIN_CAP && h->len < cap / 4)
        cap /= 2;
    if (cap != h->cap)
        (void)heap_resize(h, cap);  /* a failed shrink keeps the memory */
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
        heap_entry *sorted = af_fails(AF_TIMER_HEAP) ? NULL : malloc(len * sizeof(heap_entry));
        if (sorted == NULL)
            return -1;
        memcpy(sorted, h->entries, len * sizeof(heap_entry));
        qsort(sorted, len, sizeof(heap_entry), heap_compare_entries);
        for (r = 0; r < len; r++) {
            uint32_t slot = heap_entry_slot(&sorted[r]);
            heap_entry *e = &h->entries[h->where[slot]];
            *e = heap_make_entry(e->key, (uint32_t)r, slot);
        }
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
    TM_STORE(h->next_seq, 0);
    h->seq_base = 0;
    TM_STORE(h->removed, 0);
}

void heap_free(timer_heap *h)
{
    /* The counts are for ever (telemetry reads them after close()). */
    uint64_t pushes = h->next_seq, removed = h->removed;
    free(h->block);
    heap_init(h);
    TM_STORE(h->next_seq, pushes);
    h->seq_base = pushes;
    TM_STORE(h->removed, removed);
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
    heap_entry e = heap_make_entry(heap_key(when), (uint32_t)(h->next_seq - h->seq_base), slot);
    TM_STORE(h->next_seq, h->next_seq + 1);   /* any thread reads it */
    heap_sift_up(h, h->len++, e);
    return 0;
}

/* Takes out the entry at index i: its slot is freed and its item told. */
static void *heap_take(timer_heap *h, size_t i)
{
    uint32_t slot = heap_entry_slot(&h->entries[i]);
    heap_slot gone = h->slots[slot];
    *gone.pos = -1;
    h->where[slot] = h->free_slot;
    h->free_slot = slot;
    h->len--;
    if (i != h->len) {
        /* The last entry refills the hole once it has sunk to a leaf (most
         * cancelled timers sit in one already). */
        heap_entry last = h->entries[h->len];
        size_t leaf = HEAP_ARITY * i + 1 < h->len ? heap_descend(h, i) : i;
        heap_sift_up(h, leaf, last);
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
    /* The slot's item and pos are needed once where[] and the entry have
     * been read: ask for them now, so that the three misses (a cancelled
     * timer's heap memory is usually cold) overlap where they can. */
    HEAP_PREFETCH(&h->slots[token]);
    size_t i = h->where[token];
    /* A free slot's where[] names another slot, never an entry that has
     * this one. */
    if (i >= h->len || heap_entry_slot(&h->entries[i]) != token)
        return NULL;
#if MINLOOP_TELEMETRY
    TM_BUMP(h->removed);
#endif
    return heap_take(h, i);
}

/* ---------------------------------------------------------------------
 * Draining the due timers
 *
 * Taken-out entries keep their slots until the sink has accepted their
 * item: only then is the item told (pos = -1) and the slot freed.  So an
 * entry the sink refuses goes back into the array exactly as it was
 * (heap_put_back), with its seq -- FIFO kept -- and its item's token still
 * right.  A drain never shrinks the block before it ends, so there is
 * always room to put back. */

/* Hands d[0..k) to the sink in order.  The memory each needs -- its slot,
 * then the word in its item -- is asked for across the whole group first,
 * so that those misses overlap.  Returns the sink's refusal (the refused
 * entry and those after it are put back) or 0. */
static int heap_deliver(timer_heap *h, heap_entry *d, size_t k,
                        heap_sink sink, void *ctx)
{
    heap_slot got[HEAP_DUE_BATCH];
    for (size_t done = 0; done < k; done += HEAP_DUE_BATCH) {
        size_t m = k - done < HEAP_DUE_BATCH ? k - done : HEAP_DUE_BATCH, i;
        for (i = 0; i < m; i++)
            HEAP_PREFETCH(&h->slots[heap_entry_slot(&d[done + i])]);
        for (i = 0; i < m; i++) {
            got[i] = h->slots[heap_entry_slot(&d[done + i])];
            HEAP_PREFETCH_W(got[i].pos);
        }
        for (i = 0; i < m; i++) {
            /* The deadline is for telemetry alone (src/telemetry.h). */
            int rc = sink(ctx, got[i].item,
                          MINLOOP_TELEMETRY ? heap_when(d[done + i].key) : 0.0);
            if (rc) {
                for (size_t j = done + i; j < k; j++)
                    heap_sift_up(h, h->len++, d[j]);
                return rc;
            }
            uint32_t slot = heap_entry_slot(&d[done + i]);
            *got[i].pos = -1;
            h->where[slot] = h->free_slot;
            h->free_slot = slot;
        }
    }
    return 0;
}

/* Whether at least `want` entries are due.  The due entries form a subtree
 * at the root (a later parent has no earlier child), walked depth first:
 * it looks at no more than about 5 * want entries. */
static int heap_due_at_least(const timer_heap *h, uint64_t end_key, size_t want)
{
    size_t stack[4 * 20], sp = 0, count = 0;  /* 3 a level, 16 levels at most */
    stack[sp++] = 0;
    while (sp) {
        size_t i = stack[--sp];
        if (i >= h->len || h->entries[i].key >= end_key)
            continue;
        if (++count >= want)
            return 1;
        for (size_t c = HEAP_ARITY * i + HEAP_ARITY; c > HEAP_ARITY * i; c--)
            stack[sp++] = c;
    }
    return 0;
}

/* Plain sift-down of e from the hole at i (Floyd's heap construction). */
static void heap_sift_down(timer_heap *h, size_t i, heap_entry e)
{
    heap_entry *a = h->entries;
    size_t n = h->len;
    for (;;) {
        size_t c = HEAP_ARITY * i + 1, child = c, end = c + HEAP_ARITY;
        if (c >= n)
            break;
        if (end > n)
            end = n;
        for (size_t k = c + 1; k < end; k++)
            if (heap_less(&a[k], &a[child]))
                child = k;
        if (!heap_less(&a[child], &e))
            break;
        a[i] = a[child];
        i = child;
    }
    a[i] = e;
}

/* Sorts d[0..k) by (key, seq): a stable radix sort on the key, 11 bits a
 * pass (a pass whose digit is the same everywhere is skipped: deadlines
 * close together share their high bits), then each run of equal keys --
 * rare, short -- put in seq order by insertion.  tmp holds k entries. */
static void heap_sort_run(heap_entry *d, heap_entry *tmp, size_t k)
{
    enum { BITS = 11, RADIX = 1 << BITS, PASSES = (64 + BITS - 1) / BITS };
    size_t (*count)[RADIX] = af_fails(AF_TIMER_HEAP) ? NULL : calloc(PASSES, sizeof *count);
    heap_entry *src = d, *dst = tmp;
    size_t i;
    if (count == NULL) {
        qsort(d, k, sizeof(heap_entry), heap_compare_entries);
        return;
    }
    for (i = 0; i < k; i++)
        for (int p = 0; p < PASSES; p++)
            count[p][(d[i].key >> (p * BITS)) & (RADIX - 1)]++;
    for (int p = 0; p < PASSES; p++) {
        size_t *c = count[p], sum = 0;
        int trivial = 0;
        for (size_t b = 0; b < RADIX; b++) {
            size_t t = c[b];
            trivial |= t == k;
            c[b] = sum;
            sum += t;
        }
        if (trivial)
            continue;
        for (i = 0; i < k; i++)
            dst[c[(src[i].key >> (p * BITS)) & (RADIX - 1)]++] = src[i];
        heap_entry *t = src;
        src = dst;
        dst = t;
    }
    free(count);
    if (src != d)
        memcpy(d, src, k * sizeof(heap_entry));
    for (i = 1; i < k; i++) {
        if (d[i].key != d[i - 1].key || d[i - 1].order < d[i].order)
            continue;
        heap_entry e = d[i];
        size_t j = i;
        while (j > 0 && d[j - 1].key == e.key && d[j - 1].order > e.order) {
            d[j] = d[j - 1];
            j--;
        }
        d[j] = e;
    }
}

/* The bulk path: every due entry out in one sequential pass, sorted, and
 * the rest rebuilt into a heap in linear time (Floyd).  0, or -1 if the
 * scratch memory cannot be allocated (nothing changed: pop instead). */
static int heap_drain_bulk(timer_heap *h, uint64_t end_key, heap_sink sink,
                           void *ctx, int *rc)
{
    size_t n = h->len, k = 0, m = 0, i;
    for (i = 0; i < n; i++)
        k += h->entries[i].key < end_key;
    if (k > SIZE_MAX / (2 * sizeof(heap_entry)))
        return -1;
    heap_entry *d = af_fails(AF_TIMER_HEAP) ? NULL : malloc(2 * k * sizeof(heap_entry));
    if (d == NULL)
        return -1;
    for (i = 0; i < n; i++) {
        heap_entry e = h->entries[i];
        if (e.key < end_key)
            d[i - m] = e;
        else
            h->entries[m++] = e;
    }
    h->len = m;
    for (i = m / HEAP_ARITY + 1; i-- > 0;)
        if (i < m)
            heap_sift_down(h, i, h->entries[i]);
    for (i = 0; i < m; i++)
        h->where[heap_entry_slot(&h->entries[i])] = (uint32_t)i;
    heap_sort_run(d, d + k, k);
    *rc = heap_deliver(h, d, k, sink, ctx);
    free(d);
    return 0;
}

int heap_drain_due(timer_heap *h, double end, heap_sink sink, void *ctx)
{
    uint64_t end_key = heap_key(end);
    heap_entry batch[HEAP_DUE_BATCH];
    int rc = 0;
    /* In a big heap of which a good part is due, popping costs a sift of
     * cache misses per timer: sort them out instead.  (Asked once: the
     * count walks every due timer when there are too few.) */
    if (h->len >= HEAP_BULK_MIN_LEN && h->entries[0].key < end_key &&
            heap_due_at_least(h, end_key, h->len / HEAP_BULK_SHARE) &&
            heap_drain_bulk(h, end_key, sink, ctx, &rc) == 0) {
        heap_maybe_shrink(h);
        return rc;
    }
    while (h->len && h->entries[0].key < end_key) {
        size_t k = 0;
        while (k < HEAP_DUE_BATCH && h->len && h->entries[0].key < end_key) {
            batch[k++] = h->entries[0];
            if (--h->len) {
                heap_entry last = h->entries[h->len];
                heap_sift_up(h, heap_descend(h, 0), last);
            }
        }
        rc = heap_deliver(h, batch, k, sink, ctx);
        if (rc || k < HEAP_DUE_BATCH)
            break;
    }
    /* Shrinking renames the survivors whose slots lie beyond the smaller
     * block, each a write into an item: a drain shrinks once, at its end,
     * and a drain of every timer renames none. */
    heap_maybe_shrink(h);
    return rc;
}
