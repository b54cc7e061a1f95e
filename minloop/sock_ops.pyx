# cython: freethreading_compatible=True
# cython: binding=True
"""The loop's sock_* coroutines, compiled.

Each follows asyncio's selector loop (Lib/asyncio/selector_events.py) step
for step: the syscall first; only when it would block, a future and a reader
or writer on the fd whose callback retries the syscall; the reader or writer
is removed when the operation ends, however it ends.  Errors, their types
and their messages are asyncio's.

They are module-level functions compiled with binding=True, so that
base_events.py can assign them as methods of Loop; `self` is the loop.

Where it is fast, and why that keeps asyncio's semantics:

- The coroutine returns at once when the syscall succeeds: no future, no
  trip through the loop (asyncio's does the same; it only costs less here).
- For a plain, non-blocking `socket.socket` (the exact type, so mocks and
  subclasses go through their methods), recv, recv_into and send are called
  on the fd directly.  That is what the socket's own methods do for a socket
  whose timeout is 0 (one call, retried on EINTR, errno turned into OSError
  with PyErr_SetFromErrno), minus the BlockingIOError that asyncio would
  raise and catch: building that exception costs more than the syscall.
- asyncio removes the reader or writer in a done callback of the future,
  which costs a context copy and one more handle per operation.  Here the
  retrying callback removes it before it completes the future, and the
  coroutine removes it when it leaves its `await` otherwise (cancelled, or
  closed unfinished).  Both run before any code that awaits the operation
  can observe the fd, as asyncio's done callback does.  Like asyncio, it is
  removed only if it is still ours: add_reader()/add_writer() on the fd
  meanwhile replaced (and cancelled) our handle.
- The reader or writer is a one-shot waiter of the loop's fd table (see
  "The fd table and the kernel" in src/fd_table.h): alone on its fd, it is
  registered so that the kernel disarms it when it fires, and its removal
  when the operation ends costs no syscall.  In exchange, the callback must
  re-arm it whenever it keeps waiting (a spurious wake-up, a partial send),
  or the operation would wait forever.  That is _SockWait._wait_again().
"""

import io as _io
import os as _os
import socket as _socket

from asyncio import base_events as _aio_base
from asyncio import exceptions as _aio_exceptions

from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release,
                             PyBUF_SIMPLE, PyBUF_WRITABLE)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.exc cimport PyErr_CheckSignals
from cpython.object cimport PyObject, PyTypeObject
from libc.errno cimport errno, EINTR, ENOTCONN
from libc.stdint cimport int64_t, INT64_MAX
from posix.types cimport off_t
from posix.unistd cimport lseek, SEEK_SET

from .handles cimport Handle, handle_cancelled
from .includes cimport (POLLER_READ, POLLER_WRITE, recv, send, PY_SSIZE_T_MAX,
                        minloop_socket_head,
                        compat_type_version)
from .lifecycle cimport READ_SIZE, COPY_MAX, read_buffer, read_new_bytes
from .loop cimport LoopCore, check_loop_thread
from .fd_owners cimport transport_of
from .oserrors cimport os_error, would_block

from . import _asyncio_compat
from . import fd_owners as _fd_owners


cdef object _socket_type = _socket.socket
cdef bint _SENDFILE_ALWAYS_SEEKS = _asyncio_compat.SENDFILE_ALWAYS_SEEKS
# The loop's own check that no transport owns an fd, as Loop binds it (a
# subclass may replace it: then it is called).
cdef object _core_ensure_fd_no_transport = _fd_owners._ensure_fd_no_transport
cdef object _memoryview = memoryview
cdef object _check_ssl_socket = _aio_base._check_ssl_socket
cdef bint _HAS_IPv6 = _aio_base._HAS_IPv6
cdef int _AF_INET = _socket.AF_INET
cdef int _AF_INET6 = getattr(_socket, 'AF_INET6', -1)
cdef int _SOL_SOCKET = _socket.SOL_SOCKET
cdef int _SO_ERROR = _socket.SO_ERROR
cdef object _SendfileNotAvailableError = _aio_exceptions.SendfileNotAvailableError
cdef object _UnsupportedOperation = _io.UnsupportedOperation
cdef object _os_fstat = _os.fstat
# 3.13 caps a sendfile() chunk so that it fits a 32-bit ssize_t too; where
# ssize_t has 64 bits the cap changes nothing, so every version gets it.
cdef Py_ssize_t _MAX_CHUNK = PY_SSIZE_T_MAX // 2 + 1

