# cython: freethreading_compatible=True
"""asyncio's StreamReaderProtocol.data_received(), compiled for the transports.

For every read, asyncio's streams run StreamReaderProtocol.data_received,
its _stream_reader property, StreamReader.feed_data and _wakeup_waiter
(streams.py): four Python frames to extend the reader's buffer and wake its
waiter, which on a small echo cost a fifth of the server's time.
feed_stream_reader() does what those do, in their order and on the same
objects, for asyncio's own classes as asyncio defines them.  Anything else
goes through data_received() as before: a subclass, a class or an instance
that replaces one of those methods, a reader after feed_eof() (asyncio's own
code says what then happens, with asserts on or off), a `_buffer` that is
not a bytearray, a `_stream_reader_wr` that is not a weak reference.

What it checks, and what it assumes:
* each class has, under every name the path reads, what it had at import,
  had asyncio.streams' own functions there, and the generic attribute
  lookup and assignment; looked at again whenever the class's version tag
  changes (any assignment to it or its bases);
* each call, that the protocol's data_received and the reader's feed_data
  and _wakeup_waiter are not attributes of the instance itself (a mock);
* the instance attributes (`_stream_reader_wr`, `_eof`, `_buffer`,
  `_waiter`, `_transport`, `_paused`, `_limit`) are read and set where
  the instance keeps them: in its __dict__ on 3.10 and 3.13, by attribute
  access on 3.11, 3.12 and from 3.14, where making that __dict__ would slow
  asyncio's own code on the instance (py_compat.h says why).  For names
  the class has nothing under, or only a function, both are one lookup.
Until the bytes are in the reader's buffer nothing here runs Python code (so
the loop's read buffer cannot be reused meanwhile), and falling back to
data_received() repeats only lookups that have no effects.

What differs from asyncio: no Python frames, so sys.setprofile()/settrace()
do not see the four calls and a traceback out of them shows this module;
the bytes go from the loop's read buffer into the reader's bytearray
without a bytes object in between; on 3.13 the reader and its protocol
each get their __dict__ made on the first read (a dict object sharing the
values the instance keeps inline; vars(obj) would make the same).
"""

import weakref
from asyncio import futures as _aio_futures
from asyncio import streams as _aio_streams

cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.sequence cimport PySequence_DelSlice
from cpython.dict cimport PyDict_GetItemWithError, PyDict_SetItem
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject, PyTypeObject, PyObject_GenericGetDict, PyObject_SetAttr
from libc.string cimport memchr, memcpy

from .includes cimport (MINLOOP_FEEDS_STREAM_READERS, MINLOOP_READS_INSTANCE_DICT,
                        MINLOOP_STEPS_STREAM_READERS, MINLOOP_STEPS_STREAM_READS,
                        compat_calls_class_function, _PyType_Lookup, getattro_type,
                        generic_getattr, setattro_type, generic_setattr,
                        compat_type_version)


cdef type _StreamReaderProtocol = _aio_streams.StreamReaderProtocol
cdef type _StreamReader = _aio_streams.StreamReader
cdef type _weakref = weakref.ref


@cython.final
cdef class _ClassState:
    """What a class has under the names the path reads, as at import."""
    cdef type cls
    cdef tuple names
    cdef list expected        # the borrowed lookups' objects, or None for nothing
    cdef unsigned int version  # the class's version tag when last found unchanged

    def __init__(self, type cls, tuple names):
        self.cls = cls
        self.names = names
        self.expected = [_lookup(cls, name) for name in names]
        self.version = 0

    cdef bint unchanged(self) except -1:
        cdef unsigned int version = compat_type_version(self.cls)
        if version != 0 and version == self.version:
            return True
        # Read before the lookups (which may give the class its tag): 0, or
        # the tag these lookups see.
        if ((<getattro_type *>self.cls).tp_getattro != generic_getattr
                or (<setattro_type *>self.cls).tp_setattro != generic_setattr):
            return False    # a __getattribute__, __getattr__ or __setattr__ of its own
        for name, want in zip(self.names, self.expected):
            if _lookup(self.cls, name) is not want:
                return False
        self.version = version
        return True


