/* The fd table (src/fd_table.h) against the real poller, without Python.
 *
 * Built and run by tests/test_fd_table_c.py, under valgrind's memcheck where
 * it is installed.  Items are fake non-NULL pointers: the table never
 * dereferences them.  Each check is one rule of "The fd table and the
 * kernel": the registration the table asks for, what the kernel then
 * reports (a one-shot registration fires once), the armed count, that a
 * failing change leaves the table as it was, growth, fork, the drain and
 * the owners.
 * Prints "ok <checks>" and exits 0, or names the first broken check and
 * exits 1.
 */
#include "fd_table.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_EVENTS 16



static void *const ITEM_A = (void *)(uintptr_t)0x1000;
static void *const ITEM_B = (void *)(uintptr_t)0x2000;
static void *const ITEM_C = (void *)(uintptr_t)0x3000;

static poller_event events[MAX_EVENTS];

/* The events the poller reports for fd now (0 when none), without blocking. */
static int poll_fd(poller *p, int fd)
{
    int n = poller_wait(p, events, 0), i, found = 0;
    CHECK(n >= 0);
    for (i = 0; i < n; i++)
        if (events[i].fd == fd)
            found |= events[i].events;
    return found;
}

static void make_pair(int sv[2])
{
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    CHECK(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0);
    CHECK(fcntl(sv[1], F_SETFL, O_NONBLOCK) == 0);
}

static void drain_socket(int fd)
{
    char buf[64];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}

/* Install and check what was replaced. */
static int install(fd_table *t, poller *p, int fd, int which, void *item,
                   int oneshot, void *expect_old)
{
    void *old = ITEM_C;
    int rc;
    CHECK(fdt_grow(t, fd) == 0);
    rc = fdt_install(t, p, fd, which, item, oneshot, &old);
    if (rc >= 0)
        CHECK(old == expect_old);
    else
        CHECK(old == ITEM_C);   /* untouched on failure */
    return rc;
}

/* Run a scenario on a fresh table and socket pair; it must leave the table
 * as it found it. */
static void with_pair(void (*scenario)(fd_table *, poller *, const int *), poller *p)
{
    fd_table t;
    int sv[2];
    fdt_init(&t);
    make_pair(sv);
    scenario(&t, p, sv);
    CHECK(fdt_idle(&t, sv[0]) && fdt_armed(&t) == 0 && fdt_watched(&t) == 0);
    close(sv[0]);
    close(sv[1]);
    fdt_free(&t);
}

static void persistent_reader(fd_table *t, poller *p, const int sv[2])
{
    CHECK(install(t, p, sv[0], POLLER_READ, ITEM_A, 0, NULL) == 1);
    CHECK(fdt_mask(t, sv[0]) == POLLER_READ);
    CHECK(fdt_armed(t) == 1);
    /* Telemetry's count of fds with an item (0 where compiled out). */
    CHECK(fdt_watched(t) == MINLOOP_TELEMETRY && fdt_watched_max(t) == MINLOOP_TELEMETRY);
    CHECK(fdt_get(t, sv[0], POLLER_READ) == ITEM_A);
    CHECK(fdt_get(t, sv[0], POLLER_WRITE) == NULL);
    CHECK(!fdt_idle(t, sv[0]));
    /* Replacing the reader changes nothing in the kernel. */
    CHECK(install(t, p, sv[0], POLLER_READ, ITEM_B, 0, ITEM_A) == 0);

    CHECK(write(sv[1], "x", 1) == 1);
    CHECK(poll_fd(p, sv[0]) & POLLER_READ);
    CHECK(fdt_fired(t, sv[0], POLLER_READ) == 0);
    /* Level-triggered: it reports again, and stays armed. */
    CHECK(poll_fd(p, sv[0]) & POLLER_READ);
    CHECK(fdt_mask(t, sv[0]) == POLLER_READ);
    CHECK(fdt_armed(t) == 1);

    /* A writer beside it: one registration for both, one fd watched. */
    CHECK(install(t, p, sv[0], POLLER_WRITE, ITEM_C, 0, NULL) == 1);
    CHECK(fdt_mask(t, sv[0]) == (POLLER_READ | POLLER_WRITE));
    CHECK(fdt_armed(t) == 1);
    CHECK(fdt_watched(t) == MINLOOP_TELEMETRY);
    CHECK(install(t, p, sv[0], POLLER_WRITE, NULL, 0, ITEM_C) == 1);
    CHECK(fdt_watched(t) == MINLOOP_TELEMETRY);
    CHECK(install(t, p, sv[0], POLLER_READ, NULL, 0, ITEM_B) == 1);
    CHECK(fdt_watched(t) == 0 && fdt_watched_max(t) == MINLOOP_TELEMETRY);
    CHECK(fdt_mask(t, sv[0]) == 0);
    CHECK(fdt_armed(t) == 0);
    CHECK(fdt_idle(t, sv[0]));
    CHECK(poll_fd(p, sv[0]) == 0);
}

