/* The C layout of minloop's Handle and TimerHandle (see handle_bases.c).
 *
 * Both types extend asyncio's classes (Handle extends asyncio.Handle,
 * TimerHandle asyncio.TimerHandle), so their instances start with
 * asyncio.TimerHandle's layout: asyncio's __slots__, which CPython places
 * sorted by name, then TimerHandle's two.  Those slots are our storage,
 * each holding what asyncio keeps there (an object or NULL, never a C
 * number), so asyncio's own member descriptors stay safe to read on our
 * instances.  Our C fields follow.  A TimerHandle has three more than a
 * Handle (MinloopTimerHandle); the loop reads either through the fields
 * they share (MinloopHandle).
 *
 * Python 3.14's call_soon_threadsafe() returns an asyncio._ThreadSafeHandle:
 * a Handle with one slot more, `_lock`, which CPython places where
 * TimerHandle's first slot is.  So our _ThreadSafeHandle (extending
 * asyncio's) has a Handle's layout: its `_lock` slot is _arg0, shadowed by
 * a property as TimerHandle's `_scheduled` is, and _arg1's word, which no
 * descriptor of asyncio's reaches there, holds the thread running its
 * callback instead of a second argument. */
#ifndef MINLOOP_HANDLE_BASES_H
#define MINLOOP_HANDLE_BASES_H

#include <Python.h>
#include <stdint.h>

#include "py_compat.h"
#include "timer_heap.h"

/* The fields every handle has: asyncio's slots, then ours. */
#if !MINLOOP_MANAGED_WEAKREF
#define MINLOOP_HANDLE_WEAKREFLIST PyObject *_weakreflist;  /* __weakref__, inline up to 3.11 */
#else
#define MINLOOP_HANDLE_WEAKREFLIST
#endif
#define MINLOOP_HANDLE_FIELDS                                                    \
    PyObject_HEAD                                                                \
    /* asyncio.Handle's __slots__, in CPython's order.  Never NULL while the    \
     * handle is alive (None when unset), as Cython code assumes. */            \
    PyObject *_args;               /* tuple, or None once cancelled */          \
    PyObject *_callback;           /* None once cancelled */                    \
    PyObject *_cancelled;          /* Py_True or Py_False */                    \
    PyObject *_context;            /* a contextvars.Context (see handles.pyx) */\
    PyObject *_loop;                                                             \
    PyObject *_repr;               /* frozen by cancel() in debug mode */       \
    PyObject *_source_traceback;   /* None unless made in debug mode */         \
    MINLOOP_HANDLE_WEAKREFLIST                                                   \
    /* asyncio.TimerHandle's two __slots__ (below) */                           \
    PyObject *_arg0;                                                             \
    union {                                                                      \
        PyObject *_arg1;                                                         \
        /* _ThreadSafeHandle (_threadsafe): the thread running its callback, \
         * 0 when none (src/threadsafe_handle.h); it keeps one argument       \
         * inline at most. */                                                   \
        unsigned long _runner;                                                   \
    };                                                                           \
    /* ---- ours ---- */                                                        \
    /* How many of the loop's C containers hold this handle (below). */        \
    uint32_t _queued;                                                            \
    uint32_t _gc_epoch : 27;                                                     \
    uint32_t _inline_args : 2;                                                   \
    uint32_t _context_shared : 1;                                                \
    uint32_t _debug : 1;                                                         \
    uint32_t _threadsafe : 1;

/* What the fields hold:
 * - _arg0, _arg1: asyncio.TimerHandle's two __slots__ (_scheduled, _when),
 *   which hold a callback's one or two arguments here instead of in a tuple
 *   (_inline_args says how many; the _args slot then holds None until a
 *   reader asks for the tuple: handles.pyx, "Arguments").  Reusing them
 *   keeps a handle as small as one without inline arguments.  They stay
 *   what asyncio keeps in a slot, an object or NULL: our properties shadow
 *   asyncio's descriptors of those names (a timer's `_when` and
 *   `_scheduled` are computed from the C fields below), and a value put or
 *   deleted through asyncio's own descriptor is an object the handle owns,
 *   or a NULL that minloop_handle_check_slots() refills.  A plain Handle is
 *   not an asyncio.TimerHandle: no descriptor reaches them.
 * - _queued: how many of the loop's C containers (ready ring, timer heap,
 *   fd table, released rings) hold this handle; while any does, the handle
 *   is not tracked by the cycle collector (see handles.pxd).
 * - _gc_epoch: the low 27 bits of the loop's traverse epoch in which the
 *   handle was last reported: read and written only by handle_gc_seen().
 * - _inline_args: 1 or 2: the arguments are _arg0 (and _arg1); 0: they
 *   are _args.
 * - _context_shared: the context is a snapshot shared with other handles
 *   (handles.pyx).
 * - _debug: made while the loop was in debug mode.
 * - _threadsafe: a _ThreadSafeHandle: runs and cancels under its monitor;
 *   set when it is made and never changed, as _arg1's word is then
 *   _runner, no object (the code that reads _arg1 as one asks first). */

