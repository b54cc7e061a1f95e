/* The ready ring's cross-thread hand-off, hammered by plain C threads.
 *
 * Built by tests/test_cross_thread.py with MINLOOP_XT_PTHREAD (the ring's
 * lock is then a pthread mutex: what a free-threaded build gets from
 * PyMutex) and, where available, ThreadSanitizer.  PRODUCERS threads push
 * PER_THREAD items each with ring_push_wake(); one consumer pops them, and
 * when the ring is empty sleeps in poll() on the wake-up fd after
 * ring_sleep(), as the loop sleeps in its poller.  It checks:
 *   - every item arrives exactly once, each producer's in the order pushed;
 *   - no wake-up is lost: a sleep that sees no wake-up for 5 s while items
 *     are still to come fails;
 *   - the consumer did sleep and was woken;
 *   - wake-ups are counted once per write; after ring_close() pushes fail
 *     with -2 and wake-ups are refused;
 *   - ring_close() while producers still push and wake (a second round):
 *     it returns only once no producer is between its wake-up verdict and
 *     ring_woken(), and every item is either refused or drained.
 * Prints "ok <items> <wakeups>" and exits 0, or says what broke and exits 1.
 */
#include "ready_ring.h"
#include "wakeup.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define PRODUCERS 8
#define PER_THREAD 20000

static ready_ring ring;
static wakeup_fds wake;
static int go;   /* set once every producer exists (macOS has no barriers) */
static unsigned long writes[PRODUCERS];
/* Set by the consumer while it sleeps (between ring_sleep() and its wake). */
static int consumer_sleeping;

static void *producer(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
        sched_yield();
    for (uintptr_t seq = 1; seq <= PER_THREAD; seq++) {
        if (id == 0 && seq == PER_THREAD) {
            /* Hold the last item back until the consumer, having drained
             * everything else, sleeps: on a busy machine it may otherwise
             * never find the ring empty, and the wake-up path would go
             * untested.  The consumer cannot finish without this item. */
            while (!__atomic_load_n(&consumer_sleeping, __ATOMIC_ACQUIRE))
                sched_yield();
        }
        /* An item is its producer and sequence number, never NULL. */
        int rc = ring_push_wake(&ring, (void *)((seq << 8) | id));
        if (rc < 0) {
            fprintf(stderr, "push failed: %d\n", rc);
            exit(1);
        }
        if (rc == 1) {
            writes[id]++;
            wakeup_signal(&wake);
            ring_woken(&ring);
        }
        if (seq % 128 == 0) {
            /* Pause now and then, so the consumer empties the ring and
             * sleeps: the wake-up protocol is exercised, not just pushes. */
            struct timespec pause = {0, 20000};
            nanosleep(&pause, NULL);
        }
    }
    return NULL;
}

/* Round 2: producers push and wake until the ring refuses; the consumer
 * closes it midway, then closes the wake-up fd at once, as the loop's
 * close() does.  A producer that still wrote to it would get EBADF. */
static int refused[PRODUCERS], late_write[PRODUCERS];
static unsigned long accepted[PRODUCERS];

static void *closing_producer(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    for (;;) {
        int rc = ring_push_wake(&ring, (void *)((uintptr_t)1 << 8 | id));
        if (rc == -2) {
            refused[id] = 1;
            return NULL;
        }
        accepted[id]++;
        struct timespec gap = {0, 20000};
        nanosleep(&gap, NULL);
        if (rc == 1) {
            /* Descheduled at the worst moment: close() must wait for us. */
            struct timespec pause = {0, 200000};
            nanosleep(&pause, NULL);
            uint64_t one = 1;
            if (write(wake.write_fd, &one, sizeof(one)) < 0 && errno == EBADF)
                late_write[id] = 1;
            ring_woken(&ring);
        }
    }
}