# Returned by a syscall helper when the call would block.
cdef object _AGAIN = object()


# ----------------------------------------------------------------------
# Direct syscalls, for plain non-blocking sockets

def _probe_socket_layout():
    """Whether socket.socket's fd and timeout may be read from the object
    (src/socket_object.h): the fields agree with fileno() and gettimeout()
    in every state that matters, and the type holds the whole head."""
    cdef minloop_socket_head *head
    if (<PyTypeObject *>_socket_type).tp_basicsize < <Py_ssize_t>sizeof(minloop_socket_head):
        return False
    try:
        a, b = _socket.socketpair()
    except OSError:
        return False
    try:
        for sock, timeout in ((a, None), (a, 0.0), (a, 2.5), (b, 0.0)):
            sock.settimeout(timeout)
            head = <minloop_socket_head *><PyObject *>sock
            if head.sock_fd != sock.fileno() or head.sock_fd < 0:
                return False
            if (head.sock_timeout < 0) != (sock.gettimeout() is None):
                return False
            if (head.sock_timeout == 0) != (sock.gettimeout() == 0):
                return False
        fd = b.fileno()
        if b.detach() != fd or (<minloop_socket_head *><PyObject *>b).sock_fd != -1:
            _os.close(fd)
            return False
        _os.close(fd)
        a.close()
        return (<minloop_socket_head *><PyObject *>a).sock_fd == -1 == a.fileno()
    finally:
        a.close()
        b.close()


cdef bint _layout_known = _probe_socket_layout()


cdef inline int _plain_fd(object sock) except -3:
    """sock's fd if its syscalls may be made directly, else -2.

    Only the exact socket.socket type with timeout 0 qualifies: its methods
    then make one non-blocking call, which is what the helpers below do.
    A closed socket gives -1, and the syscall fails with EBADF as the
    method would.
    """
    cdef minloop_socket_head *head
    if type(sock) is not _socket_type:
        return -2
    if _layout_known:
        head = <minloop_socket_head *><PyObject *>sock
        return head.sock_fd if head.sock_timeout == 0 else -2
    timeout = sock.gettimeout()
    if timeout is None or timeout != 0:
        return -2
    return sock.fileno()


cdef inline object _sock_fileno(object sock):
    """sock.fileno() of a socket object (-1 once closed), read from the
    object where that is the same.  Not loop.pxd's fileobj_fd(), which takes
    an int or any object with fileno() and raises asyncio's ValueError."""
    if _layout_known and type(sock) is _socket_type:
        return (<minloop_socket_head *><PyObject *>sock).sock_fd
    return sock.fileno()


cdef Py_ssize_t _size_arg(object n) except -2:
    """n as a size for the direct recv, or -1 to let sock.recv() judge it."""
    cdef Py_ssize_t size
    if type(n) is not int:
        return -1
    try:
        size = n
    except OverflowError:
        return -1
    return size if size >= 0 else -1


cdef int _raise_errno(int err) except -1:
    # What the socket's methods raise for err.
    raise os_error(err)


# Whether the last recv of _recv_bytes() brought more than is worth copying
# out of the read buffer.  A hint only: both ways make the same one recv(n)
# call and give the same bytes, so a wrong guess costs time, never data.
cdef bint _recv_large = False


cdef object _recv_bytes(LoopCore loop, int fd, Py_ssize_t n):
    """recv(n) on fd: the bytes, or _AGAIN.

    Small messages are received into the loop's read buffer and copied into
    a bytes object of the size received, as the transports do: a caller
    asking for much more than arrives (the usual 256 KiB for a 1 KiB
    message) then costs no allocation of n bytes to shrink, and a recv that
    would block allocates nothing.  No Python code runs between the recv
    and the copy (see lifecycle.read_buffer).  While the recvs bring more
    than COPY_MAX, the copy would cost more than the allocation: the bytes
    object of n bytes is received into directly.
    """
    global _recv_large
    cdef Py_ssize_t got
    cdef char *buf
    if n > READ_SIZE or (_recv_large and n > COPY_MAX):
        data = _recv_bytes_direct(fd, n)
        if data is not _AGAIN:
            _recv_large = PyBytes_GET_SIZE(data) > COPY_MAX
        return data
    # The one read into the loop's buffer made outside the loop's callbacks:
    # a coroutine of another thread's loop may call it.
    check_loop_thread(loop)
    buf = read_buffer(loop)
    got = _recv_into(fd, buf, n)
    if got < 0:
        return _AGAIN
    _recv_large = got > COPY_MAX
    return PyBytes_FromStringAndSize(buf, got)


