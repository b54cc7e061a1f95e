/* minloop._transport_bases: C types that extend asyncio's transport classes.
 *
 * Why this module exists: users check isinstance(t, asyncio.Transport), so
 * minloop's compiled transports must have asyncio's classes in their MRO.
 * Two facts make that take a C layer in between:
 *
 *  - CPython refuses a static type whose base is a heap type, and asyncio's
 *    classes are heap types.  So our transport types are heap types too
 *    (the Cython modules defining them build with CYTHON_USE_TYPE_SPECS).
 *  - asyncio's classes deallocate with `subtype_dealloc`, which looks for
 *    the nearest base whose tp_dealloc is not itself and calls it.  Called
 *    on a Cython type whose own dealloc chains to its base's, it would find
 *    the Cython dealloc again and recurse.  The types here end that chain:
 *    their dealloc frees the object itself, as object's would.
 *
 * Each type adds nothing to asyncio's layout (see transport_bases.h), so the
 * `_extra` slot asyncio defines stays valid on our instances.  The same holds
 * for the one protocol base (BufferedProtocolBase, for the TLS protocol). */
#define PY_SSIZE_T_CLEAN
#include "transport_bases.h"
#include "heap_types.h"
#include "py_compat.h"

#define MODULE_NAME "minloop._transport_bases"

#include <stdio.h>
#include <stddef.h>
#include <string.h>

/* PyMemberDef's type and flag names before 3.12. */
#ifndef Py_T_PYSSIZET
#include <structmember.h>
#define Py_T_PYSSIZET T_PYSSIZET
#define Py_READONLY READONLY
#endif

/* ---- the shared slots ---------------------------------------------------- */

static PyObject *
base_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *self = type->tp_alloc(type, 0);
    if (self != NULL) {
        /* Cython assumes object fields are never NULL. */
        Py_INCREF(Py_None);
        ((MinloopTransportBase *)self)->_extra = Py_None;
    }
    return self;
}

static int
base_traverse(PyObject *self, visitproc visit, void *arg)
{
    /* Instances of heap types own a reference to their type. */
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(((MinloopTransportBase *)self)->_extra);
    return 0;
}

static int
base_clear(PyObject *self)
{
    Py_CLEAR(((MinloopTransportBase *)self)->_extra);
    return 0;
}

static void
base_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    Py_CLEAR(((MinloopTransportBase *)self)->_extra);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyType_Slot base_slots[] = {
    {Py_tp_new, base_new},
    {Py_tp_traverse, base_traverse},
    {Py_tp_clear, base_clear},
    {Py_tp_dealloc, base_dealloc},
    {0, NULL},
};

/* ---- the stream base: the shared slots plus the instance dict ----------- */

/* Where the interpreter specialises `transport.write(...)` only on an
 * instance whose dict exists (3.11: LOAD_METHOD_WITH_DICT; py_compat.h's
 * MINLOOP_LAZY_INSTANCE_DICT), each transport gets an empty one at once:
 * without it the protocol echo round trip took +108 instructions (4%) on
 * 3.11.  From 3.12 the lookup is specialised while the dict is not made. */
static PyObject *
stream_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *self = base_new(type, args, kwds);
    if (self != NULL && !MINLOOP_LAZY_INSTANCE_DICT) {
        PyObject *dict = PyDict_New();
        if (dict == NULL) {
            Py_DECREF(self);
            return NULL;
        }
        ((MinloopStreamTransportBase *)self)->dict = dict;
    }
    return self;
}

static int
stream_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((MinloopStreamTransportBase *)self)->dict);
    return base_traverse(self, visit, arg);
}

static int
stream_clear(PyObject *self)
{
    Py_CLEAR(((MinloopStreamTransportBase *)self)->dict);
    return base_clear(self);
}

static void
stream_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(((MinloopStreamTransportBase *)self)->dict);
    base_dealloc(self);
}

static PyMemberDef stream_members[] = {
    {"__dictoffset__", Py_T_PYSSIZET, offsetof(MinloopStreamTransportBase, dict),
     Py_READONLY, NULL},
    {NULL},
};

/* A type made from a spec gets no __dict__ attribute of its own. */
static PyGetSetDef stream_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

static PyType_Slot stream_slots[] = {
    {Py_tp_new, stream_new},
    {Py_tp_traverse, stream_traverse},
    {Py_tp_clear, stream_clear},
    {Py_tp_dealloc, stream_dealloc},
    {Py_tp_members, stream_members},
    {Py_tp_getset, stream_getset},
    {0, NULL},
};

/* ---- the protocol base ---------------------------------------------------- */

/* asyncio's protocol classes declare __slots__ = (): their instances are a
 * bare PyObject header, and so is the base of our compiled TLS protocol. */

static PyObject *
protocol_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return type->tp_alloc(type, 0);
}

static int
protocol_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static void
protocol_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyType_Slot protocol_slots[] = {
    {Py_tp_new, protocol_new},
    {Py_tp_traverse, protocol_traverse},
    {Py_tp_dealloc, protocol_dealloc},
    {0, NULL},
};

/* ---- the module ---------------------------------------------------------- */

/* Each of our compiled transports and its asyncio counterpart (module,
 * class).  Our type extends the classes of asyncio.transports that the
 * counterpart is a subclass of, as the running asyncio has them, so that
 * isinstance() against each of them answers as it does for asyncio's: the
 * write pipe is a Transport (its read methods raise NotImplementedError),
 * the datagram transport a DatagramTransport only from 3.12 on (where
 * _SelectorDatagramTransport gained that base). */
