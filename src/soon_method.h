/* LoopCore.call_soon's Python entry: asyncio's signature
 * (callback, *args, context=None), parsed by hand.
 *
 * Why not Cython's own parser: asyncio's C Task (and the C Future, for its
 * done callbacks) calls loop.call_soon(step, context=ctx) at every task step
 * with a keyword name that is its own string object, not the interned
 * "context".  Cython matches keyword names by identity against its interned
 * names and, on a miss, by hash and memcmp: about 125 instructions more per
 * task step.  This entry compares by identity too, and on a miss by value;
 * a name that matched by value is kept (one per entry, for good), so that
 * the C Task's string matches by identity from its second call on.
 *
 * The entry is a method descriptor of its own (vectorcall, with
 * Py_TPFLAGS_METHOD_DESCRIPTOR, so that loop.call_soon(...) calls it without
 * making a bound method), and checks its `self` (Cython's function type,
 * which loop.pyx uses for its cheaper calls, does not).  Not CPython's
 * method descriptor: 3.12+ specialize its calls for an instance of its very
 * class only, and loops are instances of a subclass (Loop), so each call
 * would fall back to the generic path.
 *
 * Bound (`call_soon = loop.call_soon`, as code that schedules many
 * callbacks does), it is a builtin method over a PyMethodDef of its own:
 * the interpreter specializes calls of those (3.14: about 85 instructions
 * per call fewer than a bound-method object over this type). */
#ifndef MINLOOP_SOON_METHOD_H
#define MINLOOP_SOON_METHOD_H

#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The method's body: `args` is a tuple, `context` None when not given. */
typedef PyObject *(*soon_body)(PyObject *self, PyObject *callback,
                               PyObject *args, PyObject *context);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *owner;        /* the class whose method this is */
    PyObject *name;             /* "call_soon" */
    PyObject *qualname;         /* "LoopCore.call_soon" */
    PyObject *doc;
    PyObject *callback_name;    /* interned "callback" */
    PyObject *context_name;     /* interned "context" */
    /* A "context" that matched by value (an exact str), held for as long
     * as this entry lives: its address can then never be another string's.
     * Set once (compare-and-swap: the free-threaded build may race here). */
    PyObject *context_alias;
    PyObject *no_args;          /* () */
    soon_body body;
    PyMethodDef *def;           /* what a bound one calls (soon_defs) */
} SoonMethod;

/* Keyword name `key` is `name`, or `alias` (-1: key is not a str). */
static inline int
soon_name_is(PyObject *key, PyObject *name, PyObject *alias)
{
    if (key == name || (alias != NULL && key == alias))
        return 1;
    if (!PyUnicode_Check(key))
        return -1;
    return PyUnicode_Compare(key, name) == 0;
}

/* Takes callback= and context= from the keywords (values `kwvalues`, names
 * `kwnames`) into *callback and *context.  Out of the common path: a
 * Python caller seldom passes keywords. */
