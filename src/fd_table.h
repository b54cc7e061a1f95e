/* fd_table: what the loop watches, by fd, and what the kernel was told.
 *
 * A C array indexed by fd.  Each slot holds the fd's reader and writer and
 * `mask`, what the kernel has registered for the fd (a poller.h mask).  The
 * reader and writer are opaque pointers (the loop's Handles): the table never
 * dereferences them.  Its owner counts the references: it gives the table one
 * for each item it installs and takes back the table's one for each item
 * handed out (fdt_install's *old, fdt_drain's result).
 *
 * The fd table and the kernel
 *
 * Persistent items (add_reader/add_writer, transports, servers) are
 * registered level-triggered, as asyncio's selector does.  A one-shot waiter
 * (a blocked sock_* operation: it waits for one event, then either ends or
 * asks again) that is alone on its fd is registered with POLLER_ONESHOT, so
 * that the kernel disarms it as it reports the event and the operation's end
 * needs no syscall: the next wait re-arms it with one MOD.  The facts that
 * make that safe, and the rules that keep it so:
 *
 *  - A disarmed registration never reports anything again (epoll clears even
 *    EPOLLERR/EPOLLHUP; kqueue deletes the filter).  So leaving it behind
 *    after the operation, or after the socket is closed, is harmless.
 *    Leaving an *armed* one behind is not: if a dup() of the socket lives on
 *    (a forked child), it fires forever, or it fires for a new file under the
 *    same number.  Hence a one-shot waiter removed before it fired
 *    (cancelled) is DELeted like any other interest.
 *  - mask == POLLER_DISARMED means "maybe registered, certainly silent".
 *    Re-arming tries MOD and falls back to ADD on ENOENT: the fd may be a new
 *    file under the old number, whose old registration was dropped at close
 *    or lingers, disarmed, under the old file.
 *  - Only the poll learns that the kernel disarmed a one-shot registration
 *    (epoll_wait hands out its event), and it marks the slot then
 *    (fdt_fired).  The waiter is dispatched with that event; when it runs it
 *    removes itself, or it asks to wait again (fdt_rearm).  Any other change
 *    of the slot recomputes the whole registration from the table
 *    (fdt_wanted), so it re-arms what must be armed.  There is no other way
 *    out of the disarmed state with an item left.
 *  - One-shot only when the waiter is the fd's only item: a one-shot
 *    registration fires once for both directions, and a persistent item must
 *    never miss an event.  With two items the fd is level-triggered for both.
 *  - `armed` counts fds with something *armed* (the loop's _user_fds): a
 *    disarmed fd cannot wake a poll, so it does not keep the loop polling.
 *  - fork(): the child's new poller gets the armed registrations again
 *    (fdt_after_fork); disarmed ones become 0 (the new poller never saw
 *    them).  Close: the poller's fd goes, and every registration with it, so
 *    the table is emptied without telling the kernel (fdt_drain).  Deleting
 *    registrations one by one instead would reach into the parent's interest
 *    set when a forked child closes an inherited loop, since parent and child
 *    share the epoll instance.
 *  - Releasing an item the table handed out can run arbitrary code (a
 *    Handle's callback arguments die with it), and that code may install
 *    items, which reallocates the array.  So nothing here hands out a slot's
 *    address: callers ask again (fdt_get) after anything that can run code.
 *
 * The kernel is changed before the table, so a failing change (-errno)
 * leaves the table as it was.  Functions return 0 or a count on success and
 * -errno on failure.  None touches Python or locks anything: the owner
 * makes its calls one at a time (the loop's, from its own thread).
 *
 * Owners
 *
 * A slot also names the transport that owns its fd (asyncio's
 * loop._transports[fd]), so that a connection costs no weak-reference
 * entry.  That pointer is borrowed: the table never counts, dereferences or
 * hands out references to it.  So the owner must clear it (fdt_disown)
 * before it dies, and only the owner itself may set it: it is then always
 * either NULL or a live object.  fdt_disown clears the slot only if it
 * still names the caller, since a newer owner may have taken the fd number
 * since.  Nothing else clears owners -- not fdt_drain (asyncio's
 * _transports outlives its loop's close()), not fork -- and the readers
 * and writers do not depend on them.  An owner may die in any thread (the
 * collector finalizes in the thread that collects): the loop serialises
 * fdt_disown with fdt_grow and the owner reads under a lock of its own
 * (LoopCore._owners_lock; docs/threading.md, item 15), so that the table
 * itself stays free of Python and of locks.
 *
 * The calls a poll's event and a sock_* wait make are inline here, so they
 * compile into the loop's own code; growing, fork and teardown are in
 * fd_table.c.
 */
