# asyncio's transport classes as minloop's compiled transports extend them:
# heap types made by src/transport_bases.c (read its header comment for why
# the C layer exists).  A Cython module that subclasses one of these must be
# built with CYTHON_USE_TYPE_SPECS=1 (setup.py does), because CPython does
# not allow a static type to have a heap type as its base.

cdef extern from "transport_bases.h":
    ctypedef class minloop._transport_bases.StreamTransportBase [object MinloopTransportBase]:
        # BaseTransport's `_extra` slot: the get_extra_info() dict.
        cdef object _extra

    ctypedef class minloop._transport_bases.DatagramTransportBase [object MinloopTransportBase]:
        cdef object _extra

    ctypedef class minloop._transport_bases.ReadTransportBase [object MinloopTransportBase]:
        cdef object _extra

    ctypedef class minloop._transport_bases.WriteTransportBase [object MinloopTransportBase]:
        cdef object _extra

    ctypedef class minloop._transport_bases.SubprocessTransportBase [object MinloopTransportBase]:
        cdef object _extra

    # asyncio.BufferedProtocol: no fields (its __slots__ is empty).
    ctypedef class minloop._transport_bases.BufferedProtocolBase [object PyObject]:
        pass
