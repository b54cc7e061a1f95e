/* minloop._handle_bases: the C types under minloop's Handle and TimerHandle.
 *
 * Why this module exists: programs check isinstance(h, asyncio.Handle) and
 * isinstance(h, asyncio.TimerHandle), so our compiled handles must have
 * asyncio's classes in their MRO.  Three facts shape how:
 *
 *  - CPython refuses a type whose two bases both extend asyncio.Handle's
 *    layout ("multiple bases have instance lay-out conflict"), so our
 *    TimerHandle cannot extend both our Handle and asyncio.TimerHandle.
 *    The two are siblings instead: HandleBase extends asyncio.Handle,
 *    TimerHandleBase asyncio.TimerHandle, a timer's layout a handle's and
 *    three words more (handle_bases.h), and the Cython classes
 *    minloop.handles.Handle / TimerHandle extend them, adding methods
 *    only.  The loop reads both through the fields they share.
 *  - asyncio's classes are heap types, and CPython refuses a static type
 *    whose base is a heap type: these types and the Cython ones above them
 *    are heap types (handles.pyx builds with CYTHON_USE_TYPE_SPECS).
 *  - asyncio's classes deallocate, traverse and clear with CPython's
 *    generic subtype_* functions, which walk every slot asyncio declared.
 *    The types here end that chain: their slots below handle the whole
 *    object, and handles.pyx gives the Cython types these same slots (they
 *    add no field, so Cython's generated ones would only chain here, at the
 *    cost of an indirect call and a GC untrack/track per handle).
 *
 * Handles are made by the thousand per loop iteration, so tp_new and
 * tp_dealloc keep dead handles on free lists, one per layout (a Handle is
 * three words smaller than a TimerHandle, handle_bases.h): a handle taken
 * from one is not counted by the cycle collector as an allocation (it
 * starts a young collection every 700 of those).
 *
 * A third type, ThreadSafeHandleBase, extends asyncio's _ThreadSafeHandle
 * (3.14+; asyncio.Handle before, unused there) with a Handle's layout and
 * slots, and its free list: what call_soon_threadsafe() returns
 * (handles.pyx). */
#define PY_SSIZE_T_CLEAN
#include "handle_bases.h"
#include "heap_types.h"
#include "interpreter_claim.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <structmember.h>   /* PyMemberDef, T_OBJECT_EX (3.10/3.11 names) */

/* A TimerHandle is a Handle and three words: the loop reads either through
 * MinloopHandle, so the fields they share sit at the same offsets, and the
 * timer's own start where a Handle ends. */
typedef char minloop_timer_extends_handle[
    (offsetof(MinloopTimerHandle, _queued) == offsetof(MinloopHandle, _queued) &&
     offsetof(MinloopTimerHandle, _arg1) == offsetof(MinloopHandle, _arg1) &&
     offsetof(MinloopTimerHandle, _when) == sizeof(MinloopHandle)) ? 1 : -1];

/* ---- the free lists ------------------------------------------------------ */

/* At most this many dead handles of each layout are kept (about 1.1 MiB
 * in all).  The lists are process-wide and unlocked: the GIL serialises
 * every handle's birth and death.  The free-threaded build has no GIL to
 * lean on (handles die in any thread), so there it keeps none and every
 * handle comes from tp_alloc. */
#ifndef Py_GIL_DISABLED
#define FREE_LIST_SIZE 4096
#else
#define FREE_LIST_SIZE 1
#endif

/* [LAYOUT_HANDLE]: MinloopHandle; [LAYOUT_TIMER]: MinloopTimerHandle.  The
 * functions that take a layout are inlined where it is a constant, so each
 * type's tp_new and tp_dealloc test and copy what that layout needs only
 * (gcc did not inline them on its own: 30 instructions a timer more). */
#define MINLOOP_INLINED __attribute__((always_inline))
enum { LAYOUT_HANDLE = 0, LAYOUT_TIMER = 1 };
static PyObject *free_list[2][FREE_LIST_SIZE];
static int free_count[2] = {0, 0};

#ifndef Py_GIL_DISABLED
#define FREE_LIST_KEEPS(layout) (free_count[layout] < FREE_LIST_SIZE)
#else
#define FREE_LIST_KEEPS(layout) 0
#endif

static void handle_dealloc(PyObject *self);
static void timer_handle_dealloc(PyObject *self);

