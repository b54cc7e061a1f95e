# cython: freethreading_compatible=True
"""loop._selector: asyncio's selector, as a read-only view of the fd table.

asyncio's selector loop keeps its readers and writers in a `selectors`
selector, reachable as `loop._selector`, and code outside the loop reads it:
asyncio's pipe transports' __repr__ asks whether their fd is polled
(selector_events._test_selector_event), CPython's tests whether an fd is
still registered.  minloop has no selector: its fd table (src/fd_table.h,
"The fd table and the kernel") holds each fd's reader and writer.
FdTableView answers a selector's questions from that table:

- an fd with a reader or a writer is registered, with EVENT_READ and/or
  EVENT_WRITE, and `data` is (reader handle, writer handle), as asyncio's;
- `fileobj` is the object add_reader()/add_writer() were given when it was
  not an int (the table keeps it, so that a socket closed since can still be
  found), else the fd;
- get_key() is selectors.BaseSelector's: KeyError "... is not registered"
  where nothing is, ValueError for an invalid file object (a closed socket
  that was never registered), RuntimeError once the loop is closed;
- it is read-only.  register(), unregister(), modify() and select() raise
  NotImplementedError: the loop's add_reader()/remove_reader() (and the
  transports, through the loop) change the table, and only the loop polls.

What differs from asyncio's selector: a view is made on each access to
`loop._selector` (so two accesses give two views of the same table), and
its keys are made when asked for, so they are snapshots.
"""

import selectors as _selectors
from collections.abc import Mapping as _Mapping

from .includes cimport POLLER_READ, POLLER_WRITE, fdt_get, fdt_idle, fdt_size
from .loop cimport LoopCore, check_loop_thread


cdef object _SelectorKey = _selectors.SelectorKey
cdef int _EVENT_READ = _selectors.EVENT_READ
cdef int _EVENT_WRITE = _selectors.EVENT_WRITE


cdef object _key(LoopCore core, int fd):
    """fd's SelectorKey, or None if it has neither a reader nor a writer."""
    check_loop_thread(core)   # the handles are the loop's thread's to hold
    cdef void *reader = fdt_get(&core._fd_table, fd, POLLER_READ)
    cdef void *writer = fdt_get(&core._fd_table, fd, POLLER_WRITE)
    if reader == NULL and writer == NULL:
        return None
    events = ((_EVENT_READ if reader != NULL else 0)
              | (_EVENT_WRITE if writer != NULL else 0))
    data = (<object>reader if reader != NULL else None,
            <object>writer if writer != NULL else None)
    return _SelectorKey(core._fd_objects.get(fd, fd), fd, events, data)


cdef list _registered_fds(LoopCore core):
    """The fds with a reader or a writer, in ascending order."""
    cdef int fd
    check_loop_thread(core)
    # Every registered fd is below the table's size.
    return [fd for fd in range(fdt_size(&core._fd_table))
            if not fdt_idle(&core._fd_table, fd)]


class _FdTableMapping(_Mapping):
    """get_map(): registered fd -> SelectorKey; indexed by file object or fd,
    as selectors' mapping is."""

    __slots__ = ('_core',)

    def __init__(self, LoopCore core):
        self._core = core

    def __len__(self):
        return len(_registered_fds(self._core))

    def __iter__(self):
        return iter(_registered_fds(self._core))

    def __getitem__(self, fileobj):
        cdef LoopCore core = self._core
        # An int, an object's fileno(), or the registered object itself
        # (closed since): a selector's _fileobj_lookup.
        key = _key(core, core._lookup_fd(fileobj))
        if key is None:
            raise KeyError(fileobj)
        return key


class FdTableView(_selectors.BaseSelector):
    """A read-only selector over a minloop loop's fd table (see the module
    docstring): what `loop._selector` is on minloop."""

    def __init__(self, LoopCore core):
        self._core = core

    def __repr__(self):
        return f'<{type(self).__name__} of {self._core!r}>'

    def get_map(self):
        """registered fd -> SelectorKey; None once the loop is closed."""
        cdef LoopCore core = self._core
        if core._closed:
            return None
        return _FdTableMapping(core)

    def register(self, fileobj, events, data=None):
        raise NotImplementedError(
            'the fd table is read-only through loop._selector: '
            'use loop.add_reader() or loop.add_writer()')

    def unregister(self, fileobj):
        raise NotImplementedError(
            'the fd table is read-only through loop._selector: '
            'use loop.remove_reader() or loop.remove_writer()')

    def modify(self, fileobj, events, data=None):
        raise NotImplementedError(
            'the fd table is read-only through loop._selector: '
            'use the loop\'s add_reader()/remove_reader() and '
            'add_writer()/remove_writer()')

    def select(self, timeout=None):
        raise NotImplementedError('only the loop polls its fd table')
