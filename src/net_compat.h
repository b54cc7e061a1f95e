/* Socket calls the transports make directly, with the few portability
 * differences settled here. */
#ifndef MINLOOP_NET_COMPAT_H
#define MINLOOP_NET_COMPAT_H

#include <limits.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* Writes to a peer that has gone away must fail with EPIPE, not raise
 * SIGPIPE: CPython ignores SIGPIPE at startup, but an embedding program may
 * not.  Linux and the BSDs have MSG_NOSIGNAL; macOS does not, and there
 * Python's own SIG_IGN is what protects us, as it protects socket.send(). */
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

/* How many buffers one writev/sendmsg may take.  POSIX promises at least
 * 16; Linux and macOS allow 1024. */
#if defined(IOV_MAX) && IOV_MAX < 1024
#define MINLOOP_IOV_MAX IOV_MAX
#else
#define MINLOOP_IOV_MAX 1024
#endif

/* A compile-time check the address cache relies on: datagram.pxd's
 * addr_entry keeps a numeric address in 28 bytes, sizeof(struct
 * sockaddr_in6), the larger of the two families it caches. */
typedef char minloop_sockaddr_in6_fits[sizeof(struct sockaddr_in6) <= 28 ? 1 : -1];

#endif
