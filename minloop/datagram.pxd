from .includes cimport socklen_t, sockaddr_storage
from .loop cimport LoopCore
from .transport_bases cimport DatagramTransportBase


cdef enum:
    # Entries of a transport's address cache (see datagram.pyx).
    ADDR_CACHE_SIZE = 16


# A numeric IPv4 or IPv6 address as the kernel takes and gives it, with the
# Python address tuple it stands for (a strong reference, or NULL).
ctypedef struct addr_entry:
    void *pyaddr
    socklen_t len
    # sizeof(struct sockaddr_in6), the larger (src/net_compat.h checks it).
    unsigned char raw[28]


cdef class DatagramTransport(DatagramTransportBase):
    # The transports' shape (lifecycle.pxd), then this one's own fields.
    cdef:
        readonly object _loop       # None once connection_lost() has run
        LoopCore _core              # the same loop, kept
        readonly int _sock_fd
        readonly object _sock       # None once connection_lost() has run
        readonly object _protocol
        readonly bint _protocol_connected
        readonly object _server
        # (bytes, addr) pairs waiting for the socket to be writable.
        readonly object _buffer
        readonly Py_ssize_t _buffer_size
        # Write flow control (asyncio's _FlowControlMixin).
        readonly bint _protocol_paused
        readonly Py_ssize_t _high_water
        readonly Py_ssize_t _low_water
        # Set when the call of connection_lost() is scheduled; then counts
        # the sends attempted since, as asyncio's does.
        readonly Py_ssize_t _conn_lost
        readonly bint _closing
        readonly bint _paused
        readonly object _address
        # extra['peername'] was true at creation: send(), not sendto().
        bint _connected
        # The socket is AF_INET or AF_INET6: addresses are converted here,
        # in C; any other family goes through the socket object's methods.
        bint _inet
        int _family
        # Wake-ups left before the reader tries a second recvfrom() again
        # (see PROBE_INTERVAL in datagram.pyx).
        int _probe_skips
        # Addresses recently received from (see _addr_for), and the last
        # destination parsed (see _dest_for).
        addr_entry _addr_cache[ADDR_CACHE_SIZE]
        addr_entry _last_dest
        object __weakref__

    cdef int _read_ready_py(self) except -1
    cdef int _send_now(self, object data, object addr) except -1
    cdef int _send_raw(self, const char *buf, Py_ssize_t size,
                       const addr_entry *dest) except -1
    cdef const addr_entry *_dest_for(self, object addr) except? NULL
    cdef object _addr_for(self, const sockaddr_storage *ss, socklen_t length)
    cdef void _clear_addr_cache(self) noexcept
    cdef int _maybe_pause_protocol_c(self) except -1
    cdef int _maybe_resume_protocol_c(self) except -1
    cdef int _start_reading(self) except -1