cdef inline bint _retry(int err) except -1:
    """After a failed syscall: True to make it again (EINTR, PEP 475,
    unless a signal handler raised), False if it would block; raises the
    socket methods' error otherwise."""
    if err == EINTR:
        PyErr_CheckSignals()
        return True
    if would_block(err):
        return False
    _raise_errno(err)


cdef object _recv_bytes_direct(int fd, Py_ssize_t n):
    """recv(n) on fd into a bytes object of n bytes, shrunk to fit."""
    cdef ssize_t got
    while True:
        data = read_new_bytes(fd, n, &got, True)
        if got >= 0:
            return data if got > 0 else b""
        if not _retry(errno):
            return _AGAIN


cdef Py_ssize_t _recv_into(int fd, char *buf, Py_ssize_t n) except -2:
    """recv into buf; the byte count, or -1 when it would block."""
    cdef ssize_t got
    while True:
        got = recv(fd, buf, <size_t>n, 0)
        if got >= 0:
            return got
        if not _retry(errno):
            return -1


cdef Py_ssize_t _send(int fd, const char *buf, Py_ssize_t n) except -2:
    """send from buf; the byte count, or -1 when it would block."""
    cdef ssize_t sent
    while True:
        sent = send(fd, buf, <size_t>n, 0)
        if sent >= 0:
            return sent
        if not _retry(errno):
            return -1


cdef bint _byte_buffer(object data) except -1:
    """True if data's bytes may be sent directly.

    asyncio compares what send() returns, a byte count, with len(data): the
    two agree for bytes, bytearray and flat byte memoryviews only.  Anything
    else goes through sock.send() and asyncio's own arithmetic.
    """
    cdef type t = type(data)
    if t is bytes or t is bytearray:
        return True
    if t is _memoryview:
        try:
            return data.ndim == 1 and data.itemsize == 1 and data.c_contiguous
        except ValueError:    # released: let sock.send() raise it
            return False
    return False


# ----------------------------------------------------------------------
# Waiting for the fd

# The version tag of the last loop class found to keep the core's
# _ensure_fd_no_transport: assigning to the class (or a base) changes its
# tag, so a class patched since is looked at again.
cdef unsigned int _core_check_version = 0


cdef bint _core_transport_check(LoopCore loop) except -1:
    """type(loop) checks fds for transports with the core's method."""
    global _core_check_version
    t = type(loop)
    cdef unsigned int version = compat_type_version(t)
    if version != 0 and version == _core_check_version:
        return True
    if getattr(t, '_ensure_fd_no_transport', None) is not _core_ensure_fd_no_transport:
        return False
    _core_check_version = version   # read before the lookup: 0 or current
    return True


cdef int _ensure_fd_no_transport(LoopCore loop, object fd) except -1:
    """loop._ensure_fd_no_transport(fd): asyncio's check that no transport
    owns it (RuntimeError unless that one is closing).

    The common answer, no transport, comes from the fd table in C (a Python
    method call per blocked operation cost about as much as the syscall it
    waits for); a transport found, a non-int fd, or a loop class that
    replaced the check goes to the method.
    """
    if (type(fd) is int and transport_of(loop, fd) is None
            and _core_transport_check(loop)):
        return 0
    loop._ensure_fd_no_transport(fd)
    return 0