#ifndef MINLOOP_FD_TABLE_H
#define MINLOOP_FD_TABLE_H

#include "poller.h"
#include "telemetry.h"

#include <stddef.h>

#define FDT_ARMED(mask) ((mask) & (POLLER_READ | POLLER_WRITE))

typedef struct {
    void *reader;   /* NULL: none */
    void *writer;
    void *owner;    /* the transport that owns fd, or NULL (see "Owners") */
    int mask;       /* the kernel's state: a poller.h mask (POLLER_DISARMED:
                     * a one-shot registration that fired) */
    int oneshot;    /* POLLER_READ/WRITE: that item is a one-shot waiter */
} fdt_slot;

typedef struct {
    fdt_slot *slots;
    int size;       /* slots allocated; every fd >= size is empty */
    int armed;      /* fds whose mask has READ or WRITE armed */
    /* For telemetry (any thread reads them: fdt_watched()): fds with a
     * reader or a writer, now and at most. */
    uint64_t watched;
    uint64_t watched_max;
} fd_table;

void fdt_init(fd_table *t);
/* Frees the array only; the caller must have drained the items first. */
void fdt_free(fd_table *t);
/* Make room for fd (its slot and all below): 0, -EBADF for a negative fd,
 * or -ENOMEM (the table is as it was). */
int fdt_grow(fd_table *t, int fd);
/* After fork(), with a new poller `p`: register the armed fds again, and
 * forget the disarmed ones (they stayed in the parent's poller).  An fd that
 * cannot be registered (the child closed it) keeps its items, silent, with
 * mask 0.  Returns how many could not. */
int fdt_after_fork(fd_table *t, poller *p);
/* Empty the table without telling the kernel (the poller is going away):
 * hands out one item per call, forgetting it, and NULL once none is left;
 * every slot it passes gets mask 0 (its owner stays).  `*cursor` starts at 0.  Items installed
 * meanwhile below the cursor stay (with their registration). */
void *fdt_drain(fd_table *t, int *cursor);

/* ------------------------------------------------------------------ */
/* Queries */

static inline int fdt_size(const fd_table *t) { return t->size; }
static inline int fdt_armed(const fd_table *t) { return t->armed; }
/* Any thread (0 where telemetry is compiled out). */
static inline uint64_t fdt_watched(const fd_table *t) { return TM_LOAD(t->watched); }
static inline uint64_t fdt_watched_max(const fd_table *t) { return TM_LOAD(t->watched_max); }

/* An fd gained its first item (+1) or lost its last (-1). */
static inline void fdt_count_watched(fd_table *t, int change)
{
#if MINLOOP_TELEMETRY
    uint64_t n = TM_LOAD(t->watched) + (uint64_t)(int64_t)change;
    TM_STORE(t->watched, n);
    TM_RAISE(t->watched_max, n);
#else
    (void)t; (void)change;
#endif
}

static inline int fdt_has(const fd_table *t, int fd)
{
    /* One comparison for both ends: size is never negative. */
    return (unsigned int)fd < (unsigned int)t->size;
}

/* fd's reader (which == POLLER_READ) or writer (POLLER_WRITE), for an fd
 * known to be in the table (the array grows, it never shrinks while in
 * use): what a poll's event reads, once fdt_fired said so. */
static inline void *fdt_item(const fd_table *t, int fd, int which)
{
    return which == POLLER_READ ? t->slots[fd].reader : t->slots[fd].writer;
}

/* The same, or NULL; any fd, negative or beyond the table, may be asked. */
static inline void *fdt_get(const fd_table *t, int fd, int which)
{
    return fdt_has(t, fd) ? fdt_item(t, fd, which) : NULL;
}

/* fd has neither a reader nor a writer. */
static inline int fdt_idle(const fd_table *t, int fd)
{
    return fdt_get(t, fd, POLLER_READ) == NULL && fdt_get(t, fd, POLLER_WRITE) == NULL;
}

/* The kernel's mask and the one-shot bits of fd (0 beyond the table). */
static inline int fdt_mask(const fd_table *t, int fd)
{
    return fdt_has(t, fd) ? t->slots[fd].mask : 0;
}

static inline int fdt_oneshot(const fd_table *t, int fd)
{
    return fdt_has(t, fd) ? t->slots[fd].oneshot : 0;
}

/* fd's owner (NULL: none; any fd may be asked). */
static inline void *fdt_owner(const fd_table *t, int fd)
{
    return fdt_has(t, fd) ? t->slots[fd].owner : NULL;
}

/* ------------------------------------------------------------------ */
/* Owners (fd < size for fdt_set_owner: fdt_grow first) */

