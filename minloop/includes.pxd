# C declarations: src/'s headers, then the system's and CPython's calls the
# modules make directly.  One place, so .pyx files cimport names, not headers,
# and each C name is declared once (handles.pxd and transport_bases.pxd
# declare the one header of their own unit).

from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport int64_t, uint64_t, uint32_t, int32_t


cdef extern from "timer_heap.h" nogil:
    ctypedef struct timer_heap:
        unsigned long long next_seq     # counts every push
    ctypedef int (*heap_sink)(void *ctx, void *item, double when) noexcept nogil
    void heap_init(timer_heap *h)
    void heap_free(timer_heap *h)
    int heap_push(timer_heap *h, double when, void *item, Py_ssize_t *pos)
    void *heap_peek(const timer_heap *h, double *when)
    void *heap_pop(timer_heap *h)
    void *heap_remove(timer_heap *h, size_t token)
    int heap_drain_due(timer_heap *h, double end, heap_sink sink, void *ctx)
    size_t heap_len(const timer_heap *h)
    size_t heap_capacity(const timer_heap *h)
    uint64_t heap_pushes(const timer_heap *h)
    uint64_t heap_removed(const timer_heap *h)
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
    # A PyMutex on free-threaded builds, nothing with the GIL: held for a
    # few stores and at most one malloc(), never around Python code.
    ctypedef struct xt_mutex:
        pass
    void xt_init(xt_mutex *l)
    void xt_lock(xt_mutex *l)
    void xt_unlock(xt_mutex *l)
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
    uint64_t fdt_watched(const fd_table *t)
    uint64_t fdt_watched_max(const fd_table *t)
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
    int fdt_grow(fd_table *t, int fd)
    int fdt_fired(fd_table *t, int fd, int events)
    int fdt_rearm(fd_table *t, poller *p, int fd, int which, const void *item)


# Allocations a test build fails on demand (src/alloc_faults.h): af_fails()
# is the constant 0 unless built with MINLOOP_ALLOC_FAULTS=1.
cdef extern from "alloc_faults.h" nogil:
    enum:
        MINLOOP_ALLOC_FAULTS_BUILT
        AF_TIMER_HEAP
        AF_READY_RING
        AF_FD_TABLE
        AF_READ_BUFFER
        AF_WRITE_QUEUE
    int af_fails(int site)
    void af_arm(int site, long skip, long fails)
    long af_failed(int site)


# The loop's telemetry (src/telemetry.h): recorded by loop.pyx, read by
# loop_metrics.pyx.  MINLOOP_TELEMETRY is 0 in a MINLOOP_NO_TELEMETRY build,
# where the recording functions are empty and the readers read zeros.
cdef extern from "telemetry.h" nogil:
    enum:
        MINLOOP_TELEMETRY
        TM_BUCKETS
    ctypedef struct tm_histogram:
        pass
    ctypedef struct tm_loop:
        pass
    ctypedef struct tm_counters:
        uint64_t callbacks, polls_skipped, polls_immediate, polls_blocked
        uint64_t fd_events, ready_max, timers_fired
        uint64_t timers_dropped, timers_max, exceptions
    ctypedef struct tm_hist_copy:
        uint64_t counts[TM_BUCKETS]
        uint64_t count
        double sum, min, max
    void tm_init(tm_loop *t)
    uint64_t tm_poll_skipped(tm_loop *t)
    void tm_fd_event(tm_loop *t)
    uint64_t tm_fd_events(const tm_loop *t)
    void tm_callback(tm_loop *t)
    void tm_batch(tm_loop *t, size_t ready)
    void tm_polling(tm_loop *t, uint64_t fds, size_t timers)
    void tm_poll_immediate(tm_loop *t)
    void tm_timers_pending(tm_loop *t, size_t live)
    void tm_timer_fired(tm_loop *t, double now, double when)
    void tm_timers_fired(tm_loop *t, double now, double first, double last)
    void tm_timers_dropped(tm_loop *t, size_t n)
    void tm_exception(tm_loop *t)
    void tm_run_begin(tm_loop *t, double now)
    void tm_run_end(tm_loop *t, double now)
    void tm_sleep_begin(tm_loop *t, double now)
    void tm_sleep_end(tm_loop *t, double now)
    void tm_read_counters(const tm_loop *t, tm_counters *out)
    void tm_read_held(const tm_loop *t, uint64_t *ready, uint64_t *timers, uint64_t *fds)
    void tm_read_clock(const tm_loop *t, double now, int64_t *elapsed, int64_t *idle)
    bint tm_stalled(const tm_loop *t)
    uint64_t tm_callbacks(const tm_loop *t)
    tm_histogram *tm_lag(tm_loop *t)
    tm_histogram *tm_busy(tm_loop *t)
    tm_histogram *tm_stall(tm_loop *t)
    void tm_hist_record(tm_histogram *h, double ns)
    void tm_hist_read(const tm_histogram *h, tm_hist_copy *out)
    void tm_hist_reset(tm_histogram *h)
    uint64_t tm_bucket_bound(unsigned i)
    unsigned tm_bucket(double ns)