static void oneshot_waiter(fd_table *t, poller *p, const int sv[2])
{
    CHECK(install(t, p, sv[0], POLLER_READ, ITEM_A, 1, NULL) == 1);
    CHECK(fdt_mask(t, sv[0]) == (POLLER_READ | POLLER_ONESHOT));
    CHECK(fdt_oneshot(t, sv[0]) == POLLER_READ);
    CHECK(fdt_armed(t) == 1);

    CHECK(write(sv[1], "x", 1) == 1);
    CHECK(poll_fd(p, sv[0]) & POLLER_READ);
    CHECK(fdt_fired(t, sv[0], POLLER_READ) == 0);
    CHECK(fdt_mask(t, sv[0]) == POLLER_DISARMED);
    CHECK(fdt_armed(t) == 0);
    CHECK(fdt_get(t, sv[0], POLLER_READ) == ITEM_A);   /* still installed */
    /* The kernel disarmed it: the unread byte reports nothing. */
    CHECK(poll_fd(p, sv[0]) == 0);

    /* Waiting again is one change; it reports the unread byte. */
    CHECK(fdt_rearm(t, p, sv[0], POLLER_READ, ITEM_A) == 1);
    CHECK(fdt_mask(t, sv[0]) == (POLLER_READ | POLLER_ONESHOT));
    CHECK(fdt_armed(t) == 1);
    CHECK(poll_fd(p, sv[0]) & POLLER_READ);
    CHECK(fdt_fired(t, sv[0], POLLER_READ) == 0);
    /* Not ours any more, or not installed: nothing is armed. */
    CHECK(fdt_rearm(t, p, sv[0], POLLER_READ, ITEM_B) == 0);
    CHECK(fdt_rearm(t, p, sv[0], POLLER_WRITE, ITEM_A) == 0);
    CHECK(fdt_rearm(t, p, 100000, POLLER_READ, ITEM_A) == 0);
    CHECK(fdt_mask(t, sv[0]) == POLLER_DISARMED);

    /* The waiter removes itself after it fired: no syscall, and the
     * registration stays, disarmed. */
    CHECK(install(t, p, sv[0], POLLER_READ, NULL, 0, ITEM_A) == 0);
    CHECK(fdt_mask(t, sv[0]) == POLLER_DISARMED);
    CHECK(fdt_idle(t, sv[0]));
    CHECK(fdt_armed(t) == 0);
    CHECK(poll_fd(p, sv[0]) == 0);

    /* A new waiter re-arms the lingering registration. */
    CHECK(install(t, p, sv[0], POLLER_READ, ITEM_B, 1, NULL) == 1);
    CHECK(poll_fd(p, sv[0]) & POLLER_READ);
    /* Removed before it fired (its event is still unclaimed): DELeted. */
    drain_socket(sv[0]);
    CHECK(fdt_fired(t, sv[0], POLLER_READ) == 0);
    CHECK(fdt_rearm(t, p, sv[0], POLLER_READ, ITEM_B) == 1);
    CHECK(install(t, p, sv[0], POLLER_READ, NULL, 0, ITEM_B) == 1);
    CHECK(fdt_mask(t, sv[0]) == 0);
    CHECK(fdt_armed(t) == 0);
    CHECK(write(sv[1], "y", 1) == 1);
    CHECK(poll_fd(p, sv[0]) == 0);
}