cdef object _lookup(type cls, name):
    cdef PyObject *found = _PyType_Lookup(<PyTypeObject *>cls, name)
    return <object>found if found != NULL else None


cdef bint _asyncio_own(obj) except -1:
    # A function of asyncio.streams (a replacement made before minloop was
    # imported, even one wrapped with functools.wraps, has other globals).
    return getattr(obj, '__globals__', None) is vars(_aio_streams)


cdef _ClassState _protocol_class = _ClassState(
    _StreamReaderProtocol, ('data_received', '_stream_reader', '_stream_reader_wr'))
cdef _ClassState _reader_class = _ClassState(
    _StreamReader, ('feed_data', '_wakeup_waiter', '_eof', '_buffer', '_waiter',
                    '_transport', '_paused', '_limit'))
# The class readers of asyncio's own get here (defined below), and its state.
cdef type _CompiledStreamReader
cdef _ClassState _compiled_class
cdef object _data_received = _protocol_class.expected[0]
cdef object _feed_data = _reader_class.expected[0]
cdef object _wakeup_waiter = _reader_class.expected[1]
cdef object _stream_reader_property = _protocol_class.expected[1]

cdef bint _enabled = (
    MINLOOP_FEEDS_STREAM_READERS
    and _asyncio_own(_data_received) and _asyncio_own(_feed_data)
    and _asyncio_own(_wakeup_waiter)
    and isinstance(_stream_reader_property, property)
    and _asyncio_own(_stream_reader_property.fget)
    and _protocol_class.expected[2:] == [None]
    and _reader_class.expected[2:] == [None] * 6)


cdef bint is_stream_reader_protocol(object protocol) noexcept:
    return _enabled and type(protocol) is _StreamReaderProtocol


cdef object _MISSING = object()

# The reader's waiter is the loop's create_future(): asyncio's Future, the
# C one unless _asyncio is missing.  The C type is immutable, so what
# `waiter.cancelled()` and `waiter.set_result(None)` call is known at import,
# unless the instance has attributes of its own; calling the type's methods
# directly skips the two method lookups per read.  (The Python Future's
# class can be changed: not for it.)
cdef type _CFuture = _aio_futures.Future
cdef object _future_cancelled = None
cdef object _future_set_result = None
if (_CFuture.__flags__ & (1 << 8)      # Py_TPFLAGS_IMMUTABLETYPE
        and (<getattro_type *>_CFuture).tp_getattro == generic_getattr):
    _future_cancelled = _CFuture.cancelled
    _future_set_result = _CFuture.set_result


cdef inline bint _plain_c_future(obj) noexcept:
    """Whether obj.cancelled and obj.set_result are _CFuture's methods."""
    cdef Py_ssize_t offset
    if _future_cancelled is None or type(obj) is not _CFuture:
        return False
    offset = (<PyTypeObject *>_CFuture).tp_dictoffset
    return offset == 0 or (offset > 0 and (<PyObject **>(<char *><PyObject *>obj + offset))[0] == NULL)

# The instance attributes are read where this build reads them cheaply
# without changing the instance (py_compat.h, MINLOOP_READS_INSTANCE_DICT):
# in obj.__dict__, or by attribute access.  For the names read here (which
# the classes have nothing under, as _ClassState checks, or only a
# function) the two are the same lookup.

cdef inline object _attributes(obj):
    """Where _own() and _shadows() look: obj.__dict__, or obj."""
    return PyObject_GenericGetDict(obj, NULL) if MINLOOP_READS_INSTANCE_DICT else obj


cdef inline object _own(attrs, name):
    """obj.name for a name obj's class has nothing under, or _MISSING."""
    cdef PyObject *found
    if not MINLOOP_READS_INSTANCE_DICT:
        return getattr(attrs, name, _MISSING)
    found = PyDict_GetItemWithError(attrs, name)
    return <object>found if found != NULL else _MISSING