/* A layout's size and its types' tp_dealloc. */
static inline MINLOOP_INLINED size_t
layout_size(int layout)
{
    return layout == LAYOUT_HANDLE ? sizeof(MinloopHandle)
                                   : sizeof(MinloopTimerHandle);
}

static inline MINLOOP_INLINED destructor
layout_dealloc(int layout)
{
    return layout == LAYOUT_HANDLE ? handle_dealloc : timer_handle_dealloc;
}

/* Each layout has its own tp_new and tp_dealloc (below), which know it.
 * Only instances of a type that keeps that layout exactly and deallocates
 * with that layout's tp_dealloc (ours and the Cython types given our
 * slots) go on its free list: a Python subclass deallocates through
 * subtype_dealloc and may add a __dict__, so its memory is not
 * interchangeable with ours. */
static inline MINLOOP_INLINED int
recyclable(PyTypeObject *type, int layout)
{
    return type->tp_dealloc == layout_dealloc(layout) &&
           type->tp_basicsize == (Py_ssize_t)layout_size(layout) &&
           type->tp_itemsize == 0;
}

/* ---- memory the collector does not count --------------------------------- *
 *
 * CPython starts a young collection when the objects it allocated for the
 * collector, less those it freed, pass 700 (gc.get_threshold()[0]); each of
 * those collections walks every object made since the last.  A loop makes
 * and frees a handle per callback, timer and wake-up: counted, a burst of
 * them (100k timers firing) ends that count's balance between the
 * program's own objects, and a collection lands in the middle of a burst,
 * walking hundreds of thousands of young objects cold from the cache.  A
 * handle the loop holds is not even tracked (handles.pxd), so it is no
 * candidate for a collection to find.  So our handles are allocated and
 * freed here, as PyType_GenericAlloc() and PyObject_GC_Del() would, less
 * the count: the same memory, the same header, tracked by the same calls.
 *
 * Python 3.14 raised the threshold to 2000, and 3.14.0-3.14.4 made the
 * collector incremental: what 2000 net new objects then start is an
 * increment (generation 1 to gc.callbacks) that walks the young objects and
 * a slice of the old ones, so what keeps a young collection away keeps an
 * increment away too.  That collector's source counts an object when it is
 * tracked and uncounts it when untracked (pycore_gc.h), rather than at
 * allocation: there a handle counts only while tracked, and not while the
 * loop holds it untracked.  3.14.5 went back to the generational collector
 * (threshold 2000 kept), counting at allocation as here.  Measured on
 * 3.14.10 with gc.get_count() and gc.callbacks (tests/test_gc_scale.py):
 * 20,000 call_soon() and 20,000 call_later() handles held by the program
 * count 6 (asyncio: 120,011); a second burst of 2,000 handles run and
 * dropped, 11; 20,000 sleeping tasks woken together start no collection
 * (asyncio: 18 young and 1 of generation 1).  That needs handles.pyx's
 * shared context snapshots there too (py_compat.h,
 * MINLOOP_KNOWN_CONTEXT_LAYOUT): without them each handle's own context copy
 * counts, 20,004 for the 20,000 call_soon() handles, and the wake-up burst
 * starts 10 young collections.  Not run on 3.14.0-3.14.4 here.
 *
 * The free-threaded build finds GC objects by walking its own heaps, so
 * there they come from tp_alloc as usual. */

#ifndef Py_GIL_DISABLED

/* The bytes before a GC object: its PyGC_Head (two words since 3.8), then
 * two more where the type keeps its __dict__ or weak references out of line
 * (py_compat.h, MINLOOP_PREHEADER_FLAGS). */
static size_t
preheader_size(PyTypeObject *type)
{
    size_t size = 2 * sizeof(void *);
    if (type->tp_flags & MINLOOP_PREHEADER_FLAGS)
        size += 2 * sizeof(PyObject *);
    return size;
}

static PyObject *
uncounted_alloc(PyTypeObject *type)
{
    size_t pre = preheader_size(type);
    size_t size = pre + (size_t)type->tp_basicsize;
    char *mem = PyObject_Malloc(size);
    PyObject *op;
    if (mem == NULL)
        return PyErr_NoMemory();
    /* A zeroed PyGC_Head is an untracked object's. */
    memset(mem, 0, size);
    op = (PyObject *)(mem + pre);
    (void)PyObject_Init(op, type);   /* takes a type reference */
    PyObject_GC_Track(op);
    return op;
}