static void oneshot_beside_persistent(fd_table *t, poller *p, const int sv[2])
{
    /* A persistent writer and a one-shot reader: level-triggered for both,
     * or the writer could miss an event. */
    CHECK(install(t, p, sv[0], POLLER_WRITE, ITEM_A, 0, NULL) == 1);
    CHECK(install(t, p, sv[0], POLLER_READ, ITEM_B, 1, NULL) == 1);
    CHECK(fdt_mask(t, sv[0]) == (POLLER_READ | POLLER_WRITE));
    CHECK(fdt_oneshot(t, sv[0]) == POLLER_READ);
    CHECK(fdt_fired(t, sv[0], POLLER_WRITE) == 0);
    CHECK(fdt_mask(t, sv[0]) == (POLLER_READ | POLLER_WRITE));
    CHECK(poll_fd(p, sv[0]) & POLLER_WRITE);
    CHECK(poll_fd(p, sv[0]) & POLLER_WRITE);

    /* The writer goes: the reader, alone now, becomes one-shot. */
    CHECK(install(t, p, sv[0], POLLER_WRITE, NULL, 0, ITEM_A) == 1);
    CHECK(fdt_mask(t, sv[0]) == (POLLER_READ | POLLER_ONESHOT));
    CHECK(fdt_armed(t) == 1);

    /* An event not for the waiter (which no backend reports for a
     * one-direction registration) asks to be armed again with its mask. */
    CHECK(fdt_fired(t, sv[0], POLLER_WRITE) == (POLLER_READ | POLLER_ONESHOT));
    CHECK(fdt_mask(t, sv[0]) == POLLER_DISARMED);
    CHECK(fdt_armed(t) == 0);
    CHECK(fdt_set_interest(t, p, sv[0], POLLER_READ | POLLER_ONESHOT) == 1);
    CHECK(fdt_armed(t) == 1);

    /* A persistent writer added to a disarmed waiter re-arms both. */
    CHECK(write(sv[1], "x", 1) == 1);
    CHECK(poll_fd(p, sv[0]) & POLLER_READ);
    CHECK(fdt_fired(t, sv[0], POLLER_READ) == 0);
    CHECK(fdt_mask(t, sv[0]) == POLLER_DISARMED);
    CHECK(install(t, p, sv[0], POLLER_WRITE, ITEM_C, 0, NULL) == 1);
    CHECK(fdt_mask(t, sv[0]) == (POLLER_READ | POLLER_WRITE));
    CHECK(fdt_armed(t) == 1);
    CHECK((poll_fd(p, sv[0]) & (POLLER_READ | POLLER_WRITE)) == (POLLER_READ | POLLER_WRITE));

    CHECK(install(t, p, sv[0], POLLER_WRITE, NULL, 0, ITEM_C) == 1);
    CHECK(install(t, p, sv[0], POLLER_READ, NULL, 0, ITEM_B) == 1);
    CHECK(fdt_armed(t) == 0);
}

static void failure_leaves_the_table(poller *p)
{
    fd_table t;
    int sv[2], fd;
    fdt_init(&t);
    make_pair(sv);
    fd = sv[0];
    close(sv[0]);
    close(sv[1]);

    /* A closed fd cannot be registered: nothing changes. */
    CHECK(install(&t, p, fd, POLLER_READ, ITEM_A, 0, NULL) == -EBADF);
    CHECK(fdt_get(&t, fd, POLLER_READ) == NULL);
    CHECK(fdt_mask(&t, fd) == 0);
    CHECK(fdt_oneshot(&t, fd) == 0);
    CHECK(fdt_armed(&t) == 0);
    CHECK(install(&t, p, fd, POLLER_READ, ITEM_A, 1, NULL) == -EBADF);
    CHECK(fdt_oneshot(&t, fd) == 0);
    fdt_free(&t);
}

