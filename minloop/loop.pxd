from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from libc.stdint cimport int64_t

from .includes cimport (timer_heap, ready_ring, poller, poller_event, wakeup_fds,
                        fd_table, xt_mutex, fdt_get, ring_len, POLLER_READ, XT_GUARD_THREADS,
                        xt_load_int, xt_load_int_acquire, xt_load_ulong,
                        PyThread_get_thread_ident,
                        tm_loop, ring_push)
from .handles cimport Handle, TimerHandle


# What the loop calls, as a batch of callbacks ends, for each transport that
# asked it to (schedule_flush): send the writes the batch made.  The stream
# transport's module registers its own once, as it is imported
# (set_write_flusher); no other module holds writes.
ctypedef int (*write_flusher)(object transport) except -1


# Write coalescing (stream.pyx): the loop's half.  The transport decides
# what to hold and for how long; the loop keeps the state below, and a
# transport reaches it only through the hooks at the end of this file.
# `first`, `rest`: the transports holding the writes of the running batch
# of callbacks, to send each one's in one writev as the batch ends, or as
# its callbacks carried over from the last iteration do
# (LoopCore._flush_writes): the first in `first`, any others in `rest`
# after it (`first` is NULL only while `rest` is empty); each with a
# reference.  Added to by schedule_flush(), emptied by the loop.
# `in_callback`: a callback of _run_iteration() is running (on the loop's
# thread), so its writes may wait for the batch's end.  `callback_seq`:
# counts the callbacks run, so that a transport knows whether what it holds
# was written by the running callback or an earlier one.  Both written by
# the loop alone (_run_batch).  `flush_after_callback`: a transport holds a
# large write, to go out as the running callback returns
# (flush_after_callback()); the loop clears it as it does so.  Only the
# loop's thread writes them.
cdef struct write_flushes:
    PyObject *first
    ready_ring rest
    bint in_callback
    size_t callback_seq
    bint flush_after_callback