cdef class _SockWait:
    """One sock_* operation waiting for its fd: the reader or writer callback.

    Subclasses implement _attempt(): one try of the syscall, returning the
    result or _AGAIN (a BlockingIOError or InterruptedError also means
    "again", as in asyncio's callbacks).
    """
    cdef:
        LoopCore loop
        object fut
        object sock
        object fd            # as registered, for removal
        int fdn              # the same, as a C int
        int which            # POLLER_READ or POLLER_WRITE
        Handle handle        # ours while not cancelled

    cdef object _arm(self, LoopCore loop, object sock, int which, object fut=None):
        # asyncio's order: the future, the fd, the transport check, then
        # the reader or writer.  `fut`: one the caller made, else a new one.
        self.loop = loop
        self.sock = sock
        self.fut = loop.create_future() if fut is None else fut
        fd = _sock_fileno(sock)
        _ensure_fd_no_transport(loop, fd)
        self.fd = fd
        self.fdn = fd
        self.which = which
        self.handle = loop._add_oneshot_handle(self.fdn, which, self)
        return self.fut

    cdef int _disarm(self) except -1:
        """Remove our reader or writer, unless someone replaced it."""
        cdef Handle handle = self.handle
        if handle is not None:
            self.handle = None
            if not handle_cancelled(handle):
                self.loop._remove_oneshot(self.fdn, self.which, handle)
        self._release()
        return 0

    cdef int _wait_again(self) except -1:
        """Re-arm our one-shot reader or writer after a wake-up that did
        not end the operation.  If the fd cannot be watched any more, the
        operation fails with that error rather than wait forever."""
        cdef Handle handle = self.handle
        if handle is None or handle_cancelled(handle):
            return 0
        try:
            self.loop._rearm_oneshot(self.fdn, self.which, handle)
        except OSError as exc:
            self._disarm()
            if not self.fut.done():
                self.fut.set_exception(exc)
        return 0

    cdef int _release(self) except -1:
        return 0

    cdef object _attempt(self):
        raise NotImplementedError

    def __call__(self):
        # The fd is ready (or the wake-up was spurious): try again.
        if self.fut.done():
            return   # cancelled meanwhile; the coroutine will disarm
        try:
            result = self._attempt()
        except (BlockingIOError, InterruptedError):
            self._wait_again()
            return
        except (SystemExit, KeyboardInterrupt):
            self._wait_again()   # the loop may be run again
            raise
        except BaseException as exc:
            self._disarm()
            self.fut.set_exception(exc)
            return
        if result is _AGAIN:
            self._wait_again()
            return
        self._disarm()
        self.fut.set_result(result)

    def __repr__(self):
        return f'<{type(self).__name__[1:]} fd={self.fd!r} sock={self.sock!r}>'


cdef class _RecvWait(_SockWait):
    cdef object n
    cdef Py_ssize_t size     # >= 0: recv directly

    cdef object _attempt(self):
        cdef int fd
        if self.size >= 0:
            fd = _plain_fd(self.sock)
            if fd != -2:
                return _recv_bytes(self.loop, fd, self.size)
        return self.sock.recv(self.n)


cdef class _RecvIntoWait(_SockWait):
    cdef object buf

    cdef object _attempt(self):
        return _recv_into_once(self.sock, self.buf)


cdef class _RecvFromWait(_SockWait):
    cdef object bufsize

    cdef object _attempt(self):
        return self.sock.recvfrom(self.bufsize)


cdef class _RecvFromIntoWait(_SockWait):
    cdef object buf
    cdef object nbytes

    cdef object _attempt(self):
        return self.sock.recvfrom_into(self.buf, self.nbytes)


cdef class _SendAllWait(_SockWait):
    cdef:
        object view          # memoryview(data), as asyncio keeps it
        Py_ssize_t pos
        bint direct
        Py_buffer pybuf      # the view's bytes, while `direct`
        bint has_pybuf

    cdef int _release(self) except -1:
        if self.has_pybuf:
            self.has_pybuf = False
            PyBuffer_Release(&self.pybuf)
        self.view = None
        return 0

    def __dealloc__(self):
        if self.has_pybuf:
            PyBuffer_Release(&self.pybuf)

    cdef object _attempt(self):
        cdef int fd = -2
        cdef Py_ssize_t n
        if self.direct:
            fd = _plain_fd(self.sock)
        if fd != -2:
            n = _send(fd, <char *>self.pybuf.buf + self.pos, self.pybuf.len - self.pos)
            if n < 0:
                return _AGAIN
        else:
            n = self.sock.send(self.view[self.pos:])
        self.pos += n
        if self.pos == len(self.view):
            return None
        return _AGAIN


cdef class _SendToWait(_SockWait):
    cdef object data
    cdef object address

    cdef object _attempt(self):
        return self.sock.sendto(self.data, 0, self.address)


cdef class _ConnectWait(_SockWait):
    cdef object address

    cdef object _attempt(self):
        err = self.sock.getsockopt(_SOL_SOCKET, _SO_ERROR)
        if err != 0:
            # EINPROGRESS and the like make a BlockingIOError: keep waiting.
            raise OSError(err, f'Connect call failed {self.address}')
        return None


