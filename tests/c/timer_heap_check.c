/* The timer heap (src/timer_heap.h) on its own, against a plain model.
 *
 * Built and run by tests/test_timer_heap_c.py: once as the loop uses it,
 * once with small limits (seq renumbering every thousand pushes, the bulk
 * drain from 64 timers), each also under valgrind's memcheck where it is
 * installed.  Items are fake timers owning their pos slot, as handles do.
 * What is checked: pops come in (when, push order) order -- FIFO among
 * equal deadlines, also across renumbering; draining the due timers by
 * either path, a refused one staying in; removal by token; that every item's
 * token finds it and a departed item holds -1; invalid tokens change
 * nothing; the block grows, halves when a quarter full, and gives its
 * memory back down to the minimum; the internal arrays agree with each
 * other after every step (heap order, where[] and slots[], the free chain,
 * sibling groups on cache lines).
 * Prints "ok <checks>" and exits 0, or names the first broken check and
 * exits 1.
 */
#include "timer_heap.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* As in timer_heap.c: the largest seq before the heap renumbers.  The test
 * build that makes it tiny cannot hold more than that many timers at once,
 * so the tests size themselves by fits(). */
#ifndef HEAP_SEQ_MAX
#define HEAP_SEQ_MAX UINT32_MAX
#endif

static int fits(size_t live) { return live <= HEAP_SEQ_MAX / 2; }


typedef struct {
    ssize_t pos;        /* the heap's token for us, -1 when out */
    double when;
    uint64_t order;     /* the model's push order */
    int in;             /* the model: in the heap */
} timer;

#define MAX_TIMERS 200000
static timer timers[MAX_TIMERS];
static uint64_t pushes;

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    /* xorshift64*: deterministic, so a failure reproduces. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static size_t rnd_below(size_t n) { return (size_t)(rnd() % n); }

static int earlier(const timer *a, const timer *b)
{
    return a->when < b->when || (a->when == b->when && a->order < b->order);
}

static void push(timer_heap *h, timer *t, double when)
{
    t->when = when;
    t->order = pushes++;
    t->in = 1;
    CHECK(heap_push(h, when, t, &t->pos) == 0);
    CHECK(t->pos >= 0);
}

/* Every internal agreement the heap relies on. */
static void check_invariants(const timer_heap *h)
{
    size_t i, free_count = 0;
    CHECK(h->len <= h->cap);
    if (h->cap == 0) {
        CHECK(h->len == 0 && h->block == NULL);
        return;
    }
    /* Sibling groups start on cache lines (entries[1], entries[5], ...). */
    CHECK(((uintptr_t)&h->entries[1] % 64) == 0);
    for (i = 0; i < h->len; i++) {
        const heap_entry *e = &h->entries[i];
        uint32_t slot = heap_entry_slot(e);
        CHECK(slot < h->cap);
        CHECK(h->where[slot] == i);
        timer *t = h->slots[slot].item;
        CHECK(t >= timers && t < timers + MAX_TIMERS);
        CHECK(h->slots[slot].pos == &t->pos);
        CHECK(t->pos == (ssize_t)slot && t->in);
        CHECK(heap_when(e->key) == t->when);
        CHECK(heap_entry_seq(e) <= h->next_seq - h->seq_base);
        if (i > 0) {
            const heap_entry *p = &h->entries[(i - 1) / 4];
            double pw = heap_when(p->key), ew = heap_when(e->key);
            CHECK(pw < ew || (pw == ew && heap_entry_seq(p) < heap_entry_seq(e)));
        }
    }
    /* The free chain holds exactly the other slots, each once. */
    for (uint32_t s = h->free_slot; s != HEAP_NO_SLOT; s = h->where[s]) {
        CHECK(s < h->cap);
        CHECK(!(h->where[s] < h->len && heap_entry_slot(&h->entries[h->where[s]]) == s));
        free_count++;
        CHECK(free_count <= h->cap);
    }
    CHECK(free_count == h->cap - h->len);
}