# The page a loop's telemetry lives in, readable by another process
# (src/telemetry_page.h): made and freed by loop.pyx, noted in by stall.pyx,
# read by page_reader.pyx.
cdef extern from "telemetry_page.h" nogil:
    enum:
        TM_PAGE_SHARED
        TM_PAGE_CLOSED
        TM_NOTE_TEXT
        TM_THREAD_NAME
        TM_PAGE_SHAREABLE
    ctypedef struct tm_page:
        uint64_t loop_id
        uint32_t flags
        int32_t pid
        int32_t tid
        int32_t interp
        uint32_t map_size
        int64_t stall_threshold_ns
        tm_loop tm
    ctypedef struct tm_state:
        int64_t run_since, sleep_since, woke
        uint32_t seq
    tm_page *tm_page_of(tm_loop *t)
    tm_page *tm_page_open(int *fd)
    void tm_page_closed(tm_page *p, int *fd)
    void tm_page_free(tm_page *p, int *fd)
    void tm_page_after_fork(tm_page *p, int *fd)
    bint tm_page_run_by(tm_page *p, uint64_t key)
    void tm_page_thread_name(tm_page *p, const char *name)
    void tm_page_read_thread_name(const tm_page *p, char *name)
    void tm_page_note(tm_page *p, uint64_t callback_no, int64_t since,
                      const char *callback, const char *where)
    void tm_page_stall_threshold(tm_page *p, int64_t ns)
    int tm_page_check(const tm_page *p, size_t length)
    void tm_read_state(const tm_loop *t, tm_state *out)
    bint tm_page_read_note(const tm_page *p, uint64_t *callback_no, int64_t *since,
                           char *callback, char *where)


# The stall watchdog (src/stall.h): run by stall.pyx's thread.
cdef extern from "stall.h" nogil:
    ctypedef struct stall_watch:
        int64_t period_ns
        int64_t threshold_ns
        int64_t since
    int64_t stall_now_ns()
    int stall_init(stall_watch *w, tm_loop *tm, int64_t threshold_ns)
    void stall_destroy(stall_watch *w)
    void stall_after_fork(stall_watch *w)
    int stall_wait(stall_watch *w, uint64_t *callback)
    void stall_stop(stall_watch *w)
    bint stall_end(stall_watch *w, uint64_t cb, int64_t *since)
    bint stall_still_in(stall_watch *w, uint64_t cb)


cdef extern from "build_info.h":
    enum:
        MINLOOP_BUILD_OPTIMIZED
        MINLOOP_BUILD_ASSERTS
        MINLOOP_BUILD_ASAN
        MINLOOP_BUILD_LIBKQUEUE


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


cdef extern from "socket_object.h":
    # The head of CPython's socket object; see the header for why and how
    # it is checked (sock_ops.pyx, _probe_socket_layout()).
    ctypedef struct minloop_socket_head:
        int sock_fd
        long long sock_timeout


# LoopCore.call_soon's Python entry (loop.pyx installs it over its body).
cdef extern from "soon_method.h":
    ctypedef object (*soon_body)(object, object, object, object)
    int soon_method_install(object owner, const char *name, soon_body body,
                            const char *doc) except -1


