# The queue of unsent bytes of the stream and write-pipe transports, as
# functions they inline over their own fields (no object between a transport
# and its queue on the write path).
#
# The queue is a list of bytes objects, oldest first; the first `head` bytes
# of its first item have gone out already, and `size` counts what has not.

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport (PyBytes_FromStringAndSize, PyBytes_AS_STRING,
                            PyBytes_GET_SIZE, PyBytes_Check)

from .includes cimport MINLOOP_IOV_MAX, iovec


cdef inline bint queue_unsent(list queue, Py_ssize_t *head, Py_ssize_t *size,
                              data, Py_ssize_t offset) except -1:
    """Queue data[offset:]; False if there is nothing left to queue."""
    cdef Py_buffer view
    cdef Py_ssize_t length
    if PyBytes_Check(data):
        length = PyBytes_GET_SIZE(data) - offset
        if length <= 0:
            return False
        if size[0] == 0:
            # Keep the object, not a copy: the head records what went out.
            head[0] = offset
            queue.append(data)
        elif offset:
            queue.append(data[offset:])
        else:
            queue.append(data)
    else:
        # The caller may reuse a mutable buffer once write() returns.
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            length = view.len - offset
            if length <= 0:
                return False
            copy = PyBytes_FromStringAndSize(<char *>view.buf + offset, length)
        finally:
            PyBuffer_Release(&view)
        if size[0] == 0:
            head[0] = 0
        queue.append(copy)
    size[0] += length
    return True


cdef inline Py_ssize_t fill_iovecs(list queue, Py_ssize_t head,
                                   iovec *iov) noexcept:
    """Point iov[] (MINLOOP_IOV_MAX long) at the queue's unsent bytes; the
    number of entries used (0 for an empty queue)."""
    cdef Py_ssize_t count = len(queue)
    cdef Py_ssize_t i
    if count == 0:
        # The transports never flush an empty queue, but the compiler cannot
        # know that: without this, iov[0] would be read unset (gcc 16 warns).
        return 0
    if count > MINLOOP_IOV_MAX:
        count = MINLOOP_IOV_MAX
    # The first item less the `head` bytes already sent, then the rest whole.
    chunk = queue[0]
    iov[0].iov_base = PyBytes_AS_STRING(chunk) + head
    iov[0].iov_len = <size_t>(PyBytes_GET_SIZE(chunk) - head)
    for i in range(1, count):
        chunk = queue[i]
        iov[i].iov_base = PyBytes_AS_STRING(chunk)
        iov[i].iov_len = <size_t>PyBytes_GET_SIZE(chunk)
    return count


cdef inline void drop_sent(list queue, Py_ssize_t *head, Py_ssize_t *size,
                           Py_ssize_t sent, Py_ssize_t count):
    """Drop what went out of the first `count` items: whole items, then part
    of the next one."""
    cdef Py_ssize_t n = sent + head[0]
    cdef Py_ssize_t i = 0
    cdef Py_ssize_t length
    size[0] -= sent
    while i < count:
        length = PyBytes_GET_SIZE(queue[i])
        if n < length:
            break
        n -= length
        i += 1
    if i:
        del queue[:i]
    head[0] = n