static __attribute__((noinline)) int
soon_method_keywords(SoonMethod *m, PyObject *const *kwvalues, PyObject *kwnames,
                     PyObject **callback, PyObject **context)
{
    Py_ssize_t i, nkw = PyTuple_GET_SIZE(kwnames);

    for (i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        PyObject *alias = __atomic_load_n(&m->context_alias, __ATOMIC_ACQUIRE);
        int is = soon_name_is(key, m->context_name, alias);
        if (is == 1) {
            *context = kwvalues[i];
            if (key != m->context_name && key != alias && alias == NULL
                    && PyUnicode_CheckExact(key)) {
                PyObject *expected = NULL;
                Py_INCREF(key);
                if (!__atomic_compare_exchange_n(&m->context_alias, &expected, key, 0,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                    Py_DECREF(key);  /* another thread set one first */
            }
            continue;
        }
        if (is == 0)
            is = soon_name_is(key, m->callback_name, NULL);
        if (is == 1) {
            if (*callback != NULL) {
                PyErr_Format(PyExc_TypeError,
                             "%U() got multiple values for keyword argument '%U'",
                             m->name, key);
                return -1;
            }
            *callback = kwvalues[i];
            continue;
        }
        if (is < 0) {
            PyErr_Format(PyExc_TypeError, "%U() keywords must be strings", m->name);
            return -1;
        }
        PyErr_Format(PyExc_TypeError,
                     "%U() got an unexpected keyword argument '%U'", m->name, key);
        return -1;
    }
    return 0;
}

/* `self` is a loop: a Loop (base_events.py), whose base with a layout is
 * LoopCore, so a check cheaper than PyType_IsSubtype's walk of the MRO
 * comes first. */
static inline int
soon_method_check_self(SoonMethod *m, PyObject *self)
{
    if (Py_TYPE(self)->tp_base == m->owner || PyObject_TypeCheck(self, m->owner))
        return 0;
    PyErr_Format(PyExc_TypeError,
                 "descriptor '%U' for '%.100s' objects doesn't apply to a '%.100s' object",
                 m->name, m->owner->tp_name, Py_TYPE(self)->tp_name);
    return -1;
}

/* The call, `self` checked and `args` the arguments after it. */
static inline PyObject *
soon_method_call(SoonMethod *m, PyObject *self, PyObject *const *args,
                 Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *callback, *context = Py_None, *rest, *result;
    Py_ssize_t i;

    callback = nargs >= 1 ? args[0] : NULL;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0
            && soon_method_keywords(m, args + nargs, kwnames, &callback, &context) < 0)
        return NULL;
    if (callback == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%U() takes at least 1 positional argument (0 given)", m->name);
        return NULL;
    }
    if (nargs <= 1) {
        rest = m->no_args;
        Py_INCREF(rest);
    } else {
        rest = PyTuple_New(nargs - 1);
        if (rest == NULL)
            return NULL;
        for (i = 1; i < nargs; i++) {
            Py_INCREF(args[i]);
            PyTuple_SET_ITEM(rest, i - 1, args[i]);
        }
    }
    result = m->body(self, callback, rest, context);
    Py_DECREF(rest);
    return result;
}

/* Unbound, or loop.call_soon(...) (the interpreter passes the loop first). */
static PyObject *
soon_method_vectorcall(PyObject *func, PyObject *const *args, size_t nargsf,
                       PyObject *kwnames)
{
    SoonMethod *m = (SoonMethod *)func;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);

    if (nargs < 1) {
        PyErr_Format(PyExc_TypeError, "%U() needs an argument", m->name);
        return NULL;
    }
    if (soon_method_check_self(m, args[0]) < 0)
        return NULL;
    return soon_method_call(m, args[0], args + 1, nargs - 1, kwnames);
}

/* Bound: a PyMethodDef's function has no state of its own, so each entry
 * has a function of its own, over its slot here (set once, at import, and
 * kept for the process's life, as the builtin methods point to them). */
#define SOON_METHODS 2
static SoonMethod *soon_owners[SOON_METHODS];
static PyMethodDef soon_defs[SOON_METHODS];

#define SOON_BOUND_ENTRY(i)                                                    \
    static PyObject *                                                          \
    soon_bound_##i(PyObject *self, PyObject *const *args, Py_ssize_t nargs,    \
                   PyObject *kwnames)                                          \
    {                                                                          \
        return soon_method_call(soon_owners[i], self, args, nargs, kwnames);   \
    }
SOON_BOUND_ENTRY(0)
SOON_BOUND_ENTRY(1)

static PyObject *(*const soon_bound[SOON_METHODS])(PyObject *, PyObject *const *,
                                                   Py_ssize_t, PyObject *) = {
    soon_bound_0, soon_bound_1,
};

static PyObject *
soon_method_get(PyObject *func, PyObject *obj, PyObject *type)
{
    SoonMethod *m = (SoonMethod *)func;
    (void)type;
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(func);
        return func;
    }
    /* Checked once here: the builtin method calls the body as is. */
    if (soon_method_check_self(m, obj) < 0)
        return NULL;
    return PyCFunction_NewEx(m->def, obj, NULL);
}

static void
soon_method_dealloc(PyObject *op)
{
    SoonMethod *m = (SoonMethod *)op;
    Py_XDECREF((PyObject *)m->owner);
    Py_XDECREF(m->name);
    Py_XDECREF(m->qualname);
    Py_XDECREF(m->doc);
    Py_XDECREF(m->callback_name);
    Py_XDECREF(m->context_name);
    Py_XDECREF(m->context_alias);
    Py_XDECREF(m->no_args);
    PyObject_Free(op);
}

static PyObject *
soon_method_repr(PyObject *op)
{
    SoonMethod *m = (SoonMethod *)op;
    return PyUnicode_FromFormat("<method '%U' of '%.100s' objects>",
                                m->name, m->owner->tp_name);
}

