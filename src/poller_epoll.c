/* The epoll backend of poller.h.
 *
 * Some facts about epoll that the loop relies on, and that cause the bugs
 * when forgotten:
 *  - Registrations belong to the open file description, not to the fd number.
 *    Closing an fd that still has a dup() elsewhere (a forked child, a
 *    socket.dup()) leaves the registration alive, and events keep arriving
 *    under the old number.  The loop therefore always removes interest before
 *    a transport closes its fd.
 *  - Once the last reference is closed the registration vanishes silently.  If
 *    the number is then reused, our fd table still says "registered": MOD
 *    fails with ENOENT, and we fall back to ADD.  Likewise ADD of a number the
 *    kernel still knows fails with EEXIST, and we fall back to MOD.
 *  - DEL of an fd that is already closed fails with EBADF; that is fine.
 *  - epoll refuses regular files with EPERM; asyncio's selector raises
 *    PermissionError for them too, so we pass the error up.
 *  - EPOLLERR and EPOLLHUP are always reported whatever the interest; we report
 *    them as both readable and writable, as the selectors module does, and the
 *    loop masks the result with what was asked for.
 *  - EPOLLONESHOT: when epoll_wait() hands out the registration's event, the
 *    kernel clears its whole event mask, EPOLLERR and EPOLLHUP included.  The
 *    registration stays in the interest set (until DEL or the file's last
 *    close) but can never report again; MOD arms it anew.  So a disarmed
 *    registration that outlives its socket (a dup() elsewhere keeps the file
 *    open) is harmless, where a level-triggered one would fire forever.
 *  - MOD finds a registration by (file, fd number).  After the number was
 *    closed and reused for a new file, MOD fails with ENOENT even if the old
 *    file's disarmed registration lingers under that number; ADD then makes
 *    the new file's own registration.
 *  - MOD with an empty mask does not disarm: EPOLLERR/EPOLLHUP are added back.
 *    To stop an armed one-shot registration, DEL it.
 */
/* MINLOOP_POLLER_KQUEUE: a Linux build with the kqueue poller (setup.py). */
#if defined(__linux__) && !defined(MINLOOP_POLLER_KQUEUE)

#include "poller.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

const char *poller_backend(void) { return "epoll"; }

int poller_open(poller *p, int max_events)
{
    p->fd = epoll_create1(EPOLL_CLOEXEC);
    if (p->fd < 0)
        return -errno;
    p->buf = calloc((size_t)max_events, sizeof(struct epoll_event));
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
    poller_close(p);
}

static uint32_t to_epoll(int mask)
{
    return ((mask & POLLER_READ) ? EPOLLIN : 0) | ((mask & POLLER_WRITE) ? EPOLLOUT : 0);
}

static int ctl(int epfd, int op, int fd, int mask)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = to_epoll(mask) | ((mask & POLLER_ONESHOT) ? EPOLLONESHOT : 0);
    ev.data.fd = fd;
    return epoll_ctl(epfd, op, fd, &ev) == 0 ? 0 : -errno;
}

#define ARMED(mask) ((mask) & (POLLER_READ | POLLER_WRITE))

int poller_modify(poller *p, int fd, int old_mask, int new_mask)
{
    int rc;
    if (old_mask == new_mask)
        return 0;
    if (!ARMED(new_mask)) {
        /* Nothing armed is wanted.  A disarmed registration may stay: it
         * cannot fire, and leaving it saves the DEL. */
        if (!ARMED(old_mask))
            return 0;
        rc = ctl(p->fd, EPOLL_CTL_DEL, fd, 0);
        return (rc == -EBADF || rc == -ENOENT) ? 0 : rc;
    }
    if (old_mask == 0) {
        rc = ctl(p->fd, EPOLL_CTL_ADD, fd, new_mask);
        if (rc == -EEXIST)
            rc = ctl(p->fd, EPOLL_CTL_MOD, fd, new_mask);
        return rc;
    }
    rc = ctl(p->fd, EPOLL_CTL_MOD, fd, new_mask);
    if (rc == -ENOENT)
        rc = ctl(p->fd, EPOLL_CTL_ADD, fd, new_mask);
    return rc;
}

/* epoll_pwait2 (Linux 5.11) takes a timespec, so a timer due in 300 us does
 * not become a 1 ms sleep.  It is called through syscall() so that wheels
 * built against an old glibc still use it, and its number is given here for
 * the architectures we ship wheels for when the build's kernel headers
 * predate it (manylinux images do): 441 in the kernel's common table.
 * ENOSYS (an older kernel) or EPERM (a seccomp filter that answers so for
 * calls it does not know, as older container profiles do; epoll_pwait2 has
 * no EPERM of its own) switches to epoll_wait for the rest of the process. */
#if !defined(SYS_epoll_pwait2) && (defined(__x86_64__) || defined(__aarch64__) || defined(__i386__))
#define SYS_epoll_pwait2 441
#endif
#define pwait2_unavailable(err) ((err) == ENOSYS || (err) == EPERM)

#ifdef SYS_epoll_pwait2
static int have_pwait2 = 1;
#else
static int have_pwait2 = 0;
#endif

static int wait_ms(poller *p, int64_t timeout_ns)
{
    int ms;
    if (timeout_ns < 0)
        ms = -1;
    else {
        /* Round up: waking early would make the loop spin until due. */
        int64_t m = (timeout_ns + 999999) / 1000000;
        ms = m > 0x7fffffff ? 0x7fffffff : (int)m;
    }
    return epoll_wait(p->fd, (struct epoll_event *)p->buf, p->bufsize, ms);
}

int poller_probe_pwait2(void)
{
#ifdef SYS_epoll_pwait2
    if (!have_pwait2)  /* a wait here already found it unavailable */
        return ENOSYS;
    /* A wait on an empty epoll that returns at once. */
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        return errno;
    struct epoll_event ev;
    struct timespec zero = {0, 0};
    int rc = syscall(SYS_epoll_pwait2, epfd, &ev, 1, &zero, NULL, 0) < 0 ? errno : 0;
    close(epfd);
    return rc;
#else
    return -1;
#endif
}

int poller_wait(poller *p, poller_event *out, int64_t timeout_ns)
{
    int n;
#ifdef SYS_epoll_pwait2
    if (have_pwait2 && timeout_ns != 0) {
        struct timespec ts, *tsp = NULL;
        if (timeout_ns > 0) {
            ts.tv_sec = (time_t)(timeout_ns / 1000000000);
            ts.tv_nsec = (long)(timeout_ns % 1000000000);
            tsp = &ts;
        }
        n = (int)syscall(SYS_epoll_pwait2, p->fd, p->buf, p->bufsize, tsp, NULL, 0);
        if (n < 0 && pwait2_unavailable(errno)) {
            have_pwait2 = 0;
            n = wait_ms(p, timeout_ns);
        }
    } else
#endif
        n = wait_ms(p, timeout_ns);
    if (n < 0)
        return -errno;
    struct epoll_event *evs = (struct epoll_event *)p->buf;
    for (int i = 0; i < n; i++) {
        uint32_t e = evs[i].events;
        int mask = 0;
        if (e & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP))
            mask |= POLLER_READ;
        if (e & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            mask |= POLLER_WRITE;
        out[i].fd = evs[i].data.fd;
        out[i].events = mask;
    }
    return n;
}

#endif /* __linux__ */
