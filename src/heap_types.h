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

/* ---- the module ----------------------------------------------------------
 *
 * The definition of a module of such types, `minloop.<short_name>`, made by
 * `exec_fn` (Py_mod_exec): its slots, its PyModuleDef (no state: m_size 0)
 * and PyInit_<short_name>.  Where the running CPython has the slots, the
 * module says whether it needs the GIL (MINLOOP_MOD_GIL) and which
 * interpreters may import it (MINLOOP_MOD_INTERPRETERS); both are
 * py_compat.h's, which the including file includes (the macro names them
 * where it is expanded).  Each module says beside its expansion why those
 * values hold for it. */
#ifdef Py_mod_gil
#define MINLOOP_MODULE_GIL_SLOT {Py_mod_gil, MINLOOP_MOD_GIL},
#else
#define MINLOOP_MODULE_GIL_SLOT
#endif
#ifdef Py_mod_multiple_interpreters
#define MINLOOP_MODULE_INTERPRETERS_SLOT \
    {Py_mod_multiple_interpreters, MINLOOP_MOD_INTERPRETERS},
#else
#define MINLOOP_MODULE_INTERPRETERS_SLOT
#endif

#define MINLOOP_DEFINE_MODULE(short_name, doc, exec_fn)                         \
    static PyModuleDef_Slot short_name##_slots[] = {                            \
        {Py_mod_exec, exec_fn},                                                 \
        MINLOOP_MODULE_GIL_SLOT                                                 \
        MINLOOP_MODULE_INTERPRETERS_SLOT                                        \
        {0, NULL},                                                              \
    };                                                                          \
    static struct PyModuleDef short_name##_def = {                              \
        PyModuleDef_HEAD_INIT,                                                  \
        .m_name = "minloop." #short_name,                                       \
        .m_doc = doc,                                                           \
        .m_size = 0,                                                            \
        .m_slots = short_name##_slots,                                          \
    };                                                                          \
    PyMODINIT_FUNC                                                              \
    PyInit_##short_name(void)                                                   \
    {                                                                           \
        return PyModuleDef_Init(&short_name##_def);                             \
    }

#endif /* MINLOOP_HEAP_TYPES_H */
