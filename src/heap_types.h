/* Making the C base types that put asyncio's classes in our types' MRO
 * (transport_bases.c, handle_bases.c): a heap type over asyncio's class,
 * added to the module that makes it. */
#ifndef MINLOOP_HEAP_TYPES_H
#define MINLOOP_HEAP_TYPES_H

#include <Python.h>
#include <stdio.h>

/* Adds <module_name>.<name> to `module`: a heap type over `bases` (a class,
 * or a tuple of them) with that layout and those slots. */
static int
minloop_add_heap_type(PyObject *module, const char *module_name,
                      const char *name, PyObject *bases,
                      Py_ssize_t basicsize, PyType_Slot *slots)
{
    char qualname[128];
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
    snprintf(qualname, sizeof(qualname), "%s.%s", module_name, name);
    type = PyType_FromSpecWithBases(&spec, bases);
    if (type == NULL)
        return -1;
    rc = PyModule_AddObject(module, name, type);
    if (rc < 0)
        Py_DECREF(type);
    return rc;
}

#endif /* MINLOOP_HEAP_TYPES_H */
