from .loop cimport LoopCore
from .transport_bases cimport ReadPipeTransportBase, WritePipeTransportBase


cdef class ReadPipeTransport(ReadPipeTransportBase):
    # The transports' shape (lifecycle.pxd).
    cdef:
        readonly object _loop       # None once connection_lost() has run
        LoopCore _core              # the same loop, kept
        readonly int _fileno
        # The file object; None once connection_lost() has run.  Writable
        # from Python: CPython's test_unclosed_pipe_transport clears it.
        public object _pipe
        readonly object _protocol
        readonly bint _closing
        readonly bint _paused
        # The last read brought more than COPY_MAX: the next is made into
        # a new bytes object, not the loop's buffer (lifecycle.pxd).
        bint _read_large
        object __weakref__

    cdef _read_data(self)
    cdef _close(self, exc)


cdef class WritePipeTransport(WritePipeTransportBase):
    # The transports' shape (lifecycle.pxd), then this one's own field.
    cdef:
        readonly object _loop       # None once connection_lost() has run
        LoopCore _core              # the same loop, kept
        readonly int _fileno
        public object _pipe         # as ReadPipeTransport._pipe
        readonly object _protocol
        # Data not yet written, oldest first: bytes objects only.  The first
        # `_buffer_head` bytes of _buffer[0] have been written already.
        list _buffer
        Py_ssize_t _buffer_head
        Py_ssize_t _buffer_size
        # Write flow control (asyncio's _FlowControlMixin).
        readonly bint _protocol_paused
        readonly Py_ssize_t _high_water
        readonly Py_ssize_t _low_water
        # Writes attempted after the pipe failed or was closed (asyncio's
        # counter; it warns past a threshold).
        readonly Py_ssize_t _conn_lost
        # close() or write_eof() was called: nothing more is accepted.
        readonly bint _closing
        # The call of connection_lost() is scheduled (or made).
        bint _lost
        object __weakref__

    cdef Py_ssize_t _write_now(self, data) except -2
    cdef bint _queue(self, data, Py_ssize_t offset) except -1
    cdef int _flush(self) except -2
    cdef void _clear_buffer(self)
    cdef _maybe_pause_protocol(self)
    cdef _maybe_resume_protocol(self)
    cdef _close(self, exc)