static inline void fdt_set_owner(fd_table *t, int fd, void *owner)
{
    t->slots[fd].owner = owner;
}

/* Forget `owner` as fd's owner, if it still is (any fd may be given). */
static inline void fdt_disown(fd_table *t, int fd, const void *owner)
{
    if (fdt_has(t, fd) && t->slots[fd].owner == owner)
        t->slots[fd].owner = NULL;
}

/* ------------------------------------------------------------------ */
/* The kernel's registration (fd < size in all of these) */

/* The registration fd needs with these items and one-shot bits. */
static inline int fdt_wanted(const fd_table *t, int fd, const void *reader,
                             const void *writer, int oneshot)
{
    int want = (reader != NULL ? POLLER_READ : 0) | (writer != NULL ? POLLER_WRITE : 0);
    if (want == 0) {
        /* A registration that fired may stay: it is silent, and keeping it
         * spares the DEL an operation's end would otherwise cost. */
        return t->slots[fd].mask == POLLER_DISARMED ? POLLER_DISARMED : 0;
    }
    if (want != (POLLER_READ | POLLER_WRITE) && (oneshot & want))
        return want | POLLER_ONESHOT;   /* a lone one-shot waiter */
    return want;
}

/* Make the kernel's registration for fd `mask`.  Returns 1 if that took a
 * syscall, 0 if not (no redundant epoll_ctl), -errno on failure. */
static inline int fdt_set_interest(fd_table *t, poller *p, int fd, int mask)
{
    int old = t->slots[fd].mask;
    int rc;
    if (old == mask)
        return 0;
    rc = poller_modify(p, fd, old, mask);
    if (rc < 0)
        return rc;
    if (!FDT_ARMED(old) && FDT_ARMED(mask))
        t->armed++;
    else if (FDT_ARMED(old) && !FDT_ARMED(mask))
        t->armed--;
    t->slots[fd].mask = mask;
    return FDT_ARMED(old | mask) ? 1 : 0;
}

/* Install `item` (NULL: clear) as fd's reader (which == POLLER_READ) or
 * writer (POLLER_WRITE); `oneshot`: a one-shot waiter.  The registration is
 * changed first.  On success stores the item replaced (or NULL) in *old and
 * returns fdt_set_interest's 0 or 1; on failure returns -errno and the
 * table is as it was.  fd must be in the table (fdt_grow). */
static inline int fdt_install(fd_table *t, poller *p, int fd, int which,
                              void *item, int oneshot, void **old)
{
    fdt_slot *s = &t->slots[fd];
    void *reader = which == POLLER_READ ? item : s->reader;
    void *writer = which == POLLER_READ ? s->writer : item;
    int oneshot_bits = s->oneshot & ~which;
    int rc;
    if (oneshot && item != NULL)
        oneshot_bits |= which;
    rc = fdt_set_interest(t, p, fd, fdt_wanted(t, fd, reader, writer, oneshot_bits));
    if (rc < 0)
        return rc;
    s->oneshot = oneshot_bits;
    *old = which == POLLER_READ ? s->reader : s->writer;
    if ((s->reader != NULL || s->writer != NULL) != (reader != NULL || writer != NULL))
        fdt_count_watched(t, reader != NULL || writer != NULL ? 1 : -1);
    s->reader = reader;
    s->writer = writer;
    return rc;
}

/* The poller reported `events` for fd, which is in the table (fdt_has).
 * Returns 0 if its items (fdt_item) are to be dispatched, or else the mask
 * to arm fd with again instead.  A one-shot registration was disarmed
 * by the kernel as it handed out this event: the slot says so now, and the
 * waiter re-arms it if it must wait again.  An event that is not for the
 * waiter (no backend reports such an event for a one-direction
 * registration) must not be lost: the mask to re-arm is returned, or the
 * waiter would wait forever. */
static inline int fdt_fired(fd_table *t, int fd, int events)
{
    int mask = t->slots[fd].mask;
    if ((mask & POLLER_ONESHOT) && FDT_ARMED(mask)) {
        t->slots[fd].mask = POLLER_DISARMED;
        t->armed--;
        if (!(events & mask))
            return mask;
    }
    return 0;
}

/* Wait again for fd, if `item` is still its reader/writer (else 0: another
 * has replaced it, and it is not ours to arm).  As fdt_set_interest. */
static inline int fdt_rearm(fd_table *t, poller *p, int fd, int which, const void *item)
{
    fdt_slot *s;
    if (item == NULL || fdt_get(t, fd, which) != item)
        return 0;
    s = &t->slots[fd];
    return fdt_set_interest(t, p, fd, fdt_wanted(t, fd, s->reader, s->writer, s->oneshot));
}

#endif