cdef inline bint _shadows(obj, attrs, name, func) except -1:
    """Whether obj has an attribute of its own over its class's func."""
    if not MINLOOP_READS_INSTANCE_DICT:
        return not compat_calls_class_function(obj, name, func)
    return PyDict_GetItemWithError(attrs, name) != NULL


cdef inline int _set_own(attrs, name, value) except -1:
    """obj.name = value, for a class with the generic __setattr__."""
    if not MINLOOP_READS_INSTANCE_DICT:
        return PyObject_SetAttr(attrs, name, value)
    return PyDict_SetItem(attrs, name, value)


cdef bint _over_limit(Py_ssize_t size, limit) except -1:
    # len(buffer) > 2 * limit, in C for the int asyncio keeps there.
    cdef int overflow = 0
    cdef long long value = 0
    if type(limit) is int:
        value = PyLong_AsLongLongAndOverflow(limit, &overflow)
        if not overflow and -(1LL << 60) < value < (1LL << 60):
            return size > 2 * value
    return size > 2 * limit


cdef int feed_stream_reader(object protocol, const char *buf, Py_ssize_t n) except -1:
    cdef Py_ssize_t size
    if type(protocol) is not _StreamReaderProtocol or not _protocol_class.unchanged():
        return 0
    attrs = _attributes(protocol)
    if _shadows(protocol, attrs, 'data_received', _data_received):
        return 0
    # data_received(data): reader = self._stream_reader
    ref = _own(attrs, '_stream_reader_wr')
    if ref is None:
        return 1
    if type(ref) is not _weakref:   # calling it runs no Python code
        return 0
    reader = ref()
    if reader is None:
        return 1
    # reader.feed_data(data)
    if type(reader) is _StreamReader:
        if not _reader_class.unchanged():
            return 0
    elif type(reader) is not _CompiledStreamReader or not _compiled_class.unchanged():
        return 0
    attrs = _attributes(reader)
    if (_shadows(reader, attrs, 'feed_data', _feed_data)
            or _shadows(reader, attrs, '_wakeup_waiter', _wakeup_waiter)):
        return 0
    if _own(attrs, '_eof') is not False:
        return 0
    buffer = _own(attrs, '_buffer')
    if type(buffer) is not bytearray:
        return 0
    # self._buffer.extend(data): the resize bytearray.extend() makes, then
    # the bytes.
    size = PyByteArray_GET_SIZE(buffer)
    PyByteArray_Resize(buffer, size + n)
    memcpy(PyByteArray_AS_STRING(buffer) + size, buf, <size_t>n)
    # self._wakeup_waiter()
    waiter = _own(attrs, '_waiter')
    if waiter is _MISSING:
        waiter = reader._waiter     # AttributeError, as there
    if waiter is not None:
        _set_own(attrs, '_waiter', None)
        if _plain_c_future(waiter):
            if not _future_cancelled(waiter):
                _future_set_result(waiter, None)
        elif not waiter.cancelled():
            waiter.set_result(None)
        # Python code may have run (a __dict__ replaced): look again.
        attrs = _attributes(reader)
    # The rest of feed_data(), from the instance's attributes where nothing
    # in it can run Python code, else as written there.
    transport = _own(attrs, '_transport')
    if transport is None:
        return 1
    paused = _own(attrs, '_paused')
    buffer = _own(attrs, '_buffer')
    limit = _own(attrs, '_limit')
    if (transport is not _MISSING and paused is False and type(buffer) is bytearray
            and limit is not _MISSING):
        if not _over_limit(PyByteArray_GET_SIZE(buffer), limit):
            return 1
    elif not (reader._transport is not None and
              not reader._paused and
              len(reader._buffer) > 2 * reader._limit):
        return 1
    try:
        reader._transport.pause_reading()
    except NotImplementedError:
        reader._transport = None
    else:
        reader._paused = True
    return 1