/* A Handle (call_soon(), the fd callbacks): 96 bytes on 3.14, which with
 * the collector's 32 before it is pymalloc's 128-byte size class. */
typedef struct {
    MINLOOP_HANDLE_FIELDS
} MinloopHandle;

/* A _ThreadSafeHandle: a Handle's layout (benchmarks/RESULTS.md,
 * 2026-12-03: 50,000 call_soon_threadsafe() calls from a thread ran 1.12x
 * faster on 3.14, 1.08x on 3.15, than with a timer's 152 bytes).  The same
 * struct under another name: Cython wants each extern class's struct named
 * once (handles.pxd declares the three bases). */
typedef MinloopHandle MinloopThreadSafeHandle;

/* A TimerHandle: the same fields first (the loop reads every handle as a
 * MinloopHandle), then three words a plain Handle does without.  Measured
 * (benchmarks/RESULTS.md, 2026-12-01): a million queued call_soon()
 * callbacks took 43 page faults per 1,000 at 152 bytes a handle. */
typedef struct {
    MINLOOP_HANDLE_FIELDS
    double _when;                  /* the deadline */
    /* The timer's token in the owning loop's heap (its slot there, written
     * by the heap when the timer enters and when it leaves; heap_remove()
     * takes it), -1 once the timer has left; the heap holds one reference
     * meanwhile. */
    Py_ssize_t _heap_pos;
    timer_heap *_heap;
} MinloopTimerHandle;

/* What handle_bases.c exports to handles.pyx (a capsule, the module's
 * _C_API): a new handle of `type` (a Handle, a TimerHandle or a
 * _ThreadSafeHandle, one function each) holding `callback`, `args` (a
 * tuple), `context` and `loop`, each field set once; NULL with an
 * exception set if it could not be allocated. */
typedef PyObject *(*minloop_make_handle_fn)(PyTypeObject *type, PyObject *callback,
                                            PyObject *args, PyObject *context,
                                            PyObject *loop);
typedef struct {
    minloop_make_handle_fn make_handle;
    minloop_make_handle_fn make_timer;
    minloop_make_handle_fn make_threadsafe;
} MinloopHandleCAPI;

#define MINLOOP_HANDLE_CAPI_NAME "minloop._handle_bases._C_API"

#define MINLOOP_HANDLE_EPOCH_MASK ((1UL << 27) - 1)

/* Whether `h` was already reported in the loop traverse numbered `epoch`;
 * marks it reported otherwise.  Only the low 27 bits are stored, and they
 * are compared as such: comparing the stored bits with the whole counter
 * would never match once it passed 2^27, and every handle held twice would
 * be reported twice, which lets the collector free what is still in use.
 * A wrapped counter can at worst skip a handle once (kept alive one more
 * collection), never report it twice. */
static inline int
minloop_handle_gc_seen(void *handle, unsigned long epoch)
{
    MinloopHandle *h = (MinloopHandle *)handle;
    uint32_t e = (uint32_t)(epoch & MINLOOP_HANDLE_EPOCH_MASK);
    if (h->_gc_epoch == e)
        return 1;
    h->_gc_epoch = e;
    return 0;
}

/* Whether `handle` holds the only reference to its context: then no other
 * handle, cache or program can see that context (handles.pyx,
 * _snapshot_alone).  Not used on the free-threaded build, where a count
 * read from another thread's object is no proof. */
static inline int
minloop_handle_context_alone(void *handle)
{
    return Py_REFCNT(((MinloopHandle *)handle)->_context) == 1;
}

/* asyncio's own member descriptors stay callable on our instances
 * (`asyncio.Handle._callback.__delete__(h)`, `asyncio.Handle._args.__set__(h,
 * 5)`): nothing in asyncio or minloop does that, but plain Python code can,
 * and Cython code would then read NULL as an object.  So every function that
 * reads the slots first puts None (False for _cancelled) back where one was
 * deleted; `_args` is treated as any object (handles.pyx).  The same goes
 * for the inline arguments, kept in asyncio.TimerHandle's slots.  The fast
 * path is the nine tests. */
