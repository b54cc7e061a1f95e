/* py_compat: the one home of minloop's compile-time facts about the
 * interpreter (PY_VERSION_HEX gates for C and Cython verbatim blocks).
 * Facts about asyncio's behaviour are detected at run time instead, in
 * minloop/_asyncio_compat.py.  Include after Python.h. */
#ifndef MINLOOP_PY_COMPAT_H
#define MINLOOP_PY_COMPAT_H

#include <Python.h>

/* contextvars.Context's layout (ctx_prev, ctx_vars, ctx_weakreflist,
 * ctx_entered in internal/pycore_context.h) is the one 3.10-3.15 use
 * (3.14.10's and 3.15.2's headers unchanged from 3.13's); the free-threaded
 * build and later versions are not assumed to keep it (handles.pyx also
 * confirms it at import time).  Without it every callback scheduled without
 * context= copies the context, as asyncio does: on 3.14.10, 20,000
 * call_soon() calls then count 20,000 allocations towards a collection
 * (tests/test_gc_scale.py), 4 with it. */
#if PY_VERSION_HEX >= 0x030A0000 && PY_VERSION_HEX < 0x03100000 && !defined(Py_GIL_DISABLED)
#define MINLOOP_KNOWN_CONTEXT_LAYOUT 1
#else
#define MINLOOP_KNOWN_CONTEXT_LAYOUT 0
#endif

/* Where a weakly referenceable object keeps its list of weak references.
 * Up to 3.11 a class with __weakref__ in __slots__ has it inline, at
 * tp_weaklistoffset; 3.12 moved it before the object, to the pre-header
 * that Py_TPFLAGS_MANAGED_WEAKREF types have (gh-95245), and a subclass
 * inherits that flag.  handle_bases.c lays its handles out accordingly and
 * checks asyncio.Handle against it at import. */
#if PY_VERSION_HEX >= 0x030C0000
#define MINLOOP_MANAGED_WEAKREF 1
#else
#define MINLOOP_MANAGED_WEAKREF 0
#endif

/* The type flags that put two more words before a GC object, after its
 * PyGC_Head (CPython's _PyType_PreHeaderSize()): a __dict__ kept out of line
 * from 3.11, and weak references from 3.12 (gh-95245).  handle_bases.c
 * allocates its handles itself and must find the object where CPython does. */
#if PY_VERSION_HEX >= 0x030C0000
#define MINLOOP_PREHEADER_FLAGS (Py_TPFLAGS_MANAGED_DICT | Py_TPFLAGS_MANAGED_WEAKREF)
#elif PY_VERSION_HEX >= 0x030B0000
#define MINLOOP_PREHEADER_FLAGS Py_TPFLAGS_MANAGED_DICT
#else
#define MINLOOP_PREHEADER_FLAGS 0
#endif

/* A type's version tag, or 0 for none: CPython gives a type a new one
 * (never reused) whenever it or a base is modified, and a remembered tag
 * that still matches says the class is as it was (sock_ops.pyx,
 * stream_reader.pyx).  Up to 3.12 a tag counts only while the type has
 * Py_TPFLAGS_VALID_VERSION_TAG; 3.13 no longer sets that flag and keeps
 * the tag 0 whenever it is not valid (gh-119462), so there the tag alone
 * says it. */