static const char *const counterparts[][3] = {
    {"StreamTransportBase", "asyncio.selector_events", "_SelectorSocketTransport"},
    {"TLSTransportBase", "asyncio.sslproto", "_SSLProtocolTransport"},
    {"DatagramTransportBase", "asyncio.selector_events", "_SelectorDatagramTransport"},
    {"ReadPipeTransportBase", "asyncio.unix_events", "_UnixReadPipeTransport"},
    {"WritePipeTransportBase", "asyncio.unix_events", "_UnixWritePipeTransport"},
};

/* asyncio.transports' public classes, each before its bases: a class
 * becomes a base of ours unless one taken already derives from it. */
static const char *const public_classes[] = {
    "Transport", "DatagramTransport", "SubprocessTransport",
    "ReadTransport", "WriteTransport", "BaseTransport",
};

/* A new reference to <module>.<name>, checked to be a class whose instances
 * are `size` bytes: the layout our type extends. */
static PyObject *
asyncio_base(PyObject *module, const char *asyncio_name, Py_ssize_t size)
{
    PyObject *base = PyObject_GetAttrString(module, asyncio_name);
    if (base == NULL)
        return NULL;
    if (!PyType_Check(base) || ((PyTypeObject *)base)->tp_basicsize != size) {
        PyErr_Format(PyExc_ImportError,
                     "asyncio.%s does not have the layout minloop was built for",
                     asyncio_name);
        Py_DECREF(base);
        return NULL;
    }
    return base;
}

/* A new tuple: the classes of asyncio.transports (the module) that our
 * type extends to be what `counterpart` is. */
static PyObject *
bases_like(PyObject *transports, PyObject *counterpart)
{
    PyObject *taken = PyList_New(0);
    PyObject *result = NULL;
    size_t i;
    Py_ssize_t j;

    if (taken == NULL)
        return NULL;
    for (i = 0; i < sizeof(public_classes) / sizeof(public_classes[0]); i++) {
        PyObject *cls = asyncio_base(transports, public_classes[i],
                                     sizeof(MinloopTransportBase));
        int wanted;
        if (cls == NULL)
            goto done;
        wanted = PyObject_IsSubclass(counterpart, cls);
        for (j = 0; wanted == 1 && j < PyList_GET_SIZE(taken); j++) {
            if (PyType_IsSubtype((PyTypeObject *)PyList_GET_ITEM(taken, j),
                                 (PyTypeObject *)cls))
                wanted = 0;
        }
        if (wanted == 1 && PyList_Append(taken, cls) < 0)
            wanted = -1;
        Py_DECREF(cls);
        if (wanted < 0)
            goto done;
    }
    if (PyList_GET_SIZE(taken) == 0) {
        PyErr_SetString(PyExc_ImportError,
                        "an asyncio class minloop mirrors is not a transport");
        goto done;
    }
    result = PyList_AsTuple(taken);
done:
    Py_DECREF(taken);
    return result;
}

static int
add_transport_base(PyObject *module, PyObject *transports,
                   const char *const names[3])
{
    PyObject *asyncio_module = PyImport_ImportModule(names[1]);
    PyObject *counterpart, *bases;
    int rc;

    if (asyncio_module == NULL)
        return -1;
    counterpart = PyObject_GetAttrString(asyncio_module, names[2]);
    Py_DECREF(asyncio_module);
    if (counterpart == NULL)
        return -1;
    bases = bases_like(transports, counterpart);
    Py_DECREF(counterpart);
    if (bases == NULL)
        return -1;
    if (strcmp(names[0], "StreamTransportBase") == 0)
        rc = minloop_add_heap_type(module, MODULE_NAME, names[0], bases,
                                   sizeof(MinloopStreamTransportBase),
                                   stream_slots);
    else
        rc = minloop_add_heap_type(module, MODULE_NAME, names[0], bases,
                                   sizeof(MinloopTransportBase), base_slots);
    Py_DECREF(bases);
    return rc;
}

static int
add_protocol_base(PyObject *module)
{
    PyObject *protocols = PyImport_ImportModule("asyncio.protocols");
    PyObject *base;
    int rc;

    if (protocols == NULL)
        return -1;
    base = asyncio_base(protocols, "BufferedProtocol", sizeof(PyObject));
    Py_DECREF(protocols);
    if (base == NULL)
        return -1;
    rc = minloop_add_heap_type(module, MODULE_NAME, "BufferedProtocolBase", base,
                               sizeof(PyObject), protocol_slots);
    Py_DECREF(base);
    return rc;
}

static int
exec_module(PyObject *module)
{
    PyObject *transports = PyImport_ImportModule("asyncio.transports");
    size_t i;
    if (transports == NULL)
        return -1;
    for (i = 0; i < sizeof(counterparts) / sizeof(counterparts[0]); i++) {
        if (add_transport_base(module, transports, counterparts[i]) < 0) {
            Py_DECREF(transports);
            return -1;
        }
    }
    Py_DECREF(transports);
    return add_protocol_base(module);
}

/* Types only, no state: safe without the GIL (docs/threading.md), and in
 * any interpreter, any number of them. */
MINLOOP_DEFINE_MODULE(
    _transport_bases,
    "C types extending asyncio's transport classes (see transport_bases.c).",
    exec_module)
