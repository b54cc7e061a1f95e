# asyncio's StreamReaderProtocol.data_received() without its Python code
# (stream_reader.pyx says what it checks and assumes).

# Whether a transport given this protocol may feed its reader directly:
# asyncio's own StreamReaderProtocol, exactly (set_protocol() asks once).
cdef bint is_stream_reader_protocol(object protocol) noexcept

# protocol.data_received(buf[:n]), done as asyncio's code does it: 1 if it
# was, 0 if the caller is to call data_received() (nothing has been done
# then).  Raises what that code would raise.
cdef int feed_stream_reader(object protocol, const char *buf, Py_ssize_t n) except -1

# The subclass adopt_stream_reader() gives (stream_reader_class.StreamReader,
# whose coroutines run this module's steps: it imports this module, so it is
# handed over by the module that adopts).
cdef int use_steps_class(type cls) except -1

# Give the reader of asyncio's own StreamReaderProtocol, if it is of
# asyncio's own StreamReader class, that subclass: the same
# reader with its readline(), readexactly() and read(n) compiled.
cdef int adopt_stream_reader(object protocol) except -1