/* `op` is untracked (its dealloc untracked it). */
static void
uncounted_free(PyObject *op)
{
    PyObject_Free((char *)op - preheader_size(Py_TYPE(op)));
}

#else

static PyObject *
uncounted_alloc(PyTypeObject *type)
{
    return type->tp_alloc(type, 0);
}

static void
uncounted_free(PyObject *op)
{
    Py_TYPE(op)->tp_free(op);
}

#endif

/* ---- the slots ----------------------------------------------------------- */

/* A new handle of `type`, a type of `layout` or a subclass of one: zeroed
 * but for its header, tracked.  Its object fields are NULL, which Cython
 * code must never see: the callers below fill them at once. */
static inline MINLOOP_INLINED MinloopHandle *
alloc_handle(PyTypeObject *type, int layout)
{
    MinloopHandle *h;
    int recycled = recyclable(type, layout);
    if (recycled && free_count[layout] > 0) {
        h = (MinloopHandle *)free_list[layout][--free_count[layout]];
        /* Its weak references were cleared and its fields NULLed when it
         * died; zero the C fields and make it a new object of `type`.  (A
         * size the compiler knows: a few stores, not a call of memset.) */
        memset((char *)h + sizeof(PyObject), 0,
               layout_size(layout) - sizeof(PyObject));
        (void)PyObject_Init((PyObject *)h, type);   /* takes a type reference */
        PyObject_GC_Track(h);
    }
    else if (recycled) {
        h = (MinloopHandle *)uncounted_alloc(type);   /* zeroed, tracked */
        if (h == NULL)
            return NULL;
    }
    else {
        h = (MinloopHandle *)type->tp_alloc(type, 0);   /* zeroed, tracked */
        if (h == NULL)
            return NULL;
    }
    if (layout == LAYOUT_TIMER)
        ((MinloopTimerHandle *)h)->_heap_pos = -1;
    return h;
}

/* A new handle of `type` (whose tp_new this is), every field None. */
static inline MINLOOP_INLINED PyObject *
new_handle(PyTypeObject *type, int layout)
{
    MinloopHandle *h = alloc_handle(type, layout);
    if (h == NULL)
        return NULL;
    /* Cython assumes object fields are never NULL. */
    Py_INCREF(Py_None); h->_args = Py_None;
    Py_INCREF(Py_None); h->_callback = Py_None;
    Py_INCREF(Py_False); h->_cancelled = Py_False;
    Py_INCREF(Py_None); h->_context = Py_None;
    Py_INCREF(Py_None); h->_loop = Py_None;
    Py_INCREF(Py_None); h->_repr = Py_None;
    Py_INCREF(Py_None); h->_source_traceback = Py_None;
    return (PyObject *)h;
}

/* A new handle of `type` to call `callback` with `args` (a tuple) in
 * `context` for `loop`, each field set once: handles.pyx makes every
 * handle here (through MinloopHandleCAPI), where tp_new and then Cython's
 * assignments would store each field twice, with a reference count
 * changed both times.  One or two arguments are kept inline (handles.pyx,
 * "Arguments"). */
static inline MINLOOP_INLINED PyObject *
make_handle(PyTypeObject *type, int layout, int threadsafe, PyObject *callback,
            PyObject *args, PyObject *context, PyObject *loop)
{
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    /* A _ThreadSafeHandle's _arg1 is its _runner (handle_bases.h). */
    Py_ssize_t max_inline = threadsafe ? 1 : 2;
    MinloopHandle *h;
    /* `context` may be borrowed from handles.pyx's snapshot cache, which
     * Python code run by an allocation (a collection's finalizers) could
     * drop: hold it first. */
    Py_INCREF(context);
    h = alloc_handle(type, layout);
    if (h == NULL) {
        Py_DECREF(context);
        return NULL;
    }
    h->_context = context;
    h->_threadsafe = (uint32_t)threadsafe;
    if (nargs >= 1 && nargs <= max_inline) {
        h->_arg0 = Py_NewRef(PyTuple_GET_ITEM(args, 0));
        if (nargs == 2)
            h->_arg1 = Py_NewRef(PyTuple_GET_ITEM(args, 1));
        h->_inline_args = (uint32_t)nargs;
        args = Py_None;
    }
    h->_args = Py_NewRef(args);
    h->_callback = Py_NewRef(callback);
    h->_cancelled = Py_NewRef(Py_False);
    h->_loop = Py_NewRef(loop);
    h->_repr = Py_NewRef(Py_None);
    h->_source_traceback = Py_NewRef(Py_None);
    return (PyObject *)h;
}