static void queries_and_growth(poller *p)
{
    fd_table t;
    int sv[2], big;
    fdt_init(&t);
    CHECK(fdt_size(&t) == 0);
    CHECK(fdt_get(&t, -1, POLLER_READ) == NULL);
    CHECK(fdt_get(&t, 0, POLLER_WRITE) == NULL);
    CHECK(fdt_mask(&t, 5) == 0);
    CHECK(fdt_idle(&t, 5));
    CHECK(!fdt_has(&t, 0) && !fdt_has(&t, -1));

    make_pair(sv);
    CHECK(install(&t, p, sv[0], POLLER_READ, ITEM_A, 0, NULL) == 1);
    CHECK(fdt_size(&t) == 64);
    /* A number far beyond: the table doubles until it fits, keeping what
     * it holds and zeroing the rest. */
    big = dup2(sv[1], 900);
    CHECK(big == 900);
    CHECK(install(&t, p, big, POLLER_WRITE, ITEM_B, 0, NULL) == 1);
    CHECK(fdt_size(&t) == 1024);
    CHECK(fdt_get(&t, sv[0], POLLER_READ) == ITEM_A);
    CHECK(fdt_get(&t, big, POLLER_WRITE) == ITEM_B);
    CHECK(fdt_get(&t, 899, POLLER_READ) == NULL && fdt_mask(&t, 1023) == 0);
    CHECK(fdt_get(&t, 1024, POLLER_READ) == NULL);
    CHECK(fdt_armed(&t) == 2);
    CHECK(fdt_watched(&t) == 2 * MINLOOP_TELEMETRY);
    CHECK(fdt_grow(&t, -5) == -EBADF && fdt_grow(&t, -1) == -EBADF);
    CHECK(fdt_grow(&t, 0x7fffffff) == -ENOMEM);
    CHECK(fdt_size(&t) == 1024);

    /* Teardown: the drain hands out each item once, tells the kernel
     * nothing (the poller still reports), and leaves every mask 0. */
    {
        int cursor = 0, seen_a = 0, seen_b = 0, n = 0;
        void *item;
        while ((item = fdt_drain(&t, &cursor)) != NULL) {
            n++;
            seen_a += item == ITEM_A;
            seen_b += item == ITEM_B;
        }
        CHECK(n == 2 && seen_a == 1 && seen_b == 1);
        CHECK(fdt_drain(&t, &cursor) == NULL);
        CHECK(fdt_armed(&t) == 0);
        CHECK(fdt_watched(&t) == 0 && fdt_watched_max(&t) == 2 * MINLOOP_TELEMETRY);
        CHECK(fdt_mask(&t, sv[0]) == 0 && fdt_mask(&t, big) == 0);
        CHECK(fdt_idle(&t, sv[0]) && fdt_idle(&t, big));
        CHECK(poll_fd(p, big) & POLLER_WRITE);
    }
    close(big);
    close(sv[0]);
    close(sv[1]);
    fdt_free(&t);
    CHECK(fdt_size(&t) == 0);
}

/* Owners: borrowed, set and cleared only as the owner says; growth keeps
 * them, items and the drain leave them alone, and fdt_disown clears a slot
 * only for the owner it names (a newer one may have the fd by now). */
static void owners(poller *p)
{
    fd_table t;
    int sv[2];
    fdt_init(&t);
    CHECK(fdt_owner(&t, -1) == NULL && fdt_owner(&t, 5) == NULL);
    fdt_disown(&t, 5, ITEM_A);          /* beyond the table: nothing */
    fdt_disown(&t, -1, ITEM_A);
    CHECK(fdt_size(&t) == 0);

    make_pair(sv);
    CHECK(fdt_grow(&t, sv[0]) == 0);
    fdt_set_owner(&t, sv[0], ITEM_A);
    CHECK(fdt_owner(&t, sv[0]) == ITEM_A);
    CHECK(fdt_idle(&t, sv[0]) && fdt_mask(&t, sv[0]) == 0);   /* no interest */
    CHECK(install(&t, p, sv[0], POLLER_READ, ITEM_B, 0, NULL) == 1);
    CHECK(install(&t, p, sv[0], POLLER_READ, NULL, 0, ITEM_B) == 1);
    CHECK(fdt_owner(&t, sv[0]) == ITEM_A);
    CHECK(fdt_grow(&t, 700) == 0 && fdt_size(&t) == 1024);
    CHECK(fdt_owner(&t, sv[0]) == ITEM_A && fdt_owner(&t, 700) == NULL);

    /* A newer owner of the number: the old one's let-go leaves it. */
    fdt_set_owner(&t, sv[0], ITEM_C);
    fdt_disown(&t, sv[0], ITEM_A);
    CHECK(fdt_owner(&t, sv[0]) == ITEM_C);

    /* The drain hands out items only, and leaves the owner. */
    CHECK(install(&t, p, sv[0], POLLER_WRITE, ITEM_B, 0, NULL) == 1);
    {
        int cursor = 0;
        CHECK(fdt_drain(&t, &cursor) == ITEM_B);
        CHECK(fdt_drain(&t, &cursor) == NULL);
    }
    CHECK(fdt_owner(&t, sv[0]) == ITEM_C);
    fdt_disown(&t, sv[0], ITEM_C);
    CHECK(fdt_owner(&t, sv[0]) == NULL);
    close(sv[0]);
    close(sv[1]);
    fdt_free(&t);
}

