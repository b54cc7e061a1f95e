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

/* The socket transport's base adds an instance dict, as asyncio's
 * _SelectorSocketTransport has one: code (CPython's tests among it) sets
 * attributes on a live transport, patching write() for one.  It lives here,
 * not in the Cython class, because Cython cannot give a type-spec class both
 * __dict__ and __weakref__ (it emits two Py_tp_members slots).  NULL until
 * an attribute is set, so an ordinary connection pays 8 bytes for it. */
typedef struct {
    PyObject_HEAD
    PyObject *_extra;   /* as in MinloopTransportBase, which this extends */
    PyObject *dict;
} MinloopStreamTransportBase;

#endif