static PyObject *
make_plain_handle(PyTypeObject *type, PyObject *callback, PyObject *args,
                  PyObject *context, PyObject *loop)
{
    return make_handle(type, LAYOUT_HANDLE, 0, callback, args, context, loop);
}

static PyObject *
make_timer_handle(PyTypeObject *type, PyObject *callback, PyObject *args,
                  PyObject *context, PyObject *loop)
{
    return make_handle(type, LAYOUT_TIMER, 0, callback, args, context, loop);
}

static PyObject *
make_threadsafe_handle(PyTypeObject *type, PyObject *callback, PyObject *args,
                       PyObject *context, PyObject *loop)
{
    return make_handle(type, LAYOUT_HANDLE, 1, callback, args, context, loop);
}

static MinloopHandleCAPI handle_capi = {make_plain_handle, make_timer_handle,
                                        make_threadsafe_handle};

static PyObject *
handle_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return new_handle(type, LAYOUT_HANDLE);
}

static PyObject *
timer_handle_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    return new_handle(type, LAYOUT_TIMER);
}

/* A _ThreadSafeHandle is one from birth: its _arg1 is _runner. */
static PyObject *
threadsafe_handle_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *h = new_handle(type, LAYOUT_HANDLE);
    if (h != NULL)
        ((MinloopHandle *)h)->_threadsafe = 1;
    return h;
}

static int
handle_traverse(PyObject *self, visitproc visit, void *arg)
{
    MinloopHandle *h = (MinloopHandle *)self;
    /* Instances of heap types own a reference to their type. */
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(h->_args);
    Py_VISIT(h->_callback);
    Py_VISIT(h->_cancelled);
    Py_VISIT(h->_context);
    Py_VISIT(h->_loop);
    Py_VISIT(h->_repr);
    Py_VISIT(h->_source_traceback);
    Py_VISIT(h->_arg0);
    if (!h->_threadsafe)
        Py_VISIT(h->_arg1);
    return 0;
}

/* Sets `*field` to None (not NULL: Cython code reads these fields). */
static inline void
set_none(PyObject **field)
{
    PyObject *old = *field;
    Py_INCREF(Py_None);
    *field = Py_None;
    Py_XDECREF(old);
}

static int
handle_clear(PyObject *self)
{
    MinloopHandle *h = (MinloopHandle *)self;
    set_none(&h->_args);
    set_none(&h->_callback);
    set_none(&h->_context);
    set_none(&h->_loop);
    set_none(&h->_repr);
    set_none(&h->_source_traceback);
    h->_inline_args = 0;
    Py_CLEAR(h->_arg0);
    if (!h->_threadsafe)
        Py_CLEAR(h->_arg1);
    return 0;
}

static inline MINLOOP_INLINED void
dealloc_handle(PyObject *self, int layout)
{
    MinloopHandle *h = (MinloopHandle *)self;
    PyTypeObject *type = Py_TYPE(self);
    PyObject **weakrefs = (PyObject **)((char *)self + type->tp_weaklistoffset);

    PyObject_GC_UnTrack(self);   /* a no-op if the loop untracked it */
    /* Before the handle can return to a free list, so that no weak
     * reference to the dead handle finds its next life. */
    if (*weakrefs != NULL)
        PyObject_ClearWeakRefs(self);
    Py_CLEAR(h->_args);
    Py_CLEAR(h->_callback);
    Py_CLEAR(h->_cancelled);
    Py_CLEAR(h->_context);
    Py_CLEAR(h->_loop);
    Py_CLEAR(h->_repr);
    Py_CLEAR(h->_source_traceback);
    Py_CLEAR(h->_arg0);
    if (!h->_threadsafe)   /* else it is _runner (handle_bases.h) */
        Py_CLEAR(h->_arg1);
    if (!recyclable(type, layout))
        type->tp_free(self);
    else if (FREE_LIST_KEEPS(layout))
        free_list[layout][free_count[layout]++] = self;
    else
        uncounted_free(self);
    Py_DECREF(type);
}

static void
handle_dealloc(PyObject *self)
{
    dealloc_handle(self, LAYOUT_HANDLE);
}