# ---------------------------------------------------------------------------
# What a connection's task awaits: readline(), readexactly() and read(n)
#
# Per line, asyncio's readline() runs readline(), readuntil() and
# _wait_for_data(): three Python coroutines, their attribute reads and calls,
# a slice copied and bytes() of it.  stream_reader_class.StreamReader is
# asyncio.StreamReader with readline(), readexactly() and read(n) (on 3.15
# readline() alone) as short Python coroutines over the steps below: a step
# does, in C, what asyncio's code does up to its next await (or its
# return), and hands back the bytes
# to return or the future to await.  The coroutines stay Python ones (a
# compiled coroutine per call, tried first, was slower than asyncio's); the
# steps take the bytes from the bytearray with the C API (a bytes() call
# from C parses its arguments).  Measured (RESULTS.md, 2026-11-28; callgrind,
# instructions per call on 3.14): a waiting readline() 21.6k -> 19.7k, a
# buffered one 10.3k -> 5.5k; the streams app's server CPU per line 5% less.
#
# A step does what asyncio's code does, on the same attributes in the same
# order, with its exceptions and messages, while:
# * the classes hold what they held at import (_ClassState's version-tag
#   compares: the subclass, and asyncio.StreamReader's own readline(),
#   readexactly() and read(), which the subclass's hide), and
# * the instance has no attribute of its own over a method asyncio's code
#   calls on self (readuntil, _wait_for_data, _maybe_resume_transport).
# Otherwise it returns ASYNCIO and the coroutine awaits asyncio's method of
# that name as it is then (a patch of it, or of readuntil(), is called).  A
# call whose checks first fail after it has waited starts asyncio's method
# afresh, which looks at _exception again (asyncio's running readuntil()
# would not): a class patched, or an instance given a method, while one of
# its reads waits.
# The instance's state is read from and written to its __dict__ (made when
# the reader is adopted, or by the first step of one made as the subclass,
# as vars() would make it): the class has nothing under those names
# (_ClassState checks), so that is what attribute access does, for a dict
# lookup.  The dict is looked up again after anything that
# can run Python code (a __dict__ can be replaced).
#
# start_server()'s readers are made as the subclass (stream_reader_class.py,
# made_as_steps_readers()); before 3.15 a transport of this loop also gives
# a reader of asyncio's own class the subclass when it is handed the
# reader's StreamReaderProtocol (adopt_stream_reader(), from set_protocol()).
# isinstance(reader, asyncio.StreamReader) holds and all else is asyncio's,
# but type(reader) is the subclass, and tracebacks and profilers show these
# frames.

from asyncio import exceptions as _aio_exceptions

cdef extern from "Python.h":
    # n.__index__(), an int past Py_ssize_t's range clipped to it (exc NULL).
    Py_ssize_t _index_clipped "PyNumber_AsSsize_t" (object n, PyObject *exc) except? -1

# What a step returns when asyncio's method is to run instead.
ASYNCIO = object()
cdef object _ASYNCIO = ASYNCIO


cdef inline dict _dict_of(obj):
    return <dict>PyObject_GenericGetDict(obj, NULL)


cdef inline object _get(dict d, obj, name):
    """obj.name, for a name obj's class has nothing under."""
    cdef PyObject *found = PyDict_GetItemWithError(d, name)
    if found != NULL:
        return <object>found
    return getattr(obj, name)     # not there: the AttributeError, as there


cdef inline bint _own_method(dict d, name) except -1:
    return PyDict_GetItemWithError(d, name) != NULL


cdef inline bint _steps_apply(obj, dict d, bint readuntil) except -1:
    if (type(obj) is not _CompiledStreamReader or not _compiled_class.unchanged()
            or not _asyncio_coroutines.unchanged()):
        return False
    return not (_own_method(d, '_wait_for_data') or _own_method(d, '_maybe_resume_transport')
                or (readuntil and _own_method(d, 'readuntil')))