/* The model's earliest timer in the heap. */
static timer *model_min(size_t n)
{
    timer *best = NULL;
    for (size_t i = 0; i < n; i++)
        if (timers[i].in && (best == NULL || earlier(&timers[i], best)))
            best = &timers[i];
    return best;
}

static void pop_expect(timer_heap *h, timer *expected)
{
    double when = -1.0;
    void *peeked = heap_peek(h, &when);
    CHECK(peeked == expected);
    if (expected)
        CHECK(when == expected->when);
    timer *t = heap_pop(h);
    CHECK(t == expected);
    if (t) {
        CHECK(t->pos == -1);
        t->in = 0;
    }
}

/* Pops everything, checking (when, push order) order. */
static void drain_in_order(timer_heap *h)
{
    timer *prev = NULL, *t;
    while ((t = heap_pop(h)) != NULL) {
        CHECK(t->in && t->pos == -1);
        if (prev)
            CHECK(earlier(prev, t));
        t->in = 0;
        prev = t;
    }
    CHECK(heap_len(h) == 0);
}

static void test_empty(void)
{
    timer_heap h;
    double when = 123.0;
    heap_init(&h);
    CHECK(heap_len(&h) == 0 && heap_capacity(&h) == 0);
    CHECK(heap_peek(&h, &when) == NULL && when == 123.0);
    CHECK(heap_pop(&h) == NULL);
    CHECK(heap_remove(&h, 0) == NULL);
    CHECK(heap_remove(&h, (size_t)-1) == NULL);
    heap_free(&h);
    heap_free(&h);   /* twice is harmless: free() resets */
}

static void test_order_and_fifo_ties(void)
{
    timer_heap h;
    heap_init(&h);
    /* Few distinct deadlines, so most comparisons are ties. */
    size_t n = fits(5000) ? 5000 : 400;
    for (size_t i = 0; i < n; i++)
        push(&h, &timers[i], (double)rnd_below(7));
    check_invariants(&h);
    CHECK(h.next_seq == pushes);
    drain_in_order(&h);
    check_invariants(&h);

    /* All equal: exactly push order. */
    for (size_t i = 0; i < 1000; i++)
        push(&h, &timers[i], 1.5);
    for (size_t i = 0; i < 1000; i++)
        pop_expect(&h, &timers[i]);
    CHECK(heap_pop(&h) == NULL);

    /* Equal deadlines pushed in reverse of their index, mixed with others. */
    for (size_t i = 0; i < 300; i++)
        push(&h, &timers[299 - i], (i % 3) ? 2.0 : 1.0);
    drain_in_order(&h);

    /* Infinities, zeros of both signs (equal, so FIFO), huge and tiny. */
    double specials[] = {INFINITY, -INFINITY, 0.0, -0.0, 0.0, 1e300, -1e300,
                         5e-324, -0.0, 1e9 + 0.5, 1e9 + 0.5};
    size_t ns = sizeof(specials) / sizeof(specials[0]);
    for (size_t i = 0; i < ns; i++)
        push(&h, &timers[i], specials[i]);
    drain_in_order(&h);
    heap_free(&h);
}

/* Random pushes, pops and removals by token against the model. */
static void test_random_against_model(void)
{
    timer_heap h;
    enum { N = 400 };
    size_t live = 0, free_ids[N], nfree = 0;
    heap_init(&h);
    for (size_t i = 0; i < N; i++) {
        free_ids[nfree++] = i;
        timers[i].in = 0;
        timers[i].pos = -1;
    }
    for (int step = 0; step < 60000; step++) {
        unsigned op = (unsigned)rnd_below(10);
        if (op < 5 && nfree) {
            /* Deadlines from a small grid: ties happen often. */
            size_t id = free_ids[--nfree];
            push(&h, &timers[id], (double)rnd_below(50) * 0.25);
            live++;
        } else if (op < 7) {
            timer *t = model_min(N);
            pop_expect(&h, t);
            if (t) {
                free_ids[nfree++] = (size_t)(t - timers);
                live--;
            }
        } else if (live) {
            /* Remove a random live timer by its token. */
            size_t id;
            do
                id = rnd_below(N);
            while (!timers[id].in);
            ssize_t token = timers[id].pos;
            size_t cap = heap_capacity(&h);
            uint64_t removed = heap_removed(&h);
            CHECK(heap_remove(&h, (size_t)token) == &timers[id]);
            CHECK(timers[id].pos == -1);
            /* Counted once, for telemetry (a token naming nothing is not). */
            CHECK(heap_removed(&h) == removed + MINLOOP_TELEMETRY);
            timers[id].in = 0;
            free_ids[nfree++] = id;
            live--;
            /* Its token names nothing now -- unless the block shrank,
             * which renames the survivors' slots. */
            if (heap_capacity(&h) == cap) {
                CHECK(heap_remove(&h, (size_t)token) == NULL);
                CHECK(heap_removed(&h) == removed + MINLOOP_TELEMETRY);
            }
        }
        CHECK(heap_len(&h) == live);
        if (step % 97 == 0)
            check_invariants(&h);
    }
    check_invariants(&h);
    drain_in_order(&h);
    heap_free(&h);
}