cdef class _AcceptWait(_SockWait):

    cdef object _attempt(self):
        conn, address = self.sock.accept()
        conn.setblocking(False)
        return (conn, address)


cdef class _SendfileWait(_SockWait):
    """A sendfile() of a file to a socket: where the next chunk starts, and
    what has gone out.

    asyncio's _sock_sendfile_native_impl (unix_events.py), whose chunk sizes
    and errors these are.  Where asyncio makes one sendfile() and then waits
    for the socket to be writable, each step here goes on while the socket
    takes whole chunks (a step that sent a whole chunk then only learns that
    the file has ended), and waits only after a partial one: the socket's
    buffer is full then.  Every way it ends -- all sent, the end of the file,
    an error -- seeks the file to just after the bytes sent, as asyncio does
    (sendfile() itself leaves the file's position alone); a cancelled one
    leaves the position where it was, as asyncio's does.

    Each chunk is one os.sendfile() call, looked up on the os module at the
    call as asyncio's is: it makes the syscall without the GIL, retries it
    on EINTR (PEP 475) and settles the platforms' signatures and partial
    sends; an os.sendfile replaced at run time is the one used.
    """
    cdef:
        int fileno
        int64_t offset       # where the next chunk starts
        int64_t count        # the bytes to send in all; 0: to the end of file
        # The file's size at the start: after a partial chunk that ends
        # before it, the socket is full.  (INT64_MAX: not known; a partial
        # chunk then always waits for the socket.)
        int64_t fsize
        int64_t total_sent
        bint started         # a sendfile() was made (asyncio: registered_fd)
        readonly bint concluded  # it ended, and the position is settled

    cdef object _begin(self, object sock, object file, object offset, object count):
        """asyncio's _sock_sendfile_native up to its first sendfile(), then
        the first step: the bytes sent, or _AGAIN to wait for the socket."""
        cdef int fileno
        cdef int64_t fsize
        try:
            _os.sendfile
        except AttributeError:
            raise _SendfileNotAvailableError("os.sendfile() is not available")
        try:
            fileno = file.fileno()
        except (AttributeError, _UnsupportedOperation):
            raise _SendfileNotAvailableError("not a regular file")
        # os.fstat, not fstat(2) from C: glibc 2.33 made that a new symbol,
        # and the wheels promise glibc 2.17 (manylinux_2_17).
        try:
            fsize = _os_fstat(fileno).st_size
        except OSError:
            raise _SendfileNotAvailableError("not a regular file")
        if not count and not fsize:
            return 0   # an empty file
        self.sock = sock
        self.fileno = fileno
        self.fsize = fsize
        # Python ints too large for sendfile() fail here with the
        # OverflowError os.sendfile() raises for them.
        self.count = count if count else 0
        self.offset = offset
        return self._step()

    cdef object _step(self):
        """Send chunks until all went, the file ended, or the socket is full."""
        cdef int64_t blocksize
        cdef Py_ssize_t n
        while True:
            if self.count:
                blocksize = self.count - self.total_sent
                if blocksize <= 0:
                    return self._end()
            else:
                # asyncio asks for the file's size each time, and sendfile()
                # stops at the end of the file.
                blocksize = self.fsize
            if blocksize > _MAX_CHUNK:
                blocksize = _MAX_CHUNK
            fd = self.sock.fileno()
            try:
                sent = _os.sendfile(fd, self.fileno, self.offset, blocksize)
            except (BlockingIOError, InterruptedError):
                self.started = True
                return _AGAIN
            except OSError as exc:
                self._fail(exc)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException:
                # What a signal handler raised, say: asyncio reports it as
                # the sendfile's error.
                self._end()
                raise
            n = sent
            self.started = True
            if n == 0:
                return self._end()   # the end of the file
            self.offset += n
            self.total_sent += n
            # A partial chunk: the socket's buffer is full (wait for room),
            # or the file has ended (try again: sendfile() returns 0).
            if n < blocksize and self.offset < self.fsize:
                return _AGAIN

    cdef object _end(self):
        """Seek the file past what was sent (if anything, before 3.14); the
        total."""
        self.concluded = True
        if self.total_sent > 0 or _SENDFILE_ALWAYS_SEEKS:
            if lseek(self.fileno, <off_t>self.offset, SEEK_SET) < 0:
                raise os_error(errno)
        return self.total_sent

    cdef int _fail(self, object exc) except -1:
        """Raise os.sendfile()'s OSError `exc` as asyncio reports it."""
        if self.started and exc.errno == ENOTCONN and type(exc) is not ConnectionError:
            # asyncio: the connection was closed in the middle of the
            # operation; the same error on every platform (its arguments
            # in asyncio's order).
            cause = exc
            exc = ConnectionError("socket is not connected", ENOTCONN)
            exc.__cause__ = cause
        if self.total_sent == 0:
            # Nothing went out: most likely a file sendfile() cannot read
            # from, and the caller may read and send it instead.
            cause = exc
            exc = _SendfileNotAvailableError("os.sendfile call failed")
            exc.__context__ = cause
        self._end()
        raise exc

    cdef object _attempt(self):
        return self._step()

    def _future_done(self, fut):
        """A done callback of a future this wait completes, where no
        coroutine awaits it for us (_sock_sendfile_native_impl): stop
        waiting however the future ended (asyncio removes its writer when it
        is cancelled).  If it failed from outside -- the socket could not be
        watched again -- settle the file's position as for any error; not
        when cancelled (asyncio leaves the position then)."""
        self._disarm()
        if not self.concluded and not fut.cancelled() and fut.exception() is not None:
            self._end()