# contextvars.Context's variables, read directly where this build knows its
# layout (handles.pyx confirms it at import time).
cdef extern from "context_layout.h":
    bint MINLOOP_KNOWN_CONTEXT_LAYOUT
    PyObject *minloop_context_vars(PyObject *ctx)
    PyObject *minloop_context_weakrefs(PyObject *ctx)
    Py_ssize_t MINLOOP_CONTEXT_WEAKREFS_OFFSET


# What differs by Python version or build (src/py_compat.h), one block:
# a class's version tag (0: none), which says it has not changed since;
# asyncio's StreamReader fed without its Python code (stream_reader.pyx):
# whether this build may, how it reads instance attributes, and the method
# lookup it relies on where it reads them by attribute access; whether a
# loop's instance dict is made only when a program sets an attribute.
cdef extern from "py_compat.h":
    unsigned int compat_type_version(object t)
    bint MINLOOP_FEEDS_STREAM_READERS
    bint MINLOOP_STEPS_STREAM_READERS
    bint MINLOOP_STEPS_STREAM_READS
    bint MINLOOP_READS_INSTANCE_DICT
    bint MINLOOP_LAZY_INSTANCE_DICT
    bint MINLOOP_SAMPLES_STACKS
    int compat_calls_class_function(object obj, object name, object func) except -1
    # References to objects another thread may be deallocating (the fd
    # table's owners).
    int minloop_try_incref(PyObject *op)
    void minloop_enable_try_incref(PyObject *op)


# --- The system's and CPython's own calls the .pyx files make directly ---
# (socket and pipe I/O without the socket and os modules; CPython's C API
# where Cython's own declarations lack it or do not fit.)


# Socket addresses and the datagram calls (datagram.pyx).
cdef extern from "sys/socket.h" nogil:
    ctypedef unsigned int socklen_t
    ctypedef unsigned short sa_family_t
    struct sockaddr:
        sa_family_t sa_family
    struct sockaddr_storage:
        sa_family_t ss_family
    int AF_INET
    int AF_INET6
    int MSG_DONTWAIT
    ssize_t c_recvfrom "recvfrom" (int fd, void *buf, size_t n, int flags,
                                   sockaddr *addr, socklen_t *addrlen)
    ssize_t c_sendto "sendto" (int fd, const void *buf, size_t n, int flags,
                               const sockaddr *addr, socklen_t addrlen)


# IPv4 and IPv6 addresses as the kernel takes them, and byte order
# (datagram.pyx converts numeric addresses itself).
cdef extern from "netinet/in.h" nogil:
    struct in_addr:
        pass
    struct in6_addr:
        pass
    struct sockaddr_in:
        sa_family_t sin_family
        unsigned short sin_port
        in_addr sin_addr
    struct sockaddr_in6:
        sa_family_t sin6_family
        unsigned short sin6_port
        unsigned int sin6_flowinfo
        in6_addr sin6_addr
        unsigned int sin6_scope_id
    unsigned short ntohs(unsigned short)
    unsigned short htons(unsigned short)
    unsigned int ntohl(unsigned int)
    unsigned int htonl(unsigned int)


# Numeric addresses to text and back, as the socket module converts them.
cdef extern from "arpa/inet.h" nogil:
    int INET6_ADDRSTRLEN
    const char *inet_ntop(int af, const void *src, char *dst, socklen_t size)
    int inet_pton(int af, const char *src, void *dst)


# Pipe I/O (pipes.pyx).
cdef extern from "unistd.h" nogil:
    ssize_t c_read "read" (int fd, void *buf, size_t n)
    ssize_t c_write "write" (int fd, const void *buf, size_t n)


# A pipe's queued buffers in one call (pipes.pyx; sockets use sendmsg).
cdef extern from "sys/uio.h" nogil:
    ssize_t c_writev "writev" (int fd, const iovec *iov, int iovcnt)


# Would-block errno values (oserrors.pxd).
cdef extern from "errno.h":
    int EWOULDBLOCK    # equal to EAGAIN on Linux, not everywhere


