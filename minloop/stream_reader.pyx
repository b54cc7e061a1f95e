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
  and had asyncio.streams' own functions there; looked at again whenever
  the class's version tag changes (any assignment to it or its bases);
* each call, that the protocol's data_received and the reader's feed_data
  and _wakeup_waiter are not attributes of the instance itself (a mock);
* the instance attributes (`_stream_reader_wr`, `_eof`, `_buffer`,
  `_waiter`, `_transport`, `_paused`, `_limit`) are read and set by normal
  attribute access, as asyncio's code does: from 3.11 an instance keeps them
  in inline values, and reading its __dict__ would make one per reader.
Until the bytes are in the reader's buffer nothing here runs Python code (so
the loop's read buffer cannot be reused meanwhile), and falling back to
data_received() repeats only lookups that have no effects.

What differs from asyncio: no Python frames, so sys.setprofile()/settrace()
do not see the four calls and a traceback out of them shows this module;
the bytes go from the loop's read buffer into the reader's bytearray
without a bytes object in between.
"""

import weakref
from asyncio import streams as _aio_streams

cimport cython
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.object cimport PyObject, PyTypeObject
from libc.string cimport memcpy

from .includes cimport (MINLOOP_FEEDS_STREAM_READERS, compat_calls_class_function,
                        _PyType_Lookup, getattro_type, generic_getattr,
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
        if (<getattro_type *>self.cls).tp_getattro != generic_getattr:
            return False    # a __getattribute__ or __getattr__ of its own
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


cdef int feed_stream_reader(object protocol, const char *buf, Py_ssize_t n) except -1:
    cdef Py_ssize_t size
    if (type(protocol) is not _StreamReaderProtocol or not _protocol_class.unchanged()
            or not compat_calls_class_function(protocol, 'data_received', _data_received)):
        return 0
    # data_received(data): reader = self._stream_reader
    ref = protocol._stream_reader_wr
    if ref is None:
        return 1
    if type(ref) is not _weakref:   # calling it runs no Python code
        return 0
    reader = ref()
    if reader is None:
        return 1
    # reader.feed_data(data)
    if (type(reader) is not _StreamReader or not _reader_class.unchanged()
            or not compat_calls_class_function(reader, 'feed_data', _feed_data)
            or not compat_calls_class_function(reader, '_wakeup_waiter', _wakeup_waiter)):
        return 0
    if reader._eof is not False:
        return 0
    buffer = reader._buffer
    if type(buffer) is not bytearray:
        return 0
    # self._buffer.extend(data): the resize bytearray.extend() makes, then
    # the bytes.
    size = PyByteArray_GET_SIZE(buffer)
    PyByteArray_Resize(buffer, size + n)
    memcpy(PyByteArray_AS_STRING(buffer) + size, buf, <size_t>n)
    # self._wakeup_waiter()
    waiter = reader._waiter
    if waiter is not None:
        reader._waiter = None
        if not waiter.cancelled():
            waiter.set_result(None)
    # The rest of feed_data(), as written there.
    if (reader._transport is not None and
            not reader._paused and
            len(reader._buffer) > 2 * reader._limit):
        try:
            reader._transport.pause_reading()
        except NotImplementedError:
            reader._transport = None
        else:
            reader._paused = True
    return 1