cdef object _take(obj, dict d, Py_ssize_t n):
    """bytes(buffer[:n]), removed from the front of the reader's bytearray
    (as asyncio takes it; 3.15's take_bytes() gives the same bytes).  For a
    bytearray, what bytes(), del and clear() do, without their calls (a
    bytes() call parses its arguments: a thousand instructions)."""
    cdef Py_ssize_t size
    buffer = _get(d, obj, '_buffer')
    if type(buffer) is bytearray:
        size = PyByteArray_GET_SIZE(buffer)
        if n > size:
            n = size
        data = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(buffer), n)
        if n == size:
            PyByteArray_Resize(buffer, 0)
        else:
            PySequence_DelSlice(buffer, 0, n)
    else:
        # Not asyncio's bytearray: its code, which may run Python code.
        if n >= len(buffer):
            data = bytes(buffer)
            buffer.clear()
        else:
            data = bytes(memoryview(buffer)[:n])
            del buffer[:n]
        d = _dict_of(obj)
    _maybe_resume_transport(obj, d)
    return data


cdef object _new_waiter(obj, dict d, func_name):
    """asyncio's _wait_for_data() up to its await, which the coroutine makes
    (and then `self._waiter = None`, in a finally); but for its assert: a
    step comes here only while not at EOF."""
    if _get(d, obj, '_waiter') is not None:
        raise RuntimeError(
            f'{func_name}() called while another coroutine is '
            f'already waiting for incoming data')
    if _get(d, obj, '_paused'):
        PyDict_SetItem(d, '_paused', False)
        _get(d, obj, '_transport').resume_reading()
        d = _dict_of(obj)
    waiter = _get(d, obj, '_loop').create_future()
    PyDict_SetItem(_dict_of(obj), '_waiter', waiter)
    return waiter


cdef int _maybe_resume_transport(obj, dict d) except -1:
    if _get(d, obj, '_paused') and len(_get(d, obj, '_buffer')) <= _get(d, obj, '_limit'):
        PyDict_SetItem(d, '_paused', False)
        _get(d, obj, '_transport').resume_reading()
    return 0


cdef Py_ssize_t _find_newline(buffer, Py_ssize_t size) except -2:
    """buffer.find(b'\\n'): for a bytearray, its memchr() without the call."""
    cdef const char *start
    cdef const char *found
    if size == 0:
        return -1
    if type(buffer) is not bytearray:
        return buffer.find(b'\n')
    start = PyByteArray_AS_STRING(buffer)
    found = <const char *>memchr(start, 10, <size_t>size)
    return found - start if found != NULL else -1


def readline_step(reader, bint first):
    """readline() (readuntil(b'\\n')) up to its next await: the line, or
    the future to await before the next step, or ASYNCIO.  `first`: the
    first step of the call (asyncio looks at _exception only then)."""
    cdef Py_ssize_t isep, buflen
    cdef dict d = _dict_of(reader)
    # asyncio's readline() calls readuntil() once: an instance's own counts
    # only as the call starts.
    if not _steps_apply(reader, d, first):
        return _ASYNCIO
    try:
        if first:
            exc = _get(d, reader, '_exception')
            if exc is not None:
                raise exc
        # readuntil()'s loop, from offset 0 each time: it found no separator
        # before the offset it kept, so the same one is found.
        buffer = _get(d, reader, '_buffer')
        buflen = len(buffer)
        isep = _find_newline(buffer, buflen)
        if isep == -1:
            if buflen and buflen > _get(d, reader, '_limit'):
                raise _aio_exceptions.LimitOverrunError(
                    'Separator is not found, and chunk exceed the limit', buflen)
            if _get(d, reader, '_eof'):
                chunk = bytes(buffer)
                buffer.clear()
                raise _aio_exceptions.IncompleteReadError(chunk, None)
            return _new_waiter(reader, d, 'readuntil')
        if isep > _get(d, reader, '_limit'):
            raise _aio_exceptions.LimitOverrunError(
                'Separator is found, but chunk is longer than limit', isep)
        return _take(reader, d, isep + 1)
    except _aio_exceptions.IncompleteReadError as e:
        return e.partial
    except _aio_exceptions.LimitOverrunError as e:
        readline_overrun(reader, e)