static void
timer_handle_dealloc(PyObject *self)
{
    dealloc_handle(self, LAYOUT_TIMER);
}

/* ---- asyncio's surface ---------------------------------------------------
 *
 * What every kind of handle shows Python the same way, written once for the
 * three types: the constructor refused, __repr__, get_context(),
 * cancelled(), and a read-only property over each of asyncio.Handle's
 * __slots__.  The Cython classes above (handles.pyx) add what differs
 * between the kinds or needs the loop's code: _repr_info(), cancel(),
 * _run(), a timer's when(), ordering and own slots.  Every name asyncio's
 * classes define is defined here or there, so none of asyncio's code runs
 * on our objects unless called explicitly through asyncio's class; then
 * its assignments meet these read-only properties and raise
 * AttributeError, before anything changes. */

static int
handle_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    PyErr_SetString(PyExc_TypeError,
                    "minloop handles are created by the event loop "
                    "(call_soon, call_later, call_at)");
    return -1;
}

/* asyncio's: the repr frozen by a cancel() in debug mode, else made of
 * _repr_info() (each kind's own). */
static PyObject *
handle_repr(PyObject *self)
{
    MinloopHandle *h = (MinloopHandle *)self;
    PyObject *info, *sep, *joined, *repr;
    minloop_handle_check_slots(h);
    if (h->_repr != Py_None)
        return Py_NewRef(h->_repr);
    info = PyObject_CallMethod(self, "_repr_info", NULL);
    if (info == NULL)
        return NULL;
    sep = PyUnicode_FromString(" ");
    joined = sep == NULL ? NULL : PyUnicode_Join(sep, info);
    Py_XDECREF(sep);
    Py_DECREF(info);
    if (joined == NULL)
        return NULL;
    repr = PyUnicode_FromFormat("<%U>", joined);
    Py_DECREF(joined);
    return repr;
}

static PyObject *
handle_get_context(PyObject *self, PyObject *unused)
{
    return minloop_handle_own_context(self);
}

/* A _ThreadSafeHandle's own (handles.pyx) asks its monitor instead. */
static PyObject *
handle_cancelled(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(((MinloopHandle *)self)->_cancelled == Py_True);
}

