# C declarations of src/: one place, so .pyx files cimport names, not headers.

from cpython.object cimport PyObject
from libc.stdint cimport int64_t, uint64_t


cdef extern from "timer_heap.h" nogil:
    ctypedef struct timer_heap:
        unsigned long long next_seq     # counts every push
    void heap_init(timer_heap *h)
    void heap_free(timer_heap *h)
    int heap_push(timer_heap *h, double when, void *item, Py_ssize_t *pos)
    void *heap_peek(const timer_heap *h, double *when)
    void *heap_pop(timer_heap *h)
    void *heap_remove(timer_heap *h, size_t i)
    size_t heap_len(const timer_heap *h)
    size_t heap_capacity(const timer_heap *h)
    void *heap_item_at(const timer_heap *h, size_t i)


cdef extern from "ready_ring.h" nogil:
    ctypedef struct ready_ring:
        pass
    void ring_init(ready_ring *r)
    void ring_free(ready_ring *r)
    int ring_push(ready_ring *r, void *item)
    int ring_push_wake(ready_ring *r, void *item)
    int ring_wake_begin(ready_ring *r)
    void ring_woken(ready_ring *r)
    void *ring_pop(ready_ring *r)
    size_t ring_len(const ready_ring *r)
    int ring_sleep(ready_ring *r)
    void ring_awake(ready_ring *r)
    void ring_after_fork(ready_ring *r)
    unsigned long ring_wakeups(ready_ring *r)
    void *ring_at(const ready_ring *r, size_t i)

# Not nogil: on a free-threaded build it detaches from the interpreter while
# it waits, so it needs the interpreter attached (Cython refuses a call to
# it inside `with nogil`).
cdef extern from "ready_ring.h":
    void ring_close(ready_ring *r)


# Flags the loop's thread writes and other threads read (docs/threading.md,
# item 12): relaxed atomics where threads run at once, plain accesses with
# the GIL.  XT_GUARD_THREADS: 1 on a free-threaded build.
cdef extern from "cross_thread.h" nogil:
    enum:
        XT_GUARD_THREADS
    bint xt_load_int(const bint *p)
    void xt_store_int(bint *p, bint v)
    bint xt_load_int_acquire(const bint *p)
    void xt_store_int_release(bint *p, bint v)
    unsigned long xt_load_ulong(const unsigned long *p)
    void xt_store_ulong(unsigned long *p, unsigned long v)


cdef extern from "poller.h" nogil:
    enum:
        POLLER_READ
        POLLER_WRITE
        POLLER_ONESHOT
        POLLER_DISARMED
    ctypedef struct poller_event:
        int fd
        int events
    ctypedef struct poller:
        int fd
        int bufsize
    const char *poller_backend()
    int poller_probe_pwait2()
    int poller_open(poller *p, int max_events)
    void poller_close(poller *p)
    void poller_forget_after_fork(poller *p)
    int poller_modify(poller *p, int fd, int old_mask, int new_mask)
    int poller_wait(poller *p, poller_event *out, int64_t timeout_ns)


cdef extern from "fd_table.h" nogil:
    # Its fields are the unit's own: ask through the functions.
    ctypedef struct fd_table:
        pass
    void fdt_init(fd_table *t)
    void fdt_free(fd_table *t)
    int fdt_after_fork(fd_table *t, poller *p)
    void *fdt_drain(fd_table *t, int *cursor)
    int fdt_size(const fd_table *t)
    int fdt_armed(const fd_table *t)
    void *fdt_get(const fd_table *t, int fd, int which)
    void *fdt_item(const fd_table *t, int fd, int which)
    int fdt_has(const fd_table *t, int fd)
    int fdt_idle(const fd_table *t, int fd)
    int fdt_mask(const fd_table *t, int fd)
    int fdt_oneshot(const fd_table *t, int fd)
    void *fdt_owner(const fd_table *t, int fd)
    void fdt_set_owner(fd_table *t, int fd, void *owner)
    void fdt_disown(fd_table *t, int fd, const void *owner)
    int fdt_set_interest(fd_table *t, poller *p, int fd, int mask)
    int fdt_install(fd_table *t, poller *p, int fd, int which,
                    void *item, int oneshot, void **old)
    int fdt_reserve(fd_table *t, int fd)
    int fdt_fired(fd_table *t, int fd, int events)
    int fdt_rearm(fd_table *t, poller *p, int fd, int which, const void *item)


cdef extern from "build_info.h":
    enum:
        MINLOOP_BUILD_OPTIMIZED
        MINLOOP_BUILD_ASSERTS
        MINLOOP_BUILD_ASAN


cdef extern from "wakeup.h" nogil:
    ctypedef struct wakeup_fds:
        int read_fd
        int write_fd
    int wakeup_open(wakeup_fds *w)
    void wakeup_close(wakeup_fds *w)
    void wakeup_signal(const wakeup_fds *w)
    void wakeup_drain(const wakeup_fds *w)


cdef extern from "monotonic.h" nogil:
    double monotonic_now()


cdef extern from "net_compat.h" nogil:
    enum:
        MSG_NOSIGNAL
        MINLOOP_IOV_MAX
    struct iovec:
        void *iov_base
        size_t iov_len
    struct msghdr:
        void *msg_name
        unsigned int msg_namelen
        iovec *msg_iov
        size_t msg_iovlen
        void *msg_control
        size_t msg_controllen
        int msg_flags
    ssize_t recv(int fd, void *buf, size_t n, int flags)
    ssize_t send(int fd, const void *buf, size_t n, int flags)
    ssize_t sendmsg(int fd, const msghdr *msg, int flags)


# --- The system's and CPython's own calls the .pyx files make directly ---
# (recv/send without the socket module; a bytes object as a pointer we own.)


cdef extern from "sys/socket.h" nogil:
    ssize_t c_recv "recv"(int fd, void *buf, size_t n, int flags)
    ssize_t c_send "send"(int fd, const void *buf, size_t n, int flags)


cdef extern from "Python.h":
    Py_ssize_t PY_SSIZE_T_MAX
    # A new bytes object of n unset bytes, as a pointer we own (NULL v): it
    # is filled, then resized in place with _PyBytes_Resize (which wants the
    # only reference) before it becomes an object, as socket.recv() does.
    PyObject *PyBytes_FromStringAndSize_raw "PyBytes_FromStringAndSize"(
        const char *v, Py_ssize_t n) except NULL