static inline unsigned int
compat_type_version(PyObject *t)
{
    PyTypeObject *tp = (PyTypeObject *)t;
#if PY_VERSION_HEX < 0x030D0000
    if (!(tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
        return 0;
#endif
    return tp->tp_version_tag;
}

/* How stream_reader.pyx reads the attributes of asyncio's StreamReader and
 * StreamReaderProtocol instances (its own names, which their classes have
 * nothing under or only a function under).
 * 1: in obj.__dict__ (PyObject_GenericGetDict), a dict lookup.  On 3.10
 * every instance has that dict already; on 3.13 a __dict__ made for an
 * instance shares its inline values (gh-115776), so asyncio's own
 * specialised attribute reads on it run as before.
 * 0: by attribute access, which reads the inline values without making the
 * __dict__.  On 3.11 and 3.12 making the __dict__ moves the values out of
 * the instance, and asyncio's own code on it then takes slower paths: per
 * streams echo round trip +3.6k instructions on 3.11 and +5.5k on 3.12,
 * more than the dict lookups save.  From 3.14 the specializer gives up on
 * any attribute of an instance whose __dict__ is made (specialize.c,
 * specialize_dict_access: "dict was created, fail specialization"), so
 * every `self._buffer` of StreamReader.readexactly() and the rest ran as a
 * generic LOAD_ATTR: 7 a message, ~900 instructions (callgrind, 3.14.10,
 * benchmarks/server_instructions.py --kind streams-msg --depth 16). */
#if (PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000) \
    || PY_VERSION_HEX >= 0x030E0000
#define MINLOOP_READS_INSTANCE_DICT 0
#else
#define MINLOOP_READS_INSTANCE_DICT 1
#endif

/* Whether a new loop drops the (empty) instance dict Cython made for it
 * (LoopCore.__cinit__), so that `loop.call_soon` and the loop's other
 * method lookups in Python code run specialised:
 * from 3.12 the interpreter specialises a method lookup on an instance whose
 * dict sits at an offset only while that dict is not made
 * (LOAD_ATTR_METHOD_LAZY_DICT); 3.11 only while it is made and its keys
 * unchanged (LOAD_METHOD_WITH_DICT), so there the empty dict stays; 3.10
 * does not specialise. */
#if PY_VERSION_HEX >= 0x030C0000
#define MINLOOP_LAZY_INSTANCE_DICT 1
#else
#define MINLOOP_LAZY_INSTANCE_DICT 0
#endif

/* Whether `obj.name(...)` calls func(obj, ...): func is what obj's class
 * has under name (the caller has checked the class), not shadowed by an
 * attribute of obj itself.  1 or 0; -1 with an exception set.
 * Where MINLOOP_READS_INSTANCE_DICT is 0 this is _PyObject_GetMethod, the
 * lookup of the interpreter's own method calls: it reads the instance's
 * attributes where they are (in its inline values, without making a
 * __dict__) and makes no method object.  3.13 no longer declares it; there
 * (where stream_reader.pyx looks in __dict__ instead) the bound method is
 * made and looked at. */
static inline int
compat_calls_class_function(PyObject *obj, PyObject *name, PyObject *func)
{
    PyObject *found = NULL;
    int same;
#if PY_VERSION_HEX < 0x030D0000
    int unbound = _PyObject_GetMethod(obj, name, &found);
    if (found == NULL)
        return -1;
    same = unbound && found == func;
#else
    found = PyObject_GetAttr(obj, name);
    if (found == NULL)
        return -1;
    same = PyMethod_Check(found) && PyMethod_GET_FUNCTION(found) == func
           && PyMethod_GET_SELF(found) == obj;
#endif
    Py_DECREF(found);
    return same;
}

/* stream_reader.pyx feeds asyncio's StreamReader without its Python code,
 * relying on the GIL for what that code would do atomically (a bytearray
 * resized and filled): not on a free-threaded build. */
#ifdef Py_GIL_DISABLED
#define MINLOOP_FEEDS_STREAM_READERS 0
#else
#define MINLOOP_FEEDS_STREAM_READERS 1
#endif

/* stream_reader.pyx gives asyncio's StreamReader compiled steps for
 * readline(), readexactly() and read(n) where they were measured to cost
 * less than asyncio's own code (benchmarks/RESULTS.md, 2026-11-28: server
 * CPU per message on the streams rows 4-15% less on 3.10 to 3.14).
 * MINLOOP_STEPS_STREAM_READERS: readline()'s, on readers made as the
 * subclass (start_server()'s: stream_reader_class.py), everywhere.
 * MINLOOP_STEPS_STREAM_READS: readexactly()'s and read(n)'s too, and
 * readers made as asyncio's class reassigned to the subclass, before 3.15
 * only.  3.15's asyncio takes their bytes with bytearray.take_bytes() in
 * one coroutine and its interpreter reads the attributes for less than the
 * steps' dict lookups: there those steps cost 900-1,800 instructions a
 * call more, not less; and a reassigned __class__ slows every attribute
 * read of asyncio's own methods on the reader (RESULTS.md, 2026-12-03). */
#define MINLOOP_STEPS_STREAM_READERS MINLOOP_FEEDS_STREAM_READERS
#if PY_VERSION_HEX < 0x030F0000
#define MINLOOP_STEPS_STREAM_READS MINLOOP_FEEDS_STREAM_READERS
#else
#define MINLOOP_STEPS_STREAM_READS 0
#endif

/* The stall watchdog samples the loop thread's frames from its own thread
 * (stall.pyx).  With the GIL the loop's thread is parked meanwhile, at the
 * call that blocks or at a bytecode boundary; without it those frames run
 * on (and are popped) while they are read: no sample there. */
#ifdef Py_GIL_DISABLED
#define MINLOOP_SAMPLES_STACKS 0
#else
#define MINLOOP_SAMPLES_STACKS 1
#endif

/* A new reference to an object that another thread may be deallocating
 * (the fd table's borrowed transport pointers: docs/threading.md, item 15):
 * 1, or 0 if its count has already reached zero.  With the GIL no count
 * reaches zero under us.  Without it, CPython's own primitive is public
 * from 3.14.0a5 (gh-128844); the object must have been prepared for it.
 * 3.13t lacks it: there the hand-written modules keep the GIL
 * (MINLOOP_MOD_GIL), which CPython then turns back on for every module. */
#if !defined(Py_GIL_DISABLED)
#define MINLOOP_TRY_INCREF_SAFE 1
static inline int minloop_try_incref(PyObject *op) { Py_INCREF(op); return 1; }
static inline void minloop_enable_try_incref(PyObject *op) { (void)op; }
#elif PY_VERSION_HEX >= 0x030E00A5
#define MINLOOP_TRY_INCREF_SAFE 1
static inline int minloop_try_incref(PyObject *op) { return PyUnstable_TryIncRef(op); }
static inline void minloop_enable_try_incref(PyObject *op) { PyUnstable_EnableTryIncRef(op); }
#else
#define MINLOOP_TRY_INCREF_SAFE 0
static inline int minloop_try_incref(PyObject *op)
{
    if (Py_REFCNT(op) <= 0)
        return 0;
    Py_INCREF(op);
    return 1;
}
static inline void minloop_enable_try_incref(PyObject *op) { (void)op; }
#endif

/* The Py_mod_gil slot of the hand-written modules (3.13+; the Cython
 * modules declare it with their freethreading_compatible directive).  Where
 * a transport dying in another thread is not safe (3.13t, above) they say
 * the GIL is needed, and importing minloop turns it back on. */
#ifdef Py_mod_gil
#if MINLOOP_TRY_INCREF_SAFE
#define MINLOOP_MOD_GIL Py_MOD_GIL_NOT_USED
#else
#define MINLOOP_MOD_GIL Py_MOD_GIL_USED
#endif
#endif

/* The Py_mod_multiple_interpreters slot (3.12+, PEP 684): every compiled
 * module runs in an interpreter with its own GIL, one interpreter per loaded
 * copy of its file (interpreter_claim.h; minloop/_subinterpreters.py).
 * The Cython modules get the same slot from setup.py. */
#ifdef Py_mod_multiple_interpreters
#define MINLOOP_MOD_INTERPRETERS Py_MOD_PER_INTERPRETER_GIL_SUPPORTED
#endif

#endif /* MINLOOP_PY_COMPAT_H */