/* A token that names no timer in the heap changes nothing. */
static void test_bad_tokens(void)
{
    timer_heap h;
    heap_init(&h);
    for (size_t i = 0; i < 40; i++)
        push(&h, &timers[i], (double)i);
    timer *t = heap_pop(&h);   /* its slot is now free */
    CHECK(t == &timers[0]);
    t->in = 0;
    size_t len = heap_len(&h);
    for (size_t token = 0; token < heap_capacity(&h) + 5; token++) {
        int live = 0;
        for (size_t i = 1; i < 40; i++)
            if (timers[i].pos == (ssize_t)token)
                live = 1;
        if (!live)
            CHECK(heap_remove(&h, token) == NULL);
    }
    CHECK(heap_remove(&h, (size_t)-1) == NULL);
    CHECK(heap_len(&h) == len);
    check_invariants(&h);
    drain_in_order(&h);
    heap_free(&h);
}

/* Removing from the middle: every other timer, then the rest in order. */
static void test_remove_middle(void)
{
    timer_heap h;
    heap_init(&h);
    const size_t n = fits(20000) ? 20000 : 400;
    for (size_t i = 0; i < n; i++)
        push(&h, &timers[i], (double)rnd_below(1000));
    for (size_t i = 0; i < n; i += 2) {
        CHECK(heap_remove(&h, (size_t)timers[i].pos) == &timers[i]);
        CHECK(timers[i].pos == -1);
        timers[i].in = 0;
    }
    check_invariants(&h);
    CHECK(heap_len(&h) == n / 2);
    drain_in_order(&h);
    heap_free(&h);
}

/* The block grows as needed and halves when a quarter full, renaming the
 * survivors' slots (their tokens must still find them). */
static void test_growth_and_shrink(void)
{
    timer_heap h;
    heap_init(&h);
    const size_t n = MAX_TIMERS;
    if (!fits(n))
        return;
    for (size_t i = 0; i < n; i++)
        push(&h, &timers[i], (double)rnd_below(100000) / 7.0);
    CHECK(heap_len(&h) == n);
    CHECK(heap_capacity(&h) >= n && heap_capacity(&h) < 2 * n);
    check_invariants(&h);
    /* Remove by token in random order until 100 are left. */
    size_t *order = malloc(n * sizeof(size_t));
    CHECK(order != NULL);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rnd_below(i + 1), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    size_t max_cap = heap_capacity(&h);
    for (size_t k = 0; k < n - 100; k++) {
        timer *t = &timers[order[k]];
        CHECK(heap_remove(&h, (size_t)t->pos) == t);
        t->in = 0;
        /* Never more than four times the live timers (past the minimum). */
        if ((k & 16383) == 0) {
            CHECK(heap_capacity(&h) <= max_cap);
            CHECK(heap_capacity(&h) <= 64 || heap_capacity(&h) <= 4 * heap_len(&h) + 4);
            check_invariants(&h);
        }
    }
    CHECK(heap_capacity(&h) <= 512);
    check_invariants(&h);
    /* The survivors' renamed tokens find them. */
    for (size_t k = n - 100; k < n; k += 2) {
        timer *t = &timers[order[k]];
        CHECK(heap_remove(&h, (size_t)t->pos) == t);
        t->in = 0;
    }
    check_invariants(&h);
    drain_in_order(&h);
    CHECK(heap_capacity(&h) == 64);
    free(order);

    /* Pop-driven shrinking too, and growth again after it. */
    for (size_t i = 0; i < 10000; i++)
        push(&h, &timers[i], (double)(10000 - i));
    drain_in_order(&h);
    CHECK(heap_capacity(&h) == 64);
    for (size_t i = 0; i < 300; i++)
        push(&h, &timers[i], 1.0);
    check_invariants(&h);
    heap_free(&h);
    CHECK(heap_capacity(&h) == 0 && heap_len(&h) == 0);
    for (size_t i = 0; i < 300; i++)
        timers[i].in = 0;
}

