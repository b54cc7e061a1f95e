/* socket_object.h: reading a socket.socket's fd and timeout without calling
 * its methods.
 *
 * Why: a blocked sock_recv/sock_sendall round trip asked the socket for
 * fileno() and gettimeout() about seven times (to know whether the syscall
 * may be made directly on the fd, and which fd to wait for).  Each is a
 * Python method call that costs more than the check it answers.
 *
 * What: CPython's socket object (Modules/socketmodule.h, PySocketSockObject)
 * starts, in every version from 3.8 to 3.14 on POSIX, with
 *
 *     PyObject_HEAD
 *     SOCKET_T sock_fd;                   -1 once closed or detached
 *     int sock_family, sock_type, sock_proto;
 *     PyObject *(*errorhandler)(void);
 *     _PyTime_t sock_timeout;             nanoseconds; < 0: blocking, 0:
 *                                         non-blocking (settimeout(0.0))
 *
 * and socket.socket, the Python class, adds only __slots__ after it.  That
 * struct is not part of the C API, so nothing relies on it unchecked: at
 * import, sock_ops.pyx makes sockets in each state that matters (blocking,
 * non-blocking, with a timeout, closed, detached) and compares what these
 * fields say with what fileno() and gettimeout() answer.  Only if all
 * agree, and the type is large enough to hold the struct, are the fields
 * read; otherwise the methods are called, as before.
 *
 * These are live reads of the object, not a cache: settimeout(), close()
 * and detach() change the fields the methods read, so an answer is never
 * stale.
 */
#ifndef MINLOOP_SOCKET_OBJECT_H
#define MINLOOP_SOCKET_OBJECT_H

#include <Python.h>
#include <stdint.h>

typedef struct {
    PyObject_HEAD
    int sock_fd;
    int sock_family;
    int sock_type;
    int sock_proto;
    PyObject *(*errorhandler)(void);
    int64_t sock_timeout;
} minloop_socket_head;

#endif