static PyObject *
soon_method_text_signature(PyObject *op, void *closure)
{
    (void)op; (void)closure;
    return PyUnicode_FromString("($self, callback, *args, context=None)");
}

static PyMemberDef soon_method_members[] = {
    {"__name__", T_OBJECT, offsetof(SoonMethod, name), READONLY, NULL},
    {"__qualname__", T_OBJECT, offsetof(SoonMethod, qualname), READONLY, NULL},
    {"__doc__", T_OBJECT, offsetof(SoonMethod, doc), READONLY, NULL},
    {"__objclass__", T_OBJECT, offsetof(SoonMethod, owner), READONLY, NULL},
    {NULL}
};

static PyObject *
soon_method_module(PyObject *op, void *closure)
{
    (void)closure;
    return PyObject_GetAttrString((PyObject *)((SoonMethod *)op)->owner, "__module__");
}

static PyGetSetDef soon_method_getset[] = {
    {"__text_signature__", soon_method_text_signature, NULL, NULL, NULL},
    {"__module__", soon_method_module, NULL, NULL, NULL},
    {NULL}
};

static PyTypeObject SoonMethod_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "minloop.loop.soon_method",
    .tp_basicsize = sizeof(SoonMethod),
    .tp_dealloc = soon_method_dealloc,
    .tp_vectorcall_offset = offsetof(SoonMethod, vectorcall),
    .tp_repr = soon_method_repr,
    .tp_call = PyVectorcall_Call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_members = soon_method_members,
    .tp_getset = soon_method_getset,
    .tp_descr_get = soon_method_get,
};

/* Puts a SoonMethod named `name` calling `body`, with docstring `doc`, in
 * the class `owner`'s dict (a static type's: done once, at module import,
 * before any subclass exists). */
static int
soon_method_install(PyObject *owner, const char *name, soon_body body,
                    const char *doc)
{
    static int installed = 0;
    PyTypeObject *type = (PyTypeObject *)owner;
    const char *short_name = strrchr(type->tp_name, '.');
    SoonMethod *m;
    PyMethodDef *def;
    char *full_doc;
    size_t size;
    int rc;

    if (installed == SOON_METHODS) {
        PyErr_SetString(PyExc_RuntimeError, "soon_method.h: no entry left");
        return -1;
    }
    if (PyType_Ready(&SoonMethod_Type) < 0)
        return -1;
    /* The bound method's: "name($self, callback, *args, context=None)\n--\n\n"
     * + doc, the form inspect.signature() reads a builtin's signature from. */
    size = strlen(name) + strlen(doc) + 64;
    full_doc = PyMem_RawMalloc(size);
    if (full_doc == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    snprintf(full_doc, size, "%s($self, callback, *args, context=None)\n--\n\n%s",
             name, doc);
    def = &soon_defs[installed];
    def->ml_name = name;
    def->ml_meth = (PyCFunction)(void (*)(void))soon_bound[installed];
    def->ml_flags = METH_FASTCALL | METH_KEYWORDS;
    def->ml_doc = full_doc;
    m = PyObject_New(SoonMethod, &SoonMethod_Type);
    if (m == NULL)
        return -1;
    m->vectorcall = soon_method_vectorcall;
    m->body = body;
    m->def = def;
    m->context_alias = NULL;
    Py_INCREF(owner);
    m->owner = type;
    m->name = PyUnicode_InternFromString(name);
    m->qualname = PyUnicode_FromFormat("%s.%s",
                                       short_name ? short_name + 1 : type->tp_name, name);
    m->doc = PyUnicode_FromString(doc);
    m->callback_name = PyUnicode_InternFromString("callback");
    m->context_name = PyUnicode_InternFromString("context");
    m->no_args = PyTuple_New(0);
    if (m->name == NULL || m->qualname == NULL || m->doc == NULL
            || m->callback_name == NULL || m->context_name == NULL
            || m->no_args == NULL) {
        Py_DECREF(m);
        return -1;
    }
    /* The slot keeps the entry alive, for its builtin methods. */
    soon_owners[installed++] = m;
    rc = PyDict_SetItemString(type->tp_dict, name, (PyObject *)m);
    PyType_Modified(type);
    return rc;
}

#endif /* MINLOOP_SOON_METHOD_H */