async def _finish_sendfile(_SendfileWait w, fut):
    """Wait until the sendfile that filled its socket ends."""
    try:
        return await fut
    except Exception:
        # Failed from outside (its transport closed, its fd could not be
        # watched again): settle the position as for any error.  Not when
        # cancelled (asyncio leaves it) or closed unfinished.
        if not w.concluded:
            w._end()
        raise
    finally:
        w._disarm()


cdef object _recv_into_once(object sock, object buf):
    """sock.recv_into(buf), directly on the fd if it may be; or _AGAIN."""
    cdef Py_buffer pybuf
    cdef Py_ssize_t got
    cdef int fd = _plain_fd(sock)
    if fd == -2:
        return sock.recv_into(buf)
    try:
        PyObject_GetBuffer(buf, &pybuf, PyBUF_WRITABLE)
    except Exception:
        # Not a writable buffer: the method raises its own error for it.
        return sock.recv_into(buf)
    try:
        got = _recv_into(fd, <char *>pybuf.buf, pybuf.len)
    finally:
        PyBuffer_Release(&pybuf)
    return _AGAIN if got < 0 else got


cdef int _check_sock(LoopCore loop, object sock) except -1:
    if type(sock) is not _socket_type:   # an SSLSocket is a subclass
        _check_ssl_socket(sock)
    if loop._debug and sock.gettimeout() != 0:
        raise ValueError("the socket must be non-blocking")
    return 0


# ----------------------------------------------------------------------
# The coroutines (Loop methods)

async def _wait(_SockWait w, LoopCore loop, object sock, int which):
    """The wait of a sock_* coroutine whose first try would block: watch
    sock's fd (w._arm()), return what a try at a wake-up gives
    (w.__call__), and stop watching however the wait ends -- done, failed,
    cancelled, or the coroutine closed (w._disarm())."""
    fut = w._arm(loop, sock, which)
    try:
        return await fut
    finally:
        w._disarm()



async def sock_recv(LoopCore self, sock, n):
    """Receive data from the socket.

    The return value is a bytes object representing the data received.
    The maximum amount of data to be received at once is specified by
    nbytes.
    """
    cdef Py_ssize_t size = -1
    cdef int fd
    cdef _RecvWait w
    _check_sock(self, sock)
    fd = _plain_fd(sock)
    if fd != -2:
        size = _size_arg(n)
    if size >= 0:
        data = _recv_bytes(self, fd, size)
        if data is not _AGAIN:
            return data
    else:
        try:
            return sock.recv(n)
        except (BlockingIOError, InterruptedError):
            pass
    w = _RecvWait.__new__(_RecvWait)
    w.n = n
    w.size = size
    return await _wait(w, self, sock, POLLER_READ)


async def sock_recv_into(LoopCore self, sock, buf):
    """Receive data from the socket.

    The received data is written into *buf* (a writable buffer).
    The return value is the number of bytes written.
    """
    cdef _RecvIntoWait w
    _check_sock(self, sock)
    try:
        nbytes = _recv_into_once(sock, buf)
        if nbytes is not _AGAIN:
            return nbytes
    except (BlockingIOError, InterruptedError):
        pass
    w = _RecvIntoWait.__new__(_RecvIntoWait)
    w.buf = buf
    return await _wait(w, self, sock, POLLER_READ)


