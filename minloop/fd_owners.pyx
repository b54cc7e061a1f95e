# cython: freethreading_compatible=True
# cython: binding=True
# (binding: the two functions below are bound on Loop as its methods.)
"""loop._transports: fd -> transport, as asyncio's WeakValueDictionary
answers it, over the fd table's owners and the other transports
(fd_owners.pxd says how the two are kept); and asyncio's
_ensure_fd_no_transport() check over it.  base_events.Loop binds both."""

from collections.abc import MutableMapping as _MutableMapping

from .includes cimport fdt_owner, fdt_size
from .loop cimport LoopCore, check_loop_thread, fileobj_fd
from .fd_owners cimport other_transports, transport_of, forget_owner


class TransportMap(_MutableMapping):
    """loop._transports.  A view: it holds nothing itself."""

    __slots__ = ('_core',)

    def __init__(self, core):
        self._core = core

    def __getitem__(self, fd):
        transport = transport_of(<LoopCore>self._core, fd)
        if transport is None:
            return {}[fd]   # a dict's error: KeyError, or TypeError if unhashable
        return transport

    def __setitem__(self, fd, transport):
        cdef LoopCore core = <LoopCore>self._core
        check_loop_thread(core)
        # Never into the fd table: only a transport that lets go of the
        # slot itself may be named there.  What it named for fd is replaced.
        other_transports(core)[fd] = transport
        forget_owner(core, fd)

    def __delitem__(self, fd):
        cdef LoopCore core = <LoopCore>self._core
        check_loop_thread(core)
        if forget_owner(core, fd):
            return
        if core._other_transports is None:
            del {}[fd]   # KeyError, as a dict raises it
        del core._other_transports[fd]

    def __iter__(self):
        cdef LoopCore core = <LoopCore>self._core
        cdef int fd = 0
        # Asked again at each step: the table may change in between.
        while fd < fdt_size(&core._fd_table):
            if fdt_owner(&core._fd_table, fd) != NULL:
                yield fd
            fd += 1
        if core._other_transports is not None:
            yield from list(core._other_transports.keys())

    def __len__(self):
        cdef LoopCore core = <LoopCore>self._core
        cdef int fd
        cdef Py_ssize_t n = 0
        for fd in range(fdt_size(&core._fd_table)):
            if fdt_owner(&core._fd_table, fd) != NULL:
                n += 1
        if core._other_transports is not None:
            n += len(core._other_transports)
        return n

    def __repr__(self):
        return f'<{type(self).__name__} {dict(self.items())!r}>'


def _transports(self):
    """fd -> the transport using it (asyncio's loop._transports): a mapping
    over the loop's fd table.  Loop's property."""
    return TransportMap(self)


def _ensure_fd_no_transport(self, fd):
    """asyncio's selector loop's check, over loop._transports: fd must not
    be a transport's (unless that one is closing).  Loop's method; a
    subclass may replace it (then add_reader() and the sock_* methods call
    the subclass's: sock_ops.pyx)."""
    transport = transport_of(<LoopCore?>self, fileobj_fd(fd))
    if transport is not None and not transport.is_closing():
        raise RuntimeError(
            f'File descriptor {fd!r} is used by transport '
            f'{transport!r}')
