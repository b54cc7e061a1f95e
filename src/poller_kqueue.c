/* The kqueue backend of poller.h (macOS, FreeBSD, OpenBSD, NetBSD).
 *
 * kqueue keeps one filter per (fd, direction), so a change of interest is up
 * to two changes: add or delete EVFILT_READ and EVFILT_WRITE separately.  A
 * fd ready both ways comes back as two events; the loop handles each.
 * Closing an fd removes its filters in the kernel, so deleting them later
 * fails with ENOENT or EBADF, which we ignore as the epoll backend does.
 *
 * POLLER_ONESHOT maps to EV_ONESHOT: the kernel deletes the filter when
 * kevent() returns its event.  So a disarmed fd (POLLER_ONESHOT alone) has
 * no filter at all, and only the direction bits of a mask say which filters
 * exist.  Whether EV_ADD on an existing filter changes its EV_ONESHOT flag
 * is not something to rely on across the BSDs and macOS, so a filter whose
 * one-shot-ness changes is deleted and added again.
 *
 * On Linux this file compiles only into a build with MINLOOP_POLLER=kqueue
 * (setup.py), against libkqueue, the kqueue API emulated on epoll: .ci/run
 * runs the core tests on it.  Where libkqueue and a kernel's kqueue differ
 * in what this file or the loop relies on (tests/test_libkqueue_facts.py
 * checks the emulation's side):
 *  - fork: a kernel's kqueue is not inherited; libkqueue closes its queues
 *    in the child (pthread_atfork).  Either way the child's number is not
 *    ours to close: poller_forget_after_fork() only forgets it.
 *  - close of the kqueue: the kernel frees it at once; libkqueue in its
 *    monitoring thread, a moment later.  poller_close() waits for that
 *    (RELEASE_CLOSED_KQUEUES), so a closed loop holds no descriptor.
 *  - close of a watched fd: the kernel drops its filters; libkqueue cannot
 *    see a close and keeps its knote.  The loop removes interest before a
 *    transport closes its fd (it must for epoll too), and delete_filters()
 *    ignores ENOENT and EBADF, so either side's answer is fine.
 *  - EV_ONESHOT: both drop the filter once its event is collected.  Whether
 *    EV_ADD on a live filter changes its one-shot-ness is not relied on
 *    (above): delete, then add.
 *  - a socket's pending error: the kernel reports it in EV_EOF's fflags and
 *    leaves it to recv()/getsockopt(); libkqueue reads it with
 *    getsockopt(SO_ERROR), which on Linux clears it, so recv() sees a plain
 *    end of file and a refused connect() looks made.  The loop never reads
 *    fflags; the tests that need the error are expected failures there
 *    (tests/conftest.py, LIBKQUEUE_DIFFERS).
 *  - a regular file: both report it readable while its offset is short of
 *    its end (epoll refuses it: PermissionError).
 *  - a kqueue descriptor in another poller: the kernel's is readable while
 *    it holds events; libkqueue's is a pipe's write end, never readable.
 *    So minloop/subprocess.py's kqueue per child (EVFILT_PROC, a reader on
 *    the loop) cannot run over libkqueue, and a NOTE_EXIT event whose child
 *    another reaper took first is dropped there, where the kernel keeps the
 *    status with the event.  That path is tested against a stand-in only.
 */
#if defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || \
    defined(__NetBSD__) || defined(__DragonFly__) || defined(MINLOOP_POLLER_KQUEUE)

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

/* kevent() takes a timespec already: nothing to probe. */
int poller_probe_pwait2(void) { return -1; }

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

#ifdef MINLOOP_POLLER_KQUEUE
/* libkqueue frees a closed kqueue's own descriptors (an epoll, a pipe's
 * other end) in its monitoring thread, a moment after close().  This asks
 * that thread to finish and waits, so that loop.close() has given back
 * every descriptor when it returns, as a kernel's kqueue has.  Exported by
 * libkqueue, not declared in its header. */
void libkqueue_drain_pending_close(void);
#define RELEASE_CLOSED_KQUEUES() libkqueue_drain_pending_close()
#else
#define RELEASE_CLOSED_KQUEUES() ((void)0)
#endif

void poller_close(poller *p)
{
    if (p->fd >= 0) {
        close(p->fd);
        RELEASE_CLOSED_KQUEUES();
    }
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

static int delete_filters(poller *p, int fd, int mask)
{
    struct kevent change;
    /* One at a time, so a filter the kernel already dropped does not hide
     * the failure or success of the other. */
    if (mask & POLLER_READ) {
        EV_SET(&change, fd, EVFILT_READ, EV_DELETE, 0, 0, NULL);
        if (kevent(p->fd, &change, 1, NULL, 0, NULL) < 0 &&
                errno != ENOENT && errno != EBADF)
            return -errno;
    }
    if (mask & POLLER_WRITE) {
        EV_SET(&change, fd, EVFILT_WRITE, EV_DELETE, 0, 0, NULL);
        if (kevent(p->fd, &change, 1, NULL, 0, NULL) < 0 &&
                errno != ENOENT && errno != EBADF)
            return -errno;
    }
    return 0;
}

int poller_modify(poller *p, int fd, int old_mask, int new_mask)
{
    struct kevent changes[2];
    int n = 0, rc;
    int rw = POLLER_READ | POLLER_WRITE;
    int old_f = old_mask & rw, new_f = new_mask & rw;
    int added = new_f & ~old_f, removed = old_f & ~new_f;
    unsigned short flags = EV_ADD | ((new_mask & POLLER_ONESHOT) ? EV_ONESHOT : 0);
    if (old_mask == new_mask)
        return 0;
    if ((old_mask ^ new_mask) & POLLER_ONESHOT) {
        /* Kept filters change their one-shot-ness: delete, then add.  If
         * the add then fails, those filters are gone while the loop keeps
         * the old mask: the fd goes silent (the error is raised to the
         * caller), it never fires spuriously. */
        rc = delete_filters(p, fd, old_f & new_f);
        if (rc < 0)
            return rc;
        added |= old_f & new_f;
    }
    if (added & POLLER_READ)
        EV_SET(&changes[n++], fd, EVFILT_READ, flags, 0, 0, NULL);
    if (added & POLLER_WRITE)
        EV_SET(&changes[n++], fd, EVFILT_WRITE, flags, 0, 0, NULL);
    if (n && kevent(p->fd, changes, n, NULL, 0, NULL) < 0)
        return -errno;
    return delete_filters(p, fd, removed);
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
