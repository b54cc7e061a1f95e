/* telemetry_check: src/telemetry.h's histograms and clock words on their own.
 *
 * Every bucket against a plain model: a value equal to a bound lies in the
 * bucket that bound closes, the next double up in the next bucket, and the
 * bounds are four per power of two from 2^10 ns to 2^36 ns.  Recording,
 * reading (count = the sum of the buckets), reset (a baseline: the totals
 * the loop counts timers by keep growing), min/max; and the clock words:
 * idle time only within a run, the sleep going on counted by a reader. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "telemetry.h"

/* The model: the first bucket whose bound is >= v. */
static unsigned model_bucket(double v)
{
    for (unsigned i = 0; i < TM_BUCKETS - 1; i++)
        if (v <= (double)tm_bucket_bound(i))
            return i;
    return TM_BUCKETS - 1;
}

static void buckets(void)
{
    CHECK(TM_BUCKETS == 106);
    CHECK(tm_bucket_bound(0) == 1024);
    CHECK(tm_bucket_bound(1) == 1280 && tm_bucket_bound(4) == 2048);
    CHECK(tm_bucket_bound(TM_BUCKETS - 2) == (uint64_t)1 << 36);
    CHECK(tm_bucket_bound(TM_BUCKETS - 1) == UINT64_MAX);
    for (unsigned i = 1; i < TM_BUCKETS - 1; i++) {
        CHECK(tm_bucket_bound(i) > tm_bucket_bound(i - 1));
        if (i % TM_SUB == 0)   /* every fourth bound a power of two */
            CHECK((tm_bucket_bound(i) & (tm_bucket_bound(i) - 1)) == 0);
    }
    for (unsigned i = 0; i < TM_BUCKETS - 1; i++) {
        double b = (double)tm_bucket_bound(i);
        CHECK(tm_bucket(b) == i);
        CHECK(tm_bucket(nextafter(b, INFINITY)) == i + 1);
        CHECK(tm_bucket(nextafter(b, 0)) == model_bucket(nextafter(b, 0)));
    }
    CHECK(tm_bucket(0) == 0 && tm_bucket(-5) == 0 && tm_bucket(NAN) == 0);
    CHECK(tm_bucket(1e-3) == 0 && tm_bucket(1024.5) == 1);
    CHECK(tm_bucket(1e12) == TM_BUCKETS - 1 && tm_bucket(INFINITY) == TM_BUCKETS - 1);
    /* Values spread over the whole range, against the model. */
    for (double v = 1; v < 1e12; v *= 1.0137)
        CHECK(tm_bucket(v) == model_bucket(v));
}

static void histogram(void)
{
    tm_histogram h;
    tm_hist_copy c;
    tm_hist_init(&h);
    tm_hist_read(&h, &c);
    CHECK(c.count == 0 && c.sum == 0 && c.min == 0 && c.max == 0);
    tm_hist_record(&h, 500);
    tm_hist_record(&h, 3000);
    tm_hist_record(&h, -7);   /* early: counts as 0 */
    tm_hist_record(&h, 2e11);
    tm_hist_read(&h, &c);
    CHECK(c.count == 4 && tm_hist_total(&h) == 4);
    CHECK(c.counts[0] == 2 && c.counts[tm_bucket(3000)] == 1 && c.counts[TM_BUCKETS - 1] == 1);
    CHECK(c.sum == 500 + 3000 + 2e11);
    CHECK(c.min == 0 && c.max == 2e11);
    /* A reset is a baseline: readers see nothing, the total stays. */
    tm_hist_reset(&h);
    tm_hist_read(&h, &c);
    CHECK(c.count == 0 && c.sum == 0 && c.min == 0 && c.max == 0);
    CHECK(tm_hist_total(&h) == 4);
    tm_hist_record(&h, 5000);
    tm_hist_read(&h, &c);
    CHECK(c.count == 1 && c.counts[tm_bucket(5000)] == 1);
    CHECK(c.sum == 5000 && c.min == 5000 && c.max == 5000);
    CHECK(tm_hist_total(&h) == 5);
}

static void clock_words(void)
{
    tm_loop t;
    int64_t elapsed, idle;
    tm_init(&t);
    tm_read_clock(&t, 10.0, &elapsed, &idle);
    CHECK(elapsed == 0 && idle == 0);
    /* A poll outside a run is not idle time. */
    tm_sleep_begin(&t, 1.0);
    tm_sleep_end(&t, 2.0);
    tm_read_clock(&t, 10.0, &elapsed, &idle);
    CHECK(elapsed == 0 && idle == 0);
    tm_run_begin(&t, 100.0);
    tm_sleep_begin(&t, 101.0);   /* 1 s busy since the run began */
    /* A reader during the sleep counts it up to its own now. */
    tm_read_clock(&t, 103.0, &elapsed, &idle);
    CHECK(elapsed == 3000000000LL && idle == 2000000000LL);
    tm_sleep_end(&t, 104.0);
    tm_read_clock(&t, 104.5, &elapsed, &idle);
    CHECK(elapsed == 4500000000LL && idle == 3000000000LL);
    tm_run_end(&t, 105.0);
    tm_read_clock(&t, 200.0, &elapsed, &idle);
    CHECK(elapsed == 5000000000LL && idle == 3000000000LL);
    CHECK((t.seq & 1) == 0);
    tm_counters c;
    tm_read_counters(&t, &c);
    CHECK(c.polls_blocked == 2);
    tm_hist_copy busy;
    tm_hist_read(&t.busy, &busy);
    /* Busy stretches: the one before the first sleep of the run (1 s);
     * the first sleep ever, with no wake-up before it, records none. */
    CHECK(busy.count == 1 && busy.max == 1e9);
}

int main(void)
{
    buckets();
    histogram();
    clock_words();
    printf("ok %ld\n", checks);
    return 0;
}
