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
 *   - wake-ups are counted once per write, and pushes after ring_close()
 *     fail with -2.
 * Prints "ok <items> <wakeups>" and exits 0, or says what broke and exits 1.
 */
#include "ready_ring.h"
#include "wakeup.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define PRODUCERS 8
#define PER_THREAD 20000

static ready_ring ring;
static wakeup_fds wake;
static int go;   /* set once every producer exists (macOS has no barriers) */
static unsigned long writes[PRODUCERS];

static void *producer(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
        sched_yield();
    for (uintptr_t seq = 1; seq <= PER_THREAD; seq++) {
        /* An item is its producer and sequence number, never NULL. */
        int rc = ring_push_wake(&ring, (void *)((seq << 8) | id));
        if (rc < 0) {
            fprintf(stderr, "push failed: %d\n", rc);
            exit(1);
        }
        if (rc == 1) {
            writes[id]++;
            wakeup_signal(&wake);
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
        struct pollfd p = {wake.read_fd, POLLIN, 0};
        int n = poll(&p, 1, 5000);
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
    ring_close(&ring);
    if (ring_push_wake(&ring, (void *)1) != -2 || ring_push(&ring, (void *)1) != -2) {
        fprintf(stderr, "a closed ring took a push\n");
        return 1;
    }
    ring_free(&ring);
    wakeup_close(&wake);
    printf("ok %lu %lu\n", got, sum);
    return 0;
}