static PyMethodDef handle_methods[] = {
    {"get_context", handle_get_context, METH_NOARGS, NULL},
    {"cancelled", handle_cancelled, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

/* The slot at `offset`, an object (None for one deleted through asyncio's
 * descriptor: minloop_handle_check_slots()). */
static PyObject *
get_slot(PyObject *self, void *offset)
{
    minloop_handle_check_slots(self);
    return Py_NewRef(*(PyObject **)((char *)self + (size_t)offset));
}

static PyObject *
get_args(PyObject *self, void *unused)
{
    return minloop_handle_args(self);
}

static PyObject *
get_cancelled(PyObject *self, void *unused)
{
    return handle_cancelled(self, NULL);
}

static PyObject *
get_context(PyObject *self, void *unused)
{
    return minloop_handle_own_context(self);
}

#define SLOT_PROPERTY(name) \
    {#name, get_slot, NULL, NULL, (void *)offsetof(MinloopHandle, name)}

static PyGetSetDef handle_getset[] = {
    {"_args", get_args, NULL, NULL, NULL},
    SLOT_PROPERTY(_callback),
    {"_cancelled", get_cancelled, NULL, NULL, NULL},
    {"_context", get_context, NULL, NULL, NULL},
    SLOT_PROPERTY(_loop),
    SLOT_PROPERTY(_repr),
    SLOT_PROPERTY(_source_traceback),
    {NULL, NULL, NULL, NULL, NULL},
};

/* Each type's slots: its own tp_new and tp_dealloc (its layout), then
 * these. */
#define SHARED_SLOTS                                                             \
    {Py_tp_traverse, handle_traverse},                                           \
    {Py_tp_clear, handle_clear},                                                 \
    {Py_tp_init, handle_init},                                                   \
    {Py_tp_repr, handle_repr},                                                   \
    {Py_tp_methods, handle_methods},                                             \
    {Py_tp_getset, handle_getset},                                               \
    {0, NULL}

static PyType_Slot handle_slots[] = {
    {Py_tp_new, handle_new},
    {Py_tp_dealloc, handle_dealloc},
    SHARED_SLOTS,
};

static PyType_Slot threadsafe_handle_slots[] = {
    {Py_tp_new, threadsafe_handle_new},
    {Py_tp_dealloc, handle_dealloc},
    SHARED_SLOTS,
};

static PyType_Slot timer_handle_slots[] = {
    {Py_tp_new, timer_handle_new},
    {Py_tp_dealloc, timer_handle_dealloc},
    SHARED_SLOTS,
};

/* ---- the layout check ---------------------------------------------------- */

/* asyncio's slots and where handle_bases.h keeps them.  CPython lays
 * __slots__ out sorted by name, but that is its choice, not a promise:
 * each offset is checked against asyncio's member descriptor at import. */
static const struct {
    const char *cls;
    const char *name;
    Py_ssize_t offset;
} asyncio_slots[] = {
    {"Handle", "_args", offsetof(MinloopHandle, _args)},
    {"Handle", "_callback", offsetof(MinloopHandle, _callback)},
    {"Handle", "_cancelled", offsetof(MinloopHandle, _cancelled)},
    {"Handle", "_context", offsetof(MinloopHandle, _context)},
    {"Handle", "_loop", offsetof(MinloopHandle, _loop)},
    {"Handle", "_repr", offsetof(MinloopHandle, _repr)},
    {"Handle", "_source_traceback", offsetof(MinloopHandle, _source_traceback)},
    {"TimerHandle", "_scheduled", offsetof(MinloopHandle, _arg0)},
    {"TimerHandle", "_when", offsetof(MinloopHandle, _arg1)},
};

static int
layout_error(const char *what)
{
    PyErr_Format(PyExc_ImportError,
                 "asyncio's Handle/TimerHandle do not have the layout minloop "
                 "was built for (%s)", what);
    return -1;
}

/* asyncio's _ThreadSafeHandle (3.14+): Handle and one slot, `_lock`, which
 * must land where our _arg0 is (handle_bases.h). */
static int
check_threadsafe_layout(PyTypeObject *threadsafe)
{
    PyObject *descr = PyDict_GetItemString(threadsafe->tp_dict, "_lock");
    PyMemberDef *member;
    if (threadsafe->tp_basicsize != offsetof(MinloopHandle, _arg1) ||
            threadsafe->tp_itemsize != 0)
        return layout_error("_ThreadSafeHandle's size");
    if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type)
        return layout_error("_ThreadSafeHandle._lock");
    member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX || member->offset != offsetof(MinloopHandle, _arg0))
        return layout_error("_ThreadSafeHandle._lock");
    return 0;
}

static int
check_layout(PyTypeObject *handle, PyTypeObject *timer)
{
    size_t i;
#if MINLOOP_MANAGED_WEAKREF
    if (!PyType_HasFeature(handle, Py_TPFLAGS_MANAGED_WEAKREF))
        return layout_error("weak references not managed");
#else
    if (handle->tp_weaklistoffset != offsetof(MinloopHandle, _weakreflist))
        return layout_error("__weakref__");
#endif
    if (handle->tp_basicsize != offsetof(MinloopHandle, _arg0) ||
            timer->tp_basicsize != offsetof(MinloopHandle, _queued))
        return layout_error("size");
    if (handle->tp_itemsize != 0 || timer->tp_itemsize != 0)
        return layout_error("item size");
    for (i = 0; i < sizeof(asyncio_slots) / sizeof(asyncio_slots[0]); i++) {
        PyTypeObject *cls = asyncio_slots[i].cls[0] == 'H' ? handle : timer;
        PyObject *descr = PyDict_GetItemString(cls->tp_dict, asyncio_slots[i].name);
        PyMemberDef *member;
        if (descr == NULL || Py_TYPE(descr) != &PyMemberDescr_Type)
            return layout_error(asyncio_slots[i].name);
        member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type != T_OBJECT_EX || member->offset != asyncio_slots[i].offset)
            return layout_error(asyncio_slots[i].name);
    }
    return 0;
}

/* handle_new() lays a handle out after a pre-header of preheader_size()
 * bytes; CPython's sys.getsizeof() counts the one it expects.  A build that
 * disagrees would corrupt the heap: refuse to import instead. */
