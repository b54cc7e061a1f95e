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

/* Adds minloop._transport_bases.<name>: a heap type over `bases` (a class
 * or a tuple of them) with that layout and those slots. */
static int
add_type(PyObject *module, const char *name, PyObject *bases,
         Py_ssize_t basicsize, PyType_Slot *slots)
{
    char qualname[96];
    PyType_Spec spec = {
        .name = qualname,
        .basicsize = (int)basicsize,
        .itemsize = 0,
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
        .slots = slots,
    };
    PyObject *type;
    int rc;

    /* libc's snprintf, not PyOS_snprintf: a module that needs nothing from
     * libc is not linked to it, and auditwheel then cannot tell which libc
     * the wheel needs (InvalidLibcError). */
    snprintf(qualname, sizeof(qualname), "minloop._transport_bases.%s", name);
    type = PyType_FromSpecWithBases(&spec, bases);
    if (type == NULL)
        return -1;
    rc = PyModule_AddObject(module, name, type);
    if (rc < 0)
        Py_DECREF(type);
    return rc;
}

static int
add_transport_base(PyObject *module, PyObject *transports, const char *const names[3])
{
    const Py_ssize_t size = sizeof(MinloopTransportBase);
    PyObject *bases = asyncio_base(transports, names[1], size);
    int rc;

    if (bases != NULL && names[2] != NULL) {
        PyObject *second = asyncio_base(transports, names[2], size);
        PyObject *pair = second == NULL ? NULL : PyTuple_Pack(2, bases, second);
        Py_XDECREF(second);
        Py_DECREF(bases);
        bases = pair;
    }
    if (bases == NULL)
        return -1;
    rc = add_type(module, names[0], bases, size, base_slots);
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
    rc = add_type(module, "BufferedProtocolBase", base, sizeof(PyObject), protocol_slots);
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
    for (i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
        if (add_transport_base(module, transports, bases[i]) < 0) {
            Py_DECREF(transports);
            return -1;
        }
    }
    Py_DECREF(transports);
    return add_protocol_base(module);
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
