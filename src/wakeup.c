#include "wakeup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/eventfd.h>
#endif

int wakeup_open(wakeup_fds *w)
{
#ifdef __linux__
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    w->read_fd = w->write_fd = fd;
    return 0;
#else
    int fds[2];
    if (pipe(fds) < 0)
        return -errno;
    for (int i = 0; i < 2; i++) {
        fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
        fcntl(fds[i], F_SETFD, FD_CLOEXEC);
    }
    w->read_fd = fds[0];
    w->write_fd = fds[1];
    return 0;
#endif
}

void wakeup_close(wakeup_fds *w)
{
    if (w->read_fd >= 0)
        close(w->read_fd);
    if (w->write_fd >= 0 && w->write_fd != w->read_fd)
        close(w->write_fd);
    w->read_fd = w->write_fd = -1;
}

void wakeup_signal(const wakeup_fds *w)
{
    uint64_t one = 1;
    ssize_t n;
    do {
#ifdef __linux__
        n = write(w->write_fd, &one, sizeof(one));
#else
        n = write(w->write_fd, &one, 1);
#endif
    } while (n < 0 && errno == EINTR);
}

void wakeup_drain(const wakeup_fds *w)
{
    uint64_t buf[16];
    ssize_t n;
#ifdef __linux__
    /* One read resets an eventfd's counter to zero. */
    do {
        n = read(w->read_fd, buf, sizeof(uint64_t));
    } while (n < 0 && errno == EINTR);
#else
    do {
        n = read(w->read_fd, buf, sizeof(buf));
    } while (n > 0 || (n < 0 && errno == EINTR));
#endif
}
