/* poller: one small interface over epoll (Linux) and kqueue (macOS/BSD).
 *
 * Interest is a bit mask of POLLER_READ and POLLER_WRITE, optionally with
 * POLLER_ONESHOT.  The caller keeps the current mask of each fd (the loop's
 * fd table) and passes both the old and the new mask, so the poller never
 * asks the kernel what is registered and the loop calls it only when the mask
 * really changes.  The masks mean:
 *
 *   0                          not registered
 *   READ|WRITE bits            registered, level-triggered, armed
 *   bits | POLLER_ONESHOT      registered, armed for one event: the kernel
 *                              disarms it when it reports that event
 *   POLLER_ONESHOT alone       disarmed: a one-shot registration that fired.
 *                              It may linger in the kernel (epoll) or be gone
 *                              (kqueue, or the fd was closed), but it can
 *                              never report an event again.
 *
 * Going from an armed mask to POLLER_ONESHOT alone is not a thing the kernel
 * can do for us (epoll would still report errors): ask for 0 instead.
 *
 * All functions return 0 (or a count) on success and -errno on failure; they
 * never touch Python and may be called without the GIL.
 */
#ifndef MINLOOP_POLLER_H
#define MINLOOP_POLLER_H

#include <stdint.h>

#define POLLER_READ  1
#define POLLER_WRITE 2
#define POLLER_ONESHOT 4
#define POLLER_DISARMED POLLER_ONESHOT

typedef struct {
    int fd;
    int events;  /* POLLER_READ | POLLER_WRITE; errors and hang-ups set both */
} poller_event;

typedef struct {
    int fd;      /* the epoll or kqueue descriptor, -1 when closed */
    void *buf;   /* kernel event buffer of `bufsize` entries */
    int bufsize;
} poller;

/* The backend's name, for `minloop info` and bug reports. */
const char *poller_backend(void);

/* For `minloop info`: whether poller_wait() makes its timed waits with
 * epoll_pwait2 (nanosecond timeouts) in this process.  -1: not this
 * backend's call, or built without it (no SYS_epoll_pwait2 in the build's
 * headers); 0: yes; else the errno that sends it to epoll_wait (ENOSYS:
 * Linux < 5.11) or that refuses it (a seccomp filter's EPERM). */
int poller_probe_pwait2(void);

int poller_open(poller *p, int max_events);
void poller_close(poller *p);
/* In a forked child: let go of the parent's poller before opening a new one.
 * An epoll fd is inherited (and is closed here); a kqueue is not inherited,
 * so its number may already name another file of the child's and is only
 * forgotten. */
void poller_forget_after_fork(poller *p);

/* Change fd's interest from old_mask to new_mask (either may be 0). */
int poller_modify(poller *p, int fd, int old_mask, int new_mask);

/* Wait up to timeout_ns nanoseconds (-1: forever, 0: don't block).  Fills up
 * to p->bufsize events into `out` and returns how many.  Returns -EINTR when a
 * signal interrupted the wait, so the caller can run Python signal handlers. */
int poller_wait(poller *p, poller_event *out, int64_t timeout_ns);

#endif