/* The 32-bit seq is renumbered when used up; FIFO must survive that.  In
 * the loop's build this runs without reaching the limit; in the test build
 * with a tiny HEAP_SEQ_MAX it renumbers hundreds of times. */
static void test_seq_renumbering(void)
{
    timer_heap h;
    heap_init(&h);
    const size_t n = 100;
    uint64_t start = h.next_seq;
    /* A rolling window: 100 live timers on four deadlines, one popped and
     * one pushed per step, for many times HEAP_SEQ_MAX pushes in the small
     * build. */
    for (size_t i = 0; i < n; i++)
        push(&h, &timers[i], (double)(i % 4));
    for (int step = 0; step < 100000; step++) {
        timer *expected = model_min(n);
        pop_expect(&h, expected);
        /* The new timer ties with others already in (FIFO: after them). */
        push(&h, expected, (double)rnd_below(4));
        if (step % 1009 == 0)
            check_invariants(&h);
    }
    CHECK(h.next_seq - start == n + 100000);
    /* The small build did renumber (its count restarted past `start`). */
    CHECK(HEAP_SEQ_MAX > 100000 + n || h.seq_base > start);
    check_invariants(&h);
    drain_in_order(&h);
    heap_free(&h);
}

static int by_deadline(const void *pa, const void *pb)
{
    const timer *a = *(timer *const *)pa, *b = *(timer *const *)pb;
    return earlier(a, b) ? -1 : earlier(b, a);
}

/* The model's timers in the heap, earliest first, into out; how many. */
static size_t model_sorted(size_t n, timer **out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (timers[i].in)
            out[m++] = &timers[i];
    qsort(out, m, sizeof(timer *), by_deadline);
    return m;
}

/* A sink that records what it is given, and refuses the call numbered
 * `refuse_at` (counting from 0; never when it is SIZE_MAX). */
typedef struct {
    timer **got;
    size_t n, refuse_at;
} sink_log;

static int record(void *ctx, void *item, double when)
{
    sink_log *log = ctx;
    if (log->n == log->refuse_at) {
        log->refuse_at = SIZE_MAX;
        return -7;
    }
    timer *t = item;
    CHECK(t->in && t->pos >= 0);   /* still in the heap's books when handed */
    CHECK(when == t->when);        /* with its own deadline */
    log->got[log->n++] = t;
    return 0;
}

/* The deadline drawn for a timer: from a small grid (ties) or anywhere. */
static double draw(int wide)
{
    if (!wide)
        return (double)rnd_below(40);
    return ((double)rnd_below(2000000) - 1000000.0) / 3.0;
}

/* heap_drain_due() hands over exactly the due timers, in order, by either
 * path (popping, or sorting out a big share of a big heap); a refusal
 * leaves the refused timer and the later ones in the heap, where they come
 * out first and in their order, before equal deadlines pushed later. */
