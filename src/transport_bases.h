/* The C layout of asyncio's transport classes, for minloop's transports.
 *
 * asyncio.BaseTransport declares __slots__ = ('_extra',): its instances are
 * a PyObject header and one object pointer.  A type that extends one of
 * asyncio's transport classes must keep that layout at the front, so the
 * `_extra` member descriptor asyncio defines reads the right field. */
#ifndef MINLOOP_TRANSPORT_BASES_H
#define MINLOOP_TRANSPORT_BASES_H

#include <Python.h>

typedef struct {
    PyObject_HEAD
    PyObject *_extra;   /* BaseTransport's only slot; None until set */
} MinloopTransportBase;

#endif
