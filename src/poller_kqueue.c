/* The kqueue backend of poller.h (macOS, FreeBSD, OpenBSD, NetBSD).
 *
 * kqueue keeps one filter per (fd, direction), so a change of interest is up
 * to two changes: add or delete EVFILT_READ and EVFILT_WRITE separately.  A
 * fd ready both ways comes back as two events; the loop handles each.
 * Closing an fd removes its filters in the kernel, so deleting them later
 * fails with ENOENT or EBADF, which we ignore as the epoll backend does.
 */
#if defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || \
    defined(__NetBSD__) || defined(__DragonFly__)

#include "poller.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/event.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

const char *poller_backend(void) { return "kqueue"; }

int poller_open(poller *p, int max_events)
{
    p->fd = kqueue();
    if (p->fd < 0)
        return -errno;
    (void)fcntl(p->fd, F_SETFD, FD_CLOEXEC);
    p->buf = calloc((size_t)max_events, sizeof(struct kevent));
    if (p->buf == NULL) {
        close(p->fd);
        p->fd = -1;
        return -ENOMEM;
    }
    p->bufsize = max_events;
    return 0;
}

void poller_close(poller *p)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    free(p->buf);
    p->buf = NULL;
    p->bufsize = 0;
}

void poller_forget_after_fork(poller *p)
{
    p->fd = -1;   /* not ours in the child: never close the number */
    poller_close(p);
}

int poller_modify(poller *p, int fd, int old_mask, int new_mask)
{
    struct kevent changes[2];
    int n = 0;
    int added = new_mask & ~old_mask, removed = old_mask & ~new_mask;
    if (added & POLLER_READ)
        EV_SET(&changes[n++], fd, EVFILT_READ, EV_ADD, 0, 0, NULL);
    if (added & POLLER_WRITE)
        EV_SET(&changes[n++], fd, EVFILT_WRITE, EV_ADD, 0, 0, NULL);
    int nadd = n;
    if (nadd && kevent(p->fd, changes, nadd, NULL, 0, NULL) < 0)
        return -errno;
    n = 0;
    if (removed & POLLER_READ)
        EV_SET(&changes[n++], fd, EVFILT_READ, EV_DELETE, 0, 0, NULL);
    if (removed & POLLER_WRITE)
        EV_SET(&changes[n++], fd, EVFILT_WRITE, EV_DELETE, 0, 0, NULL);
    for (int i = 0; i < n; i++) {
        /* One at a time, so a filter the kernel already dropped does not
         * hide the failure or success of the other. */
        if (kevent(p->fd, &changes[i], 1, NULL, 0, NULL) < 0 &&
                errno != ENOENT && errno != EBADF)
            return -errno;
    }
    return 0;
}

int poller_wait(poller *p, poller_event *out, int64_t timeout_ns)
{
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000);
        ts.tv_nsec = (long)(timeout_ns % 1000000000);
        tsp = &ts;
    }
    struct kevent *evs = (struct kevent *)p->buf;
    int n = kevent(p->fd, NULL, 0, evs, p->bufsize, tsp);
    if (n < 0)
        return -errno;
    for (int i = 0; i < n; i++) {
        out[i].fd = (int)evs[i].ident;
        if (evs[i].filter == EVFILT_READ)
            out[i].events = POLLER_READ;
        else if (evs[i].filter == EVFILT_WRITE)
            out[i].events = POLLER_WRITE;
        else
            out[i].events = 0;
        if (evs[i].flags & EV_ERROR)
            out[i].events = POLLER_READ | POLLER_WRITE;
    }
    return n;
}

#endif