static int
check_preheader(PyObject *module, const char *name)
{
    PyObject *type = PyObject_GetAttrString(module, name);
    PyObject *handle = NULL, *size = NULL, *sys = NULL;
    int rc = -1;
    if (type == NULL)
        return -1;
    /* The type's own tp_new: calling the type would run asyncio's __init__. */
    handle = ((PyTypeObject *)type)->tp_new((PyTypeObject *)type, NULL, NULL);
    if (handle == NULL)
        goto done;
    sys = PyImport_ImportModule("sys");
    if (sys == NULL)
        goto done;
    size = PyObject_CallMethod(sys, "getsizeof", "O", handle);
    if (size == NULL)
        goto done;
#ifndef Py_GIL_DISABLED
    if (PyLong_AsSsize_t(size) != (Py_ssize_t)(preheader_size((PyTypeObject *)type) +
                                                (size_t)((PyTypeObject *)type)->tp_basicsize)) {
        layout_error("the bytes before a GC object");
        goto done;
    }
#endif
    rc = 0;
done:
    Py_XDECREF(size);
    Py_XDECREF(sys);
    Py_XDECREF(handle);
    Py_DECREF(type);
    return rc;
}

/* ---- the module ---------------------------------------------------------- */

static int
add_capi(PyObject *module)
{
    PyObject *capsule = PyCapsule_New(&handle_capi, MINLOOP_HANDLE_CAPI_NAME, NULL);
    int rc;
    if (capsule == NULL)
        return -1;
    rc = PyModule_AddObject(module, "_C_API", capsule);
    if (rc < 0)
        Py_DECREF(capsule);
    return rc;
}

static int
exec_module(PyObject *module)
{
    PyObject *events, *handle = NULL, *timer = NULL, *threadsafe = NULL;
    int rc = -1;

    /* The free lists hold this interpreter's objects. */
    if (minloop_claim_interpreter("minloop._handle_bases") < 0)
        return -1;
    events = PyImport_ImportModule("asyncio.events");
    if (events == NULL)
        return -1;
    handle = PyObject_GetAttrString(events, "Handle");
    timer = PyObject_GetAttrString(events, "TimerHandle");
    if (handle == NULL || timer == NULL)
        goto done;
    /* Before 3.14 there is no _ThreadSafeHandle: the type is still made
     * (handles.pyx declares it), over asyncio.Handle, and never used. */
    threadsafe = PyObject_GetAttrString(events, "_ThreadSafeHandle");
    if (threadsafe == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            goto done;
        PyErr_Clear();
        Py_INCREF(handle);
        threadsafe = handle;
    }
    if (!PyType_Check(handle) || !PyType_Check(timer) ||
            !PyType_IsSubtype((PyTypeObject *)timer, (PyTypeObject *)handle)) {
        layout_error("not classes");
        goto done;
    }
    if (check_layout((PyTypeObject *)handle, (PyTypeObject *)timer) < 0)
        goto done;
    if (threadsafe != handle &&
            (!PyType_Check(threadsafe) ||
             !PyType_IsSubtype((PyTypeObject *)threadsafe, (PyTypeObject *)handle) ||
             check_threadsafe_layout((PyTypeObject *)threadsafe) < 0)) {
        if (!PyErr_Occurred())
            layout_error("_ThreadSafeHandle is not a Handle");
        goto done;
    }
    if (minloop_add_heap_type(module, "minloop._handle_bases", "HandleBase",
                              handle, sizeof(MinloopHandle), handle_slots) < 0 ||
            minloop_add_heap_type(module, "minloop._handle_bases",
                                  "TimerHandleBase", timer,
                                  sizeof(MinloopTimerHandle), timer_handle_slots) < 0 ||
            minloop_add_heap_type(module, "minloop._handle_bases",
                                  "ThreadSafeHandleBase", threadsafe,
                                  sizeof(MinloopThreadSafeHandle),
                                  threadsafe_handle_slots) < 0)
        goto done;
    if (check_preheader(module, "HandleBase") < 0 ||
            check_preheader(module, "TimerHandleBase") < 0 ||
            check_preheader(module, "ThreadSafeHandleBase") < 0)
        goto done;
    if (add_capi(module) < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(handle);
    Py_XDECREF(timer);
    Py_XDECREF(threadsafe);
    Py_DECREF(events);
    return rc;
}

/* The free lists, its only state, keep nothing without the GIL; they are a
 * copy's: one interpreter per copy (exec_module). */
MINLOOP_DEFINE_MODULE(
    _handle_bases,
    "C types extending asyncio's Handle and TimerHandle (see handle_bases.c).",
    exec_module)