# CPython's C API where Cython's cpython/ declarations lack it or differ.
cdef extern from "Python.h":
    Py_ssize_t PY_SSIZE_T_MAX
    # The running interpreter's id (0: the main one): the telemetry page's
    # label of a sub-interpreter's loops.
    ctypedef struct PyInterpreterState
    PyInterpreterState *PyInterpreterState_Get()
    int64_t PyInterpreterState_GetID(PyInterpreterState *interp)
    # A new bytes object of n unset bytes, as a pointer we own (NULL v): it
    # is filled, then resized in place with _PyBytes_Resize (which wants the
    # only reference) before it becomes an object, as socket.recv() does.
    PyObject *PyBytes_FromStringAndSize_raw "PyBytes_FromStringAndSize"(
        const char *v, Py_ssize_t n) except NULL

    # Calls and strings on the datagram transport's address path.
    object PyObject_VectorcallMethod(object name, PyObject *const *args,
                                     size_t nargsf, PyObject *kwnames)
    # A handle's callback, called with the arguments it keeps, and entering
    # its context (handles.pyx): handle_run looks at a failure itself, so
    # these give the result or NULL (-1) with the exception set, no check
    # made by Cython.
    PyObject *PyObject_Vectorcall_raw "PyObject_Vectorcall"(
        object callable, PyObject **args, size_t nargsf, PyObject *kwnames)
    PyObject *PyObject_Call_raw "PyObject_Call"(object callable, object args,
                                                PyObject *kwargs)
    PyObject *PySequence_Tuple_raw "PySequence_Tuple"(object o)
    int PyContext_Enter_raw "PyContext_Enter"(object ctx)
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL

    # strerror()'s text as os.strerror() decodes it (oserrors.pxd).
    object PyUnicode_DecodeLocale(const char *s, const char *errors)

    # What a class has under a name, through its MRO, without running any
    # descriptor (borrowed, NULL for nothing), and the lookup an instance
    # attribute takes when nobody changed it (stream_reader.pyx).
    PyObject *_PyType_Lookup(PyTypeObject *type, object name)
    ctypedef PyObject *(*getattrofunc)(PyObject *, PyObject *)
    ctypedef struct getattro_type "PyTypeObject":
        getattrofunc tp_getattro
    PyObject *generic_getattr "PyObject_GenericGetAttr"(PyObject *, PyObject *)
    # ... and the assignment one.
    ctypedef int (*setattrofunc)(PyObject *, PyObject *, PyObject *)
    ctypedef struct setattro_type "PyTypeObject":
        setattrofunc tp_setattro
    int generic_setattr "PyObject_GenericSetAttr"(PyObject *, PyObject *, PyObject *)

    # CPython's thread state (cpython/pystate.h): the current context.
    ctypedef struct PyThreadState:
        PyObject *context
    PyThreadState *PyThreadState_Get()
    unsigned long PyThread_get_thread_ident()

    # The cycle collector's tracking: the loop's containers untrack the
    # handles they hold (handles.pxd).
    int PyObject_GC_IsTracked(object o)
    void PyObject_GC_Track(void *o)
    void PyObject_GC_UnTrack(void *o)

    # Our own view of the two type slots the loop extends (loop.pyx's
    # _install_gc_hooks): Cython's stock declarations carry exception
    # semantics we do not want.
    ctypedef int (*gc_visitproc "visitproc")(PyObject *, void *) noexcept
    ctypedef int (*gc_traverseproc "traverseproc")(PyObject *, gc_visitproc,
                                                   void *) noexcept
    ctypedef int (*gc_inquiry "inquiry")(PyObject *) noexcept
    ctypedef struct gc_type "PyTypeObject":
        gc_traverseproc tp_traverse
        gc_inquiry tp_clear


cdef inline long arm_alloc_faults(str site, long skip, long fails) except -1:
    """The test build's switch for this module's copy of the allocation
    sites (src/alloc_faults.h): the failures at `site` since it was last
    armed; then, if skip >= 0, arms it to let `skip` through and fail the
    `fails` after them."""
    cdef int i
    if not MINLOOP_ALLOC_FAULTS_BUILT:
        raise RuntimeError("minloop was built without MINLOOP_ALLOC_FAULTS=1")
    i = ("timer_heap", "ready_ring", "fd_table", "read_buffer", "write_queue").index(site)
    cdef long failed = af_failed(i)
    if skip >= 0:
        af_arm(i, skip, fails)
    return failed