cdef class LoopCore:
    cdef:
        ready_ring _ready
        # Handles that ran while the program holds them too, kept for one
        # more iteration before they are tracked again (see _release_ran).
        # Index _released_now takes this iteration's.
        ready_ring _released[2]
        int _released_now
        timer_heap _timers
        poller _poller
        poller_event *_events
        wakeup_fds _wakeup
        # fd -> reader, writer and the kernel's registration (src/fd_table.h,
        # "The fd table and the kernel").  It owns a reference to each
        # handle in it.  Others ask through fd_watched() below.
        fd_table _fd_table
        # Held where the table's owner pointers meet other threads: a
        # transport disowns its slot when it dies, in whatever thread the
        # collector finalizes it (docs/threading.md, item 15).  Taken
        # around that, the owner writes, the reads that take a reference,
        # and the reallocation of the table (_reserve_fd).
        xt_mutex _owners_lock
        # What the loop counts and times about itself (src/telemetry.h):
        # loop.stats(), utilization(), lag, iteration_time.  Also the
        # skipped polls (they pace the signal checks) and the fd events.
        # In a page of its own that `python -m minloop top` maps from
        # another process (src/telemetry_page.h); _page_fd is its memfd
        # (-1: heap memory, or closed).  Never NULL once made.
        tm_loop *_tm
        int _page_fd
        # The armed stall watchdog (stall.pyx's StallWatch) or None; its
        # flag for the loop is in _tm (tm_stalled).  Swapped under
        # _stall_lock (nothing with the GIL), read under it when a flag
        # is seen.
        object _stall
        xt_mutex _stall_lock
        # _debug or _stall armed: what each callback must do besides run
        # (_run_iteration), tested as one word so that neither costs an
        # instruction per callback while off.
        bint _callback_hooks
        # Set in a forked child: the poller and the wake-up fd are still
        # the parent's, to be replaced before the child uses them.
        bint _forked
        # Interest changes made in the poller (for tests; the wake-up
        # writes made by call_soon_threadsafe are counted by the ready ring,
        # the property _wakeups_sent).
        readonly unsigned long _poller_changes
        # asyncio's loop._transports for transports that are not the fd
        # table's owners (the datagram transport, anything stored through
        # the _transports mapping): a WeakValueDictionary, None until then
        # (fd_owners.pxd keeps it and the owners).
        object _other_transports
        # Non-int objects passed to add_reader/add_writer, by fd, so that
        # remove_reader(sock) still finds a socket closed in the meantime.
        dict _fd_objects
        # READ_SIZE bytes every transport of this loop reads into (NULL
        # until the first read; see lifecycle.read_buffer).
        char *_read_buffer
        # The transports holding the running callback's writes (above).
        write_flushes _flushes

        # _closed, _stopping, _running, _debug and _thread_ident are read or
        # written by other threads (call_soon_threadsafe, is_running, stop,
        # set_debug, the thread check): through xt_store_*/xt_load_*
        # (cross_thread.h: plain accesses with the GIL) in loop.pyx and in
        # the Python attributes of the same names; the transports' reads of
        # _debug on the loop's thread are plain (docs/threading.md, 12).
        # Whether the consumer sleeps (and so whether a producer must write
        # to the wake-up fd) is the ready ring's own flag, tested and set
        # under its lock.
        bint _closed
        bint _stopping
        bint _running
        bint _debug
        public object _task_factory
        unsigned long _thread_ident
        # asyncio's attribute: a timer due less than this from now runs
        # in the current iteration.
        public double _clock_resolution
        public double slow_callback_duration
        public object _current_handle
        # The instance dict at a fixed offset, rather than the managed one a
        # Python subclass would add: the interpreter specialises a method
        # lookup such as `loop.call_soon` on such an instance (3.11: while
        # the dict is made and unchanged; 3.12+: while it is not made, see
        # __cinit__), and on a managed one 3.12 never does.  base_events.Loop
        # keeps its own attributes in slots, so the dict stays as it is
        # until a program sets an attribute of its own.
        dict __dict__

    cdef int _check_callback_fast(self, object callback, str method) except -1
    cdef int _push_ready(self, Handle handle) except -1
    cdef int _check_push(self, Handle handle, int rc) except -1
    cdef int _push_threadsafe(self, Handle handle) except -1
    cdef int _run_iteration(self) except -1
    cdef int _poll(self, int64_t timeout_ns, double *now) except -1
    cdef int _run_ready(self, Handle handle) except -1
    cdef void _update_callback_hooks(self) noexcept
    cdef object _stall_swap(self, object watch)
    cdef int _stall_ended(self, Handle handle) except -1
    cdef int _flush_writes(self) except -1
    cdef void _drop_flushes(self) noexcept
    cdef void _release_ran(self, Handle handle) noexcept
    cdef void _drop_released(self, ready_ring *ring) noexcept
    cdef _call_at(self, double when, object callback, tuple args,
                  object context, str method)
    cdef int _fileobj_to_fd(self, object fileobj) except -1
    cdef int _lookup_fd(self, object fileobj) except -2
    cdef Handle _add_fd_handle(self, object fd, int which, object callback,
                               tuple args, object context)
    cdef bint _remove_fd_handle(self, object fd, int which) except -1
    cdef Handle _add_oneshot_handle(self, int fd, int which, object callback)
    cdef int _rearm_oneshot(self, int fd, int which, Handle handle) except -1
    cdef int _remove_oneshot(self, int fd, int which, Handle handle) except -1
    cdef int _reserve_fd(self, int fd) except -1
    cdef int _open_kernel_objects(self) except -1
    cdef int _reopen_after_fork(self) except -1
    cdef void _release_poller(self)
    cdef int _set_interest(self, int fd, int mask) except -1
    cdef object _set_fd_handle(self, int fd, int which, Handle handle,
                               bint oneshot=*)
    cdef void _clear_timers(self)
    cdef void _clear_ready(self)
    cdef void _clear_fd_table(self)


cdef inline object fileobj_fd(object fileobj):
    """fileobj's fd: an int as it is, else int(fileobj.fileno()); the
    ValueError of selectors._fileobj_to_fd (asyncio's) for anything else.
    (The fd-taking entries' and fd_owners.pyx's _ensure_fd_no_transport's.)"""
    if isinstance(fileobj, int):
        return fileobj
    try:
        return int(fileobj.fileno())
    except (AttributeError, TypeError, ValueError):
        raise ValueError(f"Invalid file object: {fileobj!r}") from None


# The thread check: asyncio's _check_thread(), which its loop makes in debug
# mode, and on a free-threaded build also the guard of the entries that
# reach loop-thread-only C state (the fd table, the transports' write
# queues): docs/threading.md, item 8.  The one check; LoopCore._check_thread
# is its Python face.

