# asyncio's transport classes as minloop's compiled transports extend them:
# heap types made by src/transport_bases.c (read its header comment for why
# the C layer exists).  A Cython module that subclasses one of these must be
# built with CYTHON_USE_TYPE_SPECS=1 (setup.py does), because CPython does
# not allow a static type to have a heap type as its base.

cdef extern from "transport_bases.h":
    # Each extends the classes of asyncio.transports its asyncio counterpart
    # derives from (transport_bases.c): the socket transport's, the TLS app
    # transport's, the datagram transport's, the read and the write pipe's.
    # The socket transport's adds an instance dict after _extra
    # (MinloopStreamTransportBase: transport_bases.h says why it is in C).
    ctypedef class minloop._transport_bases.StreamTransportBase [object MinloopStreamTransportBase]:
        # BaseTransport's `_extra` slot: the get_extra_info() dict.
        cdef object _extra

    ctypedef class minloop._transport_bases.TLSTransportBase [object MinloopTransportBase]:
        cdef object _extra

    ctypedef class minloop._transport_bases.DatagramTransportBase [object MinloopTransportBase]:
        cdef object _extra

    ctypedef class minloop._transport_bases.ReadPipeTransportBase [object MinloopTransportBase]:
        cdef object _extra

    ctypedef class minloop._transport_bases.WritePipeTransportBase [object MinloopTransportBase]:
        cdef object _extra

    # asyncio.BufferedProtocol: no fields (its __slots__ is empty).
    ctypedef class minloop._transport_bases.BufferedProtocolBase [object PyObject]:
        pass