static void test_drain(void)
{
    timer_heap h;
    static timer *got[MAX_TIMERS], *expected[MAX_TIMERS];
    size_t sizes[] = {1, 50, 700, 3000, 20000, 70000};
    heap_init(&h);
    for (int round = 0; round < 60; round++) {
        size_t n = sizes[rnd_below(sizeof(sizes) / sizeof(sizes[0]))];
        int wide = round & 1;
        if (!fits(n))
            n = 400;
        for (size_t i = 0; i < n; i++)
            push(&h, &timers[i], draw(wide));
        /* Quantiles of the deadlines: none, a few, a share, all due. */
        double end;
        switch (rnd_below(4)) {
        case 0: end = wide ? -1e7 : -1.0; break;
        case 1: end = wide ? -300000.0 : 2.0; break;
        case 2: end = wide ? 100000.0 : 25.0; break;
        default: end = INFINITY; break;
        }
        size_t due = 0;
        for (size_t i = 0; i < n; i++)
            due += timers[i].when < end;
        sink_log log = {got, 0, SIZE_MAX};
        if (due && rnd_below(3) == 0)
            log.refuse_at = rnd_below(due);
        size_t refused = log.refuse_at;
        CHECK(model_sorted(n, expected) == n);
        int rc = heap_drain_due(&h, end, record, &log);
        if (refused != SIZE_MAX) {
            CHECK(rc == -7 && log.n == refused);
        } else {
            CHECK(rc == 0 && log.n == due);
        }
        /* What it handed over is the model's order, now out. */
        for (size_t j = 0; j < log.n; j++) {
            timer *t = log.got[j];
            CHECK(t == expected[j]);
            CHECK(t->when < end && t->pos == -1);
            t->in = 0;
        }
        CHECK(heap_len(&h) == n - log.n);
        /* The memory the drain freed is given back when it ends. */
        CHECK(heap_capacity(&h) == 64 || heap_len(&h) >= heap_capacity(&h) / 4);
        check_invariants(&h);
        /* Later equal deadlines go after those left in, then everything
         * comes out in order. */
        for (size_t j = 0; j < log.n && j < 3; j++)
            push(&h, log.got[j], draw(wide));
        size_t left = model_sorted(n, expected);
        CHECK(left == heap_len(&h));
        for (size_t j = 0; j < left; j++)
            pop_expect(&h, expected[j]);
        CHECK(heap_len(&h) == 0 && heap_capacity(&h) == 64);
    }
    sink_log log = {got, 0, SIZE_MAX};
    CHECK(heap_drain_due(&h, INFINITY, record, &log) == 0 && log.n == 0);
    heap_free(&h);
}

/* heap_key() orders as the doubles do, and heap_when() undoes it. */
static void test_keys(void)
{
    double v[] = {-INFINITY, -1e308, -2.5, -1.0, -5e-324, -0.0, 0.0, 5e-324,
                  2.2250738585072014e-308, 1e-300, 0.5, 1.0, 1.0 + 2.220446049250313e-16,
                  3.0, 86400.0, 1e15, 1e308, INFINITY};
    size_t n = sizeof(v) / sizeof(v[0]);
    for (size_t i = 0; i < n; i++) {
        CHECK(heap_when(heap_key(v[i])) == v[i]);
        CHECK(!signbit(heap_when(heap_key(v[i]))) || v[i] < 0);  /* -0.0 is 0.0 */
        for (size_t j = 0; j < n; j++) {
            CHECK((heap_key(v[i]) < heap_key(v[j])) == (v[i] < v[j]));
            CHECK((heap_key(v[i]) == heap_key(v[j])) == (v[i] == v[j]));
        }
    }
    for (int i = 0; i < 100000; i++) {
        union { uint64_t u; double d; } a, b;
        a.u = rnd();
        b.u = rnd();
        if (isnan(a.d) || isnan(b.d))
            continue;
        CHECK((heap_key(a.d) < heap_key(b.d)) == (a.d < b.d));
        CHECK(heap_when(heap_key(a.d)) == a.d);
    }
}

int main(void)
{
    test_empty();
    test_keys();
    test_order_and_fifo_ties();
    test_random_against_model();
    test_bad_tokens();
    test_remove_middle();
    test_growth_and_shrink();
    test_seq_renumbering();
    test_drain();
    printf("ok %ld\n", checks);
    return 0;
}
