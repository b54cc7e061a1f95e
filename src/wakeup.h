/* wakeup: the fd another thread writes to wake a loop blocked in the poller.
 *
 * An eventfd on Linux (one fd, a counter, never fills up); a non-blocking
 * pipe elsewhere.  Both ends are close-on-exec.  The loop writes only while
 * it is (about to be) blocked, so a full pipe can only mean a wake-up is
 * already pending, and EAGAIN is ignored.
 */
#ifndef MINLOOP_WAKEUP_H
#define MINLOOP_WAKEUP_H

typedef struct {
    int read_fd;
    int write_fd;  /* equal to read_fd for an eventfd */
} wakeup_fds;

int wakeup_open(wakeup_fds *w);   /* 0 or -errno */
void wakeup_close(wakeup_fds *w);
void wakeup_signal(const wakeup_fds *w);
void wakeup_drain(const wakeup_fds *w);

#endif
