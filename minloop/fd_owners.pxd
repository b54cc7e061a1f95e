# Which transport owns which fd: asyncio's loop._transports.
#
# asyncio keeps fd -> transport in a WeakValueDictionary, so that
# add_reader() and the sock_* methods refuse a live transport's fd: a weak
# reference and a dict entry per connection.  Here the stream transport is
# named in its fd's slot of the loop's fd table instead (a borrowed pointer:
# src/fd_table.h, "Owners"); the few others (datagram transports, what code
# stores through the mapping) go to a WeakValueDictionary as before
# (LoopCore._other_transports).  loop._transports (fd_owners.pyx's
# TransportMap) is a mapping over both, with asyncio's meaning: a transport
# stays in it while it lives (closed or not), until a newer one takes its
# fd number.
#
# The functions are inline: the loop, the stream transport and the sock_*
# operations compile them in (a module of functions they would import at
# run time would have to import the loop module first, which imports them).
# The owner pointers are also written from other threads (a transport dies
# where the collector finalizes it): every access to them, and the growth
# of the table (LoopCore._reserve_fd), is under LoopCore._owners_lock
# (docs/threading.md, item 15).  The other threads' entry, disown_fd(), is
# pure C.  (The table's C code links into the loop's module alone, so the
# growth stays a method of the loop.)

from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF

from .includes cimport (fdt_size, fdt_owner, fdt_set_owner, fdt_disown, xt_lock,
                        xt_unlock, minloop_try_incref, minloop_enable_try_incref)
from .loop cimport LoopCore, check_loop_thread


cdef inline object other_transports(LoopCore core):
    """The WeakValueDictionary of the transports that are not the fd
    table's owners, made on first use."""
    if core._other_transports is None:
        import weakref
        core._other_transports = weakref.WeakValueDictionary()
    return core._other_transports


cdef inline int own_fd(LoopCore core, int fd, object transport) except -1:
    """loop._transports[fd] = transport, for a transport that calls
    disown_fd() before it dies (the stream transport's __dealloc__)."""
    check_loop_thread(core)
    if fd < 0:
        # A closed socket's -1: asyncio's dict takes it; so does ours.
        other_transports(core)[fd] = transport
        return 0
    core._reserve_fd(fd)
    # Before it is published: transport_of() may have to take a reference
    # while another thread deallocates it.
    minloop_enable_try_incref(<PyObject *>transport)
    xt_lock(&core._owners_lock)
    fdt_set_owner(&core._fd_table, fd, <void *>transport)
    xt_unlock(&core._owners_lock)
    if core._other_transports is not None:
        core._other_transports.pop(fd, None)
    return 0


cdef inline bint owns_fd(LoopCore core, int fd, object transport) noexcept:
    """Whether transport is named as fd's owner (on the loop's thread)."""
    return fdt_owner(&core._fd_table, fd) == <void *>transport


cdef inline void disown_fd(LoopCore core, int fd, object transport) noexcept:
    """transport is dying: forget it as fd's owner, if it still is.  Any
    thread: the collector finalizes in the thread that collects."""
    xt_lock(&core._owners_lock)
    fdt_disown(&core._fd_table, fd, <void *>transport)
    xt_unlock(&core._owners_lock)


cdef inline object transport_of(LoopCore core, object fd):
    """loop._transports.get(fd): the fd table's owner, or else the other
    transports' entry, or None."""
    cdef void *owner
    cdef bint held = False
    check_loop_thread(core)
    if isinstance(fd, int) and 0 <= fd < fdt_size(&core._fd_table):
        # The owner may be dying in another thread, its count at zero and
        # its disown_fd() waiting for the lock: a reference is taken only
        # from a count that has not reached zero.
        xt_lock(&core._owners_lock)
        owner = fdt_owner(&core._fd_table, <int>fd)
        if owner != NULL:
            held = minloop_try_incref(<PyObject *>owner)
        xt_unlock(&core._owners_lock)
        if held:
            transport = <object>owner
            Py_DECREF(transport)   # try_incref's; `transport` has its own
            return transport
    if core._other_transports is not None:
        return core._other_transports.get(fd)
    return None


cdef inline bint forget_owner(LoopCore core, object fd):
    """Clear fd's owner in core's fd table; whether it had one."""
    cdef bint had = False
    if isinstance(fd, int) and 0 <= fd < fdt_size(&core._fd_table):
        xt_lock(&core._owners_lock)
        had = fdt_owner(&core._fd_table, <int>fd) != NULL
        if had:
            fdt_set_owner(&core._fd_table, <int>fd, NULL)
        xt_unlock(&core._owners_lock)
    return had