cdef inline int check_loop_thread(object loop, bint debug=False) except -1:
    """Refuse a thread other than the one running `loop` (asyncio's debug-mode
    RuntimeError), if `debug` (asyncio's check), or always on a free-threaded
    build, where such a call races the loop's C structures.  With the GIL
    and without `debug`, XT_GUARD_THREADS is 0 and the C compiler drops the
    call: asyncio does not check these entries, and with the GIL they are
    merely racy, as asyncio's are.  `loop` may be any object: only
    minloop's loops are checked (None, or another kind of loop under TLS,
    passes)."""
    if (XT_GUARD_THREADS or debug) and isinstance(loop, LoopCore):
        # From any thread: the acquire load of _running pairs with the
        # release store in run_forever(), so a thread that sees the loop
        # running sees the ident of the thread that runs it.
        if (xt_load_int_acquire(&(<LoopCore>loop)._running) and
                PyThread_get_thread_ident()
                != xt_load_ulong(&(<LoopCore>loop)._thread_ident)):
            raise RuntimeError(
                "Non-thread-safe operation invoked on an event loop other "
                "than the current one")
    return 0


# The fd table's answer for transports and servers (inline: it compiles
# into their own code).

cdef inline bint fd_watched(LoopCore core, int fd, int which) noexcept:
    """core's fd table has a reader (which == POLLER_READ) or a writer
    (POLLER_WRITE) for fd.  Any fd may be asked (-1: False); a closed loop
    watches nothing.  core must not be None."""
    return fdt_get(&core._fd_table, fd, which) != NULL


# Reading on after an event, as if it were the next one (datagram.pyx's
# _read_ready says why).

cdef inline unsigned long long timers_scheduled(LoopCore core) noexcept:
    """How many timers core has ever scheduled: compare two answers."""
    return core._timers.next_seq


cdef inline bint nothing_runs_before_next_read(LoopCore core, int fd,
                                               unsigned long long timers_seen) noexcept:
    """Nothing can run on core before fd's reader would run again: no
    callback is ready, no timer was scheduled since timers_scheduled() said
    `timers_seen` (a call_later(0) would be due first), the loop is not
    stopping, nor in debug mode (where asyncio times each wake-up as a
    callback of its own), and fd still has its reader."""
    if (xt_load_int(&core._debug) or xt_load_int(&core._stopping) or
            ring_len(&core._ready) != 0):
        return False
    return core._timers.next_seq == timers_seen and fd_watched(core, fd, POLLER_READ)


# Write coalescing (stream.pyx says why): the writes a batch of callbacks
# makes to a transport wait for the batch to end, and leave in one go.  The
# hooks a transport holds writes by (the loop's state is write_flushes,
# above).  They take the loop as a borrowed pointer, `core`: passed as a
# LoopCore, self._core costs the transport's write path a reference taken
# and dropped per call (Cython's, around the call).

cdef void set_write_flusher(write_flusher flusher) noexcept


cdef inline bint writes_can_wait(PyObject *core) noexcept:
    """Writes made now may wait: a callback of core is running.  (Not
    while the loop is not running: nothing would send them, and a program
    writing between run_until_complete() calls may block reading the peer
    next.  Nor from another thread while the loop sleeps in the poller.)"""
    return (<LoopCore>core)._flushes.in_callback


cdef inline size_t running_callback(PyObject *core) noexcept:
    """The running callback's number: a later callback's differs
    (callback_ran_since)."""
    return (<LoopCore>core)._flushes.callback_seq


cdef inline bint callback_ran_since(PyObject *core, size_t seq) noexcept:
    """A callback of core's runs on this thread, and it is not the one
    that running_callback() named `seq`.  (Any thread may ask: another
    thread's answer is False.)"""
    return ((<LoopCore>core)._flushes.in_callback
            and seq != (<LoopCore>core)._flushes.callback_seq
            and PyThread_get_thread_ident()
            == xt_load_ulong(&(<LoopCore>core)._thread_ident))


cdef inline bint schedule_flush(PyObject *core, object transport) noexcept:
    """Have the registered write_flusher called on `transport` as the
    running batch of callbacks ends; False if there is no memory to note
    it (then send now)."""
    cdef write_flushes *flushes = &(<LoopCore>core)._flushes
    if flushes.first == NULL:
        flushes.first = <PyObject *>transport
    elif ring_push(&flushes.rest, <void *>transport) < 0:
        return False
    Py_INCREF(transport)
    return True


cdef inline void flush_after_callback(PyObject *core) noexcept:
    """What the transports hold leaves as the running callback returns,
    not as the batch ends (a large write: stream.pyx's
    _HOLD_TO_BATCH_END)."""
    (<LoopCore>core)._flushes.flush_after_callback = True