static void after_fork(void)
{
    poller old_p, new_p;
    fd_table t;
    int a[2], b[2], c[2], gone;
    fdt_init(&t);
    CHECK(poller_open(&old_p, MAX_EVENTS) == 0);
    make_pair(a);
    make_pair(b);
    make_pair(c);
    /* a: a persistent reader; b: a one-shot waiter that fired; c: a reader
     * whose fd is closed before the new poller is made. */
    CHECK(install(&t, &old_p, a[0], POLLER_READ, ITEM_A, 0, NULL) == 1);
    CHECK(install(&t, &old_p, b[0], POLLER_READ, ITEM_B, 1, NULL) == 1);
    CHECK(install(&t, &old_p, c[0], POLLER_READ, ITEM_C, 0, NULL) == 1);
    CHECK(write(b[1], "x", 1) == 1);
    CHECK(poll_fd(&old_p, b[0]) & POLLER_READ);
    CHECK(fdt_fired(&t, b[0], POLLER_READ) == 0);
    CHECK(fdt_armed(&t) == 2);
    gone = c[0];

    /* As the child does: forget the old poller, open another.  (c's fd is
     * closed after, so the new poller does not take its number.) */
    poller_forget_after_fork(&old_p);
    CHECK(poller_open(&new_p, MAX_EVENTS) == 0);
    close(c[0]);
    close(c[1]);
    CHECK(fdt_after_fork(&t, &new_p) == 1);   /* c's fd cannot be */
    CHECK(fdt_mask(&t, a[0]) == POLLER_READ);
    CHECK(fdt_mask(&t, b[0]) == 0);          /* the new poller never saw it */
    CHECK(fdt_mask(&t, gone) == 0);
    CHECK(fdt_get(&t, gone, POLLER_READ) == ITEM_C);   /* silent, kept */
    CHECK(fdt_armed(&t) == 1);
    CHECK(write(a[1], "x", 1) == 1);
    CHECK(poll_fd(&new_p, a[0]) & POLLER_READ);
    /* b's waiter, asked to wait again, registers afresh (ADD). */
    CHECK(fdt_rearm(&t, &new_p, b[0], POLLER_READ, ITEM_B) == 1);
    CHECK(fdt_mask(&t, b[0]) == (POLLER_READ | POLLER_ONESHOT));
    CHECK(poll_fd(&new_p, b[0]) & POLLER_READ);

    {
        int cursor = 0, n = 0;
        while (fdt_drain(&t, &cursor) != NULL)
            n++;
        CHECK(n == 3);
    }
    poller_close(&new_p);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
    fdt_free(&t);
}

int main(void)
{
    poller p;
    CHECK(poller_open(&p, MAX_EVENTS) == 0);
    with_pair(persistent_reader, &p);
    with_pair(oneshot_waiter, &p);
    with_pair(oneshot_beside_persistent, &p);
    failure_leaves_the_table(&p);
    queries_and_growth(&p);
    owners(&p);
    poller_close(&p);
    after_fork();
    printf("ok %ld\n", checks);
    return 0;
}