def readline_overrun(reader, e):
    """readline()'s except clause for a LimitOverrunError: drops the line (or
    the buffer) and raises the ValueError."""
    cdef dict d = _dict_of(reader)
    buffer = _get(d, reader, '_buffer')
    if buffer.startswith(b'\n', e.consumed):
        del buffer[:e.consumed + 1]
    else:
        buffer.clear()
    _maybe_resume_transport(reader, d)
    raise ValueError(e.args[0])


def readexactly_step(reader, n, bint first):
    """readexactly(n) up to its next await: the bytes, or the future to
    await before the next step, or ASYNCIO."""
    cdef dict d = _dict_of(reader)
    if not _steps_apply(reader, d, False):
        return _ASYNCIO
    if first:
        if n < 0:
            raise ValueError('readexactly size can not be less than zero')
        exc = _get(d, reader, '_exception')
        if exc is not None:
            raise exc
        if n == 0:
            return b''
    buffer = _get(d, reader, '_buffer')
    if len(buffer) < n:
        if _get(d, reader, '_eof'):
            incomplete = bytes(buffer)
            buffer.clear()
            raise _aio_exceptions.IncompleteReadError(incomplete, n)
        return _new_waiter(reader, d, 'readexactly')
    return _take(reader, d, n)


def read_step(reader, n, bint first):
    """read(n) up to its next await: the bytes, or the future to await
    before the next step, or ASYNCIO (read() to EOF is asyncio's: a loop of
    read(limit), each this one)."""
    cdef dict d = _dict_of(reader)
    if not _steps_apply(reader, d, False):
        return _ASYNCIO
    if first:
        exc = _get(d, reader, '_exception')
        if exc is not None:
            raise exc
        if n == 0:
            return b''
        if n < 0:
            return _ASYNCIO
        if not _get(d, reader, '_buffer') and not _get(d, reader, '_eof'):
            return _new_waiter(reader, d, 'read')
    # A slice clips an n past the end, however large: so does this.
    return _take(reader, d, _index_clipped(n, NULL))


# The coroutines the subclass replaces (readline() alone on 3.15:
# py_compat.h), then the methods asyncio's versions of them call on self:
# asyncio's own at import, or no steps.
STEPS_READS = bool(MINLOOP_STEPS_STREAM_READS)
cdef tuple _STEPPED = ('readline', 'readexactly', 'read') if STEPS_READS else ('readline',)
cdef tuple _STEP_NAMES = _STEPPED + ('readuntil', '_wait_for_data', '_maybe_resume_transport')

# asyncio.StreamReader's own coroutines, which the subclass's hide: a patch
# of one is to be called in their place.
cdef _ClassState _asyncio_coroutines = _ClassState(_StreamReader, _STEPPED)

_compiled_class_names = _STEP_NAMES + _reader_class.names

cdef bint _steps_enabled = (
    MINLOOP_STEPS_STREAM_READERS and _enabled
    and all(_asyncio_own(_lookup(_StreamReader, name)) for name in _STEP_NAMES))


# Whether readers may run steps at all (stream_reader_class.py asks before
# making start_server()'s readers as the subclass).
STEPS = _steps_enabled


cdef int use_steps_class(type cls) except -1:
    global _CompiledStreamReader, _compiled_class
    _CompiledStreamReader = cls
    _compiled_class = _ClassState(cls, _compiled_class_names)
    return 0


cdef int adopt_stream_reader(object protocol) except -1:
    # Not on 3.15: there the reassigned class costs asyncio's own read(n)
    # and readexactly() more than readline()'s step saves (py_compat.h).
    if (not MINLOOP_STEPS_STREAM_READS or not _steps_enabled or _CompiledStreamReader is None
            or type(protocol) is not _StreamReaderProtocol):
        return 0
    ref = getattr(protocol, '_stream_reader_wr', None)
    if type(ref) is not _weakref:
        return 0
    reader = ref()
    if type(reader) is _StreamReader and _reader_class.unchanged():
        try:
            reader.__class__ = _CompiledStreamReader
        except TypeError:
            return 0        # a layout of its own (__slots__ given to it): as it is
        _dict_of(reader)    # made now, not on the first read
    return 0