static void
minloop_handle_refill_slots(MinloopHandle *h)
{
    PyObject **slots[] = {&h->_args, &h->_callback, &h->_context, &h->_loop,
                          &h->_repr, &h->_source_traceback};
    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
        if (*slots[i] == NULL) {
            Py_INCREF(Py_None);
            *slots[i] = Py_None;
        }
    }
    if (h->_cancelled == NULL) {
        Py_INCREF(Py_False);
        h->_cancelled = Py_False;
    }
    /* An inline argument deleted through asyncio.TimerHandle's descriptor
     * of the slot that keeps it: the callback gets None in its place. */
    if (h->_inline_args != 0 && h->_arg0 == NULL) {
        Py_INCREF(Py_None);
        h->_arg0 = Py_None;
    }
    if (h->_inline_args == 2 && h->_arg1 == NULL) {
        Py_INCREF(Py_None);
        h->_arg1 = Py_None;
    }
}

static inline void
minloop_handle_check_slots(void *handle)
{
    MinloopHandle *h = (MinloopHandle *)handle;
    if (h->_args == NULL || h->_callback == NULL || h->_cancelled == NULL ||
            h->_context == NULL || h->_loop == NULL || h->_repr == NULL ||
            h->_source_traceback == NULL ||
            (h->_inline_args != 0 && h->_arg0 == NULL) ||
            (h->_inline_args == 2 && h->_arg1 == NULL))
        minloop_handle_refill_slots(h);
}

/* ---- what every handle kind shares ------------------------------------ *
 *
 * Handle, TimerHandle and _ThreadSafeHandle are siblings (handle_bases.c),
 * so what they share cannot be inherited from one another: it is written
 * once here over the fields they share (MinloopHandle), for the C bases'
 * slots (handle_bases.c, "asyncio's surface") and for handles.pyx. */

/* Drops the inline arguments (handles.pyx, "Arguments"); a
 * _ThreadSafeHandle's _arg1 is its _runner, no argument. */
static inline void
minloop_handle_drop_inline_args(void *handle)
{
    MinloopHandle *h = (MinloopHandle *)handle;
    PyObject *arg0 = h->_arg0, *arg1 = NULL;
    if (!h->_threadsafe) {
        arg1 = h->_arg1;
        h->_arg1 = NULL;
    }
    h->_inline_args = 0;
    h->_arg0 = NULL;
    Py_XDECREF(arg0);
    Py_XDECREF(arg1);
}

/* The arguments as asyncio's _args holds them (a new reference): a tuple,
 * made from the inline arguments the first time it is asked for and kept
 * in _args from then on, or None once cancelled (or whatever asyncio's own
 * descriptor put there). */
static inline PyObject *
minloop_handle_args(void *handle)
{
    MinloopHandle *h = (MinloopHandle *)handle;
    minloop_handle_check_slots(h);
    if (h->_inline_args) {
        PyObject *args = h->_inline_args == 1 ? PyTuple_Pack(1, h->_arg0)
                                              : PyTuple_Pack(2, h->_arg0, h->_arg1);
        if (args == NULL)
            return NULL;
        Py_SETREF(h->_args, args);
        minloop_handle_drop_inline_args(h);
    }
    return Py_NewRef(h->_args);
}

/* The handle's own context (a new reference), copied from the snapshot it
 * shares once, unless it alone holds that snapshot (handles.pyx, "Context
 * snapshots"). */
static inline PyObject *
minloop_handle_own_context(void *handle)
{
    MinloopHandle *h = (MinloopHandle *)handle;
    minloop_handle_check_slots(h);
    if (h->_context_shared) {
        if (!minloop_handle_context_alone(h)) {
            PyObject *copy = PyContext_Copy(h->_context);
            if (copy == NULL)
                return NULL;
            Py_SETREF(h->_context, copy);
        }
        h->_context_shared = 0;
    }
    return Py_NewRef(h->_context);
}

/* Gives a subclass that adds no field (handles.pyx's Handle and
 * TimerHandle) its C base's tp_dealloc, tp_traverse and tp_clear in place
 * of Cython's, which would only call the base's after a GC untrack and
 * re-track.  handle_bases.c's free lists recognise our types by that
 * tp_dealloc, so this must run before the first handle is made. */
static inline int
minloop_handle_take_base_slots(PyObject *type)
{
    PyTypeObject *t = (PyTypeObject *)type, *base = t->tp_base;
    if (t->tp_basicsize != base->tp_basicsize ||
            (t->tp_basicsize != (Py_ssize_t)sizeof(MinloopHandle) &&
             t->tp_basicsize != (Py_ssize_t)sizeof(MinloopTimerHandle))) {
        PyErr_SetString(PyExc_ImportError,
                        "minloop's handle types add fields to their C base");
        return -1;
    }
    t->tp_dealloc = base->tp_dealloc;
    t->tp_traverse = base->tp_traverse;
    t->tp_clear = base->tp_clear;
    PyType_Modified(t);
    return 0;
}

#endif /* MINLOOP_HANDLE_BASES_H */
