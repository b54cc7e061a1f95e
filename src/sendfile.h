/* sendfile: one zero-copy sendfile() from a file to a socket, with the
 * platforms' three signatures settled here.
 *
 * sendfile_chunk(sock, file, offset, count) sends up to `count` bytes of
 * `file` starting at `offset`, without using or moving the file's position.
 * It returns the bytes sent (0: the file ends at `offset`), or -errno.
 *
 * The BSDs and macOS can report an error *and* bytes sent in one call (EAGAIN
 * after part of the chunk went out, or EINTR): then the bytes sent are
 * returned, as os.sendfile() does, since they are in the socket already.
 * Where there is no sendfile(), SENDFILE_AVAILABLE is 0 and every call
 * returns -ENOSYS (os.sendfile does not exist there either).
 */
#ifndef MINLOOP_SENDFILE_H
#define MINLOOP_SENDFILE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#if defined(__linux__)

#include <sys/sendfile.h>
#define SENDFILE_AVAILABLE 1

static inline ssize_t sendfile_chunk(int sock, int file, int64_t offset, size_t count)
{
    off_t off = (off_t)offset;
    ssize_t n;
    if ((int64_t)off != offset)
        return -EOVERFLOW;   /* a 32-bit off_t: Python has 64-bit offsets */
    n = sendfile(sock, file, &off, count);
    return n < 0 ? -errno : n;
}

#elif defined(__FreeBSD__) || defined(__DragonFly__)

#include <sys/socket.h>
#include <sys/uio.h>
#define SENDFILE_AVAILABLE 1

static inline ssize_t sendfile_chunk(int sock, int file, int64_t offset, size_t count)
{
    off_t sent = 0;
    int err;
    /* nbytes 0 would mean "to the end of the file": callers never pass it. */
    if (sendfile(file, sock, (off_t)offset, count, NULL, &sent, 0) == 0)
        return (ssize_t)sent;
    err = errno;
    if ((err == EAGAIN || err == EBUSY || err == EINTR) && sent > 0)
        return (ssize_t)sent;
    return -err;
}

#elif defined(__APPLE__)

#include <sys/socket.h>
#include <sys/uio.h>
#define SENDFILE_AVAILABLE 1

static inline ssize_t sendfile_chunk(int sock, int file, int64_t offset, size_t count)
{
    /* In: the bytes to send (0 would mean "to the end"); out: bytes sent. */
    off_t len = (off_t)count;
    int err;
    if (sendfile(file, sock, (off_t)offset, &len, NULL, 0) == 0)
        return (ssize_t)len;
    err = errno;
    if ((err == EAGAIN || err == EBUSY || err == EINTR) && len > 0)
        return (ssize_t)len;
    return -err;
}

#else

#define SENDFILE_AVAILABLE 0

static inline ssize_t sendfile_chunk(int sock, int file, int64_t offset, size_t count)
{
    (void)sock; (void)file; (void)offset; (void)count;
    return -ENOSYS;
}

#endif

#endif