async def sock_recvfrom(LoopCore self, sock, bufsize):
    """Receive a datagram from a datagram socket.

    The return value is a tuple of (bytes, address) representing the
    datagram received and the address it came from.
    The maximum amount of data to be received at once is specified by
    nbytes.
    """
    cdef _RecvFromWait w
    _check_sock(self, sock)
    try:
        return sock.recvfrom(bufsize)
    except (BlockingIOError, InterruptedError):
        pass
    w = _RecvFromWait.__new__(_RecvFromWait)
    w.bufsize = bufsize
    return await _wait(w, self, sock, POLLER_READ)


async def sock_recvfrom_into(LoopCore self, sock, buf, nbytes=0):
    """Receive data from the socket.

    The received data is written into *buf* (a writable buffer).
    The return value is a tuple of (number of bytes written, address).
    """
    cdef _RecvFromIntoWait w
    _check_sock(self, sock)
    if not nbytes:
        nbytes = len(buf)
    try:
        return sock.recvfrom_into(buf, nbytes)
    except (BlockingIOError, InterruptedError):
        pass
    w = _RecvFromIntoWait.__new__(_RecvFromIntoWait)
    w.buf = buf
    w.nbytes = nbytes
    return await _wait(w, self, sock, POLLER_READ)


async def sock_sendall(LoopCore self, sock, data):
    """Send data to the socket.

    The socket must be connected to a remote socket. This method continues
    to send data from data until either all data has been sent or an
    error occurs. None is returned on success. On error, an exception is
    raised, and there is no way to determine how much data, if any, was
    successfully processed by the receiving end of the connection.
    """
    cdef int fd
    cdef Py_ssize_t n = 0
    cdef Py_buffer pybuf
    cdef bint direct = False
    cdef _SendAllWait w
    _check_sock(self, sock)
    fd = _plain_fd(sock)
    if fd != -2 and _byte_buffer(data):
        direct = True
        if type(data) is bytes:
            n = _send(fd, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
            if n == PyBytes_GET_SIZE(data):
                return
        elif type(data) is bytearray:
            n = _send(fd, PyByteArray_AS_STRING(data), PyByteArray_GET_SIZE(data))
            if n == PyByteArray_GET_SIZE(data):
                return
        else:
            PyObject_GetBuffer(data, &pybuf, PyBUF_SIMPLE)
            try:
                n = _send(fd, <char *>pybuf.buf, pybuf.len)
                if n == pybuf.len:
                    return
            finally:
                PyBuffer_Release(&pybuf)
        if n < 0:
            n = 0    # it would block
    else:
        try:
            n = sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        if n == len(data):
            return   # all data sent
    w = _SendAllWait.__new__(_SendAllWait)
    w.view = _memoryview(data)
    w.pos = n
    if direct:
        PyObject_GetBuffer(w.view, &w.pybuf, PyBUF_SIMPLE)
        w.has_pybuf = True
        w.direct = True
    return await _wait(w, self, sock, POLLER_WRITE)


async def sock_sendto(LoopCore self, sock, data, address):
    """Send data to the socket.

    The socket must be connected to a remote socket. This method continues
    to send data from data until either all data has been sent or an
    error occurs. None is returned on success. On error, an exception is
    raised, and there is no way to determine how much data, if any, was
    successfully processed by the receiving end of the connection.
    """
    cdef _SendToWait w
    _check_sock(self, sock)
    try:
        return sock.sendto(data, address)
    except (BlockingIOError, InterruptedError):
        pass
    w = _SendToWait.__new__(_SendToWait)
    w.data = data
    w.address = address
    return await _wait(w, self, sock, POLLER_WRITE)


async def sock_connect(LoopCore self, sock, address):
    """Connect to a remote socket at address.

    This method is a coroutine.
    """
    cdef _ConnectWait w
    _check_sock(self, sock)
    family = sock.family
    if family == _AF_INET or (_HAS_IPv6 and family == _AF_INET6):
        resolved = await self._ensure_resolved(
            address, family=sock.family, type=sock.type, proto=sock.proto,
            loop=self,
        )
        _, _, _, _, address = resolved[0]
    sock.fileno()     # asyncio asks for it before connecting
    try:
        sock.connect(address)
        return None
    except (BlockingIOError, InterruptedError):
        # Issue #23618: a connect() interrupted by a signal goes on in the
        # background, as a non-blocking one does: wait until the socket is
        # writable, then read the outcome from SO_ERROR.
        pass
    w = _ConnectWait.__new__(_ConnectWait)
    w.address = address
    return await _wait(w, self, sock, POLLER_WRITE)


async def sock_accept(LoopCore self, sock):
    """Accept a connection.

    The socket must be bound to an address and listening for connections.
    The return value is a pair (conn, address) where conn is a new socket
    object usable to send and receive data on the connection, and address
    is the address bound to the socket on the other end of the connection.
    """
    cdef _AcceptWait w
    _check_sock(self, sock)
    sock.fileno()     # asyncio asks for it before accepting
    try:
        conn, address = sock.accept()
        conn.setblocking(False)
        return (conn, address)
    except (BlockingIOError, InterruptedError):
        pass
    w = _AcceptWait.__new__(_AcceptWait)
    return await _wait(w, self, sock, POLLER_READ)


# ----------------------------------------------------------------------
# sendfile: the native hooks under asyncio's sock_sendfile() and sendfile()
# (base_events.py binds those two from asyncio, and these as their hooks)

def _sock_sendfile_native_impl(LoopCore self, fut, registered_fd, sock,
                               fileno, offset, count, blocksize, total_sent):
    """Send file `fileno` on sock from `offset`, completing `fut` with the
    bytes sent: asyncio's unix_events step, with its signature.

    sock_sendfile()'s native path is asyncio's own _sock_sendfile_native
    (base_events.py binds it: its checks, in its module's words), which
    makes `fut` and calls this once, with registered_fd None and total_sent
    0.  asyncio calls it again as the socket's writer after every chunk;
    here the wait (_SendfileWait) goes on by itself, so a caller that passes
    registered_fd (that fd's writer is removed first, as asyncio does) or
    total_sent (the bytes already sent: counted in the result, and they
    decide the error, as in asyncio) only resumes such a send.  `blocksize`
    is the file's size when `count` is None (as asyncio's passes it), else
    it is recomputed from `count`.

    It returns nothing: errors go to `fut` (SystemExit and KeyboardInterrupt
    propagate); when `fut` is cancelled, it stops waiting and leaves the
    file's position alone, as asyncio's does.
    """
    cdef _SendfileWait w
    if registered_fd is not None:
        self.remove_writer(registered_fd)
    w = _SendfileWait.__new__(_SendfileWait)
    w.sock = sock
    w.fileno = fileno
    w.offset = offset
    w.count = count if count else 0
    w.fsize = blocksize if not count else INT64_MAX
    w.total_sent = total_sent
    w.started = registered_fd is not None
    if fut.cancelled():
        w._end()   # asyncio: the position after what was sent, if anything
        return
    try:
        result = w._step()
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:
        fut.set_exception(exc)
        return
    if result is not _AGAIN:
        fut.set_result(result)
        return
    # asyncio's order: the cancellation callback, then the writer.
    fut.add_done_callback(w._future_done)
    w._arm(self, sock, POLLER_WRITE, fut)


async def _sendfile_native(LoopCore self, transp, file, offset, count):
    """loop.sendfile()'s native path for a socket transport.

    asyncio's selector loop, step for step: stop reading, wait until the
    transport's write buffer is empty (the "empty waiter"; write() raises
    while it is set), send the file on the socket as sock_sendfile() with
    fallback=False does, and resume.  One difference: while the file is
    being sent, the transport's empty waiter is the send's own future, so
    that closing the transport fails the send with ConnectionError (asyncio's
    would wait forever on the closed socket).
    """
    cdef _SendfileWait w
    fd = transp._sock_fd
    del self._transports[fd]
    resume_reading = transp.is_reading()
    transp.pause_reading()
    await transp._make_empty_waiter()
    try:
        sock = transp._sock
        if sock is None:
            # Closed while its buffer drained; asyncio fails on None.
            raise ConnectionError("Connection is closed by peer")
        self._check_sendfile_params(sock, file, offset, count)
        w = _SendfileWait.__new__(_SendfileWait)
        result = w._begin(sock, file, offset, count)
        if result is not _AGAIN:
            return result
        fut = w._arm(self, sock, POLLER_WRITE)
        transp._empty_waiter = fut
        return await _finish_sendfile(w, fut)
    finally:
        transp._reset_empty_waiter()
        if resume_reading:
            transp.resume_reading()
        self._transports[fd] = transp
