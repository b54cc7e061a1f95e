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

#include <stdio.h>

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

static int
add_protocol_base(PyObject *module, const char *name, const char *asyncio_name)
{
    char qualname[96];
    PyType_Spec spec = {
        .name = qualname,
        .basicsize = sizeof(PyObject),
        .itemsize = 0,
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
        .slots = protocol_slots,
    };
    PyObject *protocols, *base, *type;
    int rc;

    snprintf(qualname, sizeof(qualname), "minloop._transport_bases.%s", name);
    protocols = PyImport_ImportModule("asyncio.protocols");
    if (protocols == NULL)
        return -1;
    base = PyObject_GetAttrString(protocols, asyncio_name);
    Py_DECREF(protocols);
    if (base == NULL)
        return -1;
    if (!PyType_Check(base) || ((PyTypeObject *)base)->tp_basicsize != sizeof(PyObject)) {
        PyErr_Format(PyExc_ImportError,
                     "asyncio.%s does not have the layout minloop was built for",
                     asyncio_name);
        Py_DECREF(base);
        return -1;
    }
    type = PyType_FromSpecWithBases(&spec, base);
    Py_DECREF(base);
    if (type == NULL)
        return -1;
    rc = PyModule_AddObject(module, name, type);
    if (rc < 0)
        Py_DECREF(type);
    return rc;
}

/* ---- the module ---------------------------------------------------------- */

/* (name of our type, the asyncio class it extends, a second one or NULL).
 * asyncio's datagram transport is a Transport too (its selector class
 * derives from _SelectorTransport; 3.12 added DatagramTransport to its
 * bases): isinstance(t, asyncio.Transport) holds for it, so for ours. */
static const char *const bases[][3] = {
    {"StreamTransportBase", "Transport", NULL},
    {"DatagramTransportBase", "Transport", "DatagramTransport"},
    {"ReadTransportBase", "ReadTransport", NULL},
    {"WriteTransportBase", "WriteTransport", NULL},
    {"SubprocessTransportBase", "SubprocessTransport", NULL},
};

/* A new reference to asyncio.transports.<name>, checked to have the
 * layout transport_bases.h describes. */
static PyObject *
asyncio_base(PyObject *transports, const char *asyncio_name)
{
    PyObject *base = PyObject_GetAttrString(transports, asyncio_name);
    if (base == NULL)
        return NULL;
    if (!PyType_Check(base) || ((PyTypeObject *)base)->tp_basicsize != sizeof(MinloopTransportBase)) {
        PyErr_Format(PyExc_ImportError,
                     "asyncio.%s does not have the layout minloop was built for",
                     asyncio_name);
        Py_DECREF(base);
        return NULL;
    }
    return base;
}

static int
add_base_type(PyObject *module, PyObject *transports, const char *const names[3])
{
    char qualname[96];
    PyType_Spec spec = {
        .name = qualname,
        .basicsize = sizeof(MinloopTransportBase),
        .itemsize = 0,
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
        .slots = base_slots,
    };
    PyObject *first, *second, *type;
    int rc;

    /* libc's snprintf, not PyOS_snprintf: a module that needs nothing from
     * libc is not linked to it, and auditwheel then cannot tell which libc
     * the wheel needs (InvalidLibcError). */
    snprintf(qualname, sizeof(qualname), "minloop._transport_bases.%s", names[0]);
    first = asyncio_base(transports, names[1]);
    if (first == NULL)
        return -1;
    if (names[2] == NULL) {
        type = PyType_FromSpecWithBases(&spec, first);
    }
    else {
        PyObject *pair;
        second = asyncio_base(transports, names[2]);
        if (second == NULL) {
            Py_DECREF(first);
            return -1;
        }
        pair = PyTuple_Pack(2, first, second);
        Py_DECREF(second);
        type = pair == NULL ? NULL : PyType_FromSpecWithBases(&spec, pair);
        Py_XDECREF(pair);
    }
    Py_DECREF(first);
    if (type == NULL)
        return -1;
    rc = PyModule_AddObject(module, names[0], type);
    if (rc < 0)
        Py_DECREF(type);
    return rc;
}

static int
exec_module(PyObject *module)
{
    PyObject *transports = PyImport_ImportModule("asyncio.transports");
    size_t i;
    if (transports == NULL)
        return -1;
    for (i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
        if (add_base_type(module, transports, bases[i]) < 0) {
            Py_DECREF(transports);
            return -1;
        }
    }
    Py_DECREF(transports);
    return add_protocol_base(module, "BufferedProtocolBase", "BufferedProtocol");
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "minloop._transport_bases",
    .m_doc = "C types extending asyncio's transport classes (see transport_bases.c).",
    .m_size = 0,
    .m_slots = module_slots,
};

PyMODINIT_FUNC
PyInit__transport_bases(void)
{
    return PyModuleDef_Init(&module_def);
}