static int close_while_pushing(void)
{
    pthread_t threads[PRODUCERS];
    unsigned long popped = 0, sum = 0;
    for (uintptr_t i = 0; i < PRODUCERS; i++)
        pthread_create(&threads[i], NULL, closing_producer, (void *)i);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {   /* consume, sleeping when empty, for 50 ms */
        if (ring_pop(&ring) != NULL) {
            popped++;
        } else if (ring_sleep(&ring)) {
            struct pollfd p = {wake.read_fd, POLLIN, 0};
            poll(&p, 1, 10);
            ring_awake(&ring);
            wakeup_drain(&wake);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - t0.tv_sec) * 1000000000L + (now.tv_nsec - t0.tv_nsec) < 50000000L);
    /* The loop's last sleep: a producer gets the verdict to wake it and is
     * descheduled; the loop wakes anyway (a timeout, say) and closes. */
    while (!ring_sleep(&ring))
        while (ring_pop(&ring) != NULL)
            popped++;
    struct timespec nap = {0, 100000};
    nanosleep(&nap, NULL);
    ring_awake(&ring);
    ring_close(&ring);
    wakeup_close(&wake);
    while (ring_pop(&ring) != NULL)
        popped++;
    for (int i = 0; i < PRODUCERS; i++) {
        pthread_join(threads[i], NULL);
        sum += accepted[i];
        if (!refused[i] || late_write[i]) {
            fprintf(stderr, "producer %d: %s\n", i,
                    late_write[i] ? "wrote to the wake-up fd after close" : "never refused");
            return 1;
        }
    }
    if (popped != sum) {
        fprintf(stderr, "close: %lu items accepted, %lu drained\n", sum, popped);
        return 1;
    }
    if (ring_push_wake(&ring, (void *)1) != -2 || ring_push(&ring, (void *)1) != -2
            || ring_wake_begin(&ring) != 0) {
        fprintf(stderr, "a closed ring took a push or a wake-up\n");
        return 1;
    }
    ring_free(&ring);
    return 0;
}

int main(void)
{
    pthread_t threads[PRODUCERS];
    uintptr_t next[PRODUCERS];
    unsigned long got = 0, total = (unsigned long)PRODUCERS * PER_THREAD;

    ring_init(&ring);
    if (wakeup_open(&wake) < 0) {
        perror("wakeup_open");
        return 1;
    }
    for (uintptr_t i = 0; i < PRODUCERS; i++) {
        next[i] = 1;
        pthread_create(&threads[i], NULL, producer, (void *)i);
    }
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    while (got < total) {
        void *item = ring_pop(&ring);
        if (item != NULL) {
            uintptr_t v = (uintptr_t)item, id = v & 0xff, seq = v >> 8;
            if (id >= PRODUCERS || seq != next[id]) {
                fprintf(stderr, "producer %lu: got item %lu, expected %lu\n",
                        (unsigned long)id, (unsigned long)seq,
                        (unsigned long)(id < PRODUCERS ? next[id] : 0));
                return 1;
            }
            next[id]++;
            got++;
            continue;
        }
        if (!ring_sleep(&ring))
            continue;   /* something came in after the pop looked */
        __atomic_store_n(&consumer_sleeping, 1, __ATOMIC_RELEASE);
        struct pollfd p = {wake.read_fd, POLLIN, 0};
        int n = poll(&p, 1, 5000);
        __atomic_store_n(&consumer_sleeping, 0, __ATOMIC_RELEASE);
        ring_awake(&ring);
        if (n == 0) {
            fprintf(stderr, "lost wake-up: slept 5 s with %lu of %lu items seen, %zu queued\n",
                    got, total, ring_len(&ring));
            return 1;
        }
        wakeup_drain(&wake);
    }
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(threads[i], NULL);
    unsigned long sum = 0;
    for (int i = 0; i < PRODUCERS; i++)
        sum += writes[i];
    if (sum == 0) {
        fprintf(stderr, "the consumer never slept: the wake-up path went untested\n");
        return 1;
    }
    if (sum != ring_wakeups(&ring)) {
        fprintf(stderr, "%lu wake-up writes, ring counted %lu\n", sum, ring_wakeups(&ring));
        return 1;
    }
    if (ring_pop(&ring) != NULL || ring_len(&ring) != 0) {
        fprintf(stderr, "items left over\n");
        return 1;
    }
    if (close_while_pushing())
        return 1;
    printf("ok %lu %lu\n", got, sum);
    return 0;
}
