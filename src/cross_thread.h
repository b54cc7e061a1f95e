/* cross_thread: the one lock minloop needs where other threads hand work to a
 * loop, and nothing at all where the GIL already serialises them.
 *
 * Some facts this rests on (see docs/threading.md for the whole picture):
 *  - With the GIL, C code that calls no Python code and does not release the
 *    GIL runs atomically with respect to every other Python thread.  The
 *    ready ring's push and pop are such code, so on a GIL build the lock
 *    compiles to nothing.
 *  - A free-threaded build (Py_GIL_DISABLED, defined by pyconfig.h, so
 *    Python.h must come first) keeps that build's layout and this lock even
 *    when the GIL is switched back on at run time; the lock is then merely
 *    uncontended.
 *  - PyMutex (public since 3.13, the first version with free-threaded
 *    builds) is one byte; a thread that must wait for it detaches from the
 *    interpreter while parked, so waiting cannot stall a stop-the-world
 *    pause.  The holder must not call into Python, release the GIL or block
 *    while holding it: critical sections here are a few stores and at most
 *    one malloc().
 *
 * MINLOOP_XT_PTHREAD (tests only, never set by setup.py) puts a pthread mutex
 * in its place, so that the hand-off can be hammered by plain C threads
 * (tests/test_cross_thread.py) on machines without a free-threaded Python.
 */
#ifndef MINLOOP_CROSS_THREAD_H
#define MINLOOP_CROSS_THREAD_H

#if defined(MINLOOP_XT_PTHREAD)
#include <pthread.h>
typedef struct { pthread_mutex_t m; } xt_mutex;
#define XT_LOCKED 1
static inline void xt_init(xt_mutex *l) { pthread_mutex_init(&l->m, NULL); }
static inline void xt_lock(xt_mutex *l) { pthread_mutex_lock(&l->m); }
static inline void xt_unlock(xt_mutex *l) { pthread_mutex_unlock(&l->m); }
/* Plain C threads have no interpreter to detach from. */
#define XT_DETACH_BEGIN {
#define XT_DETACH_END }

#else
#include <Python.h>
#ifdef Py_GIL_DISABLED
typedef struct { PyMutex m; } xt_mutex;
#define XT_LOCKED 1
static inline void xt_init(xt_mutex *l) { l->m = (PyMutex){0}; }
static inline void xt_lock(xt_mutex *l) { PyMutex_Lock(&l->m); }
static inline void xt_unlock(xt_mutex *l) { PyMutex_Unlock(&l->m); }
/* Around a wait for another thread that may itself need the interpreter: a
 * thread parked on a PyMutex re-attaches once it is handed the lock, and
 * re-attaching blocks while a stop-the-world pause (a collection) is
 * pending, which in turn waits for every attached thread to detach.  A
 * waiter that spins attached would close that circle.  Only with the
 * interpreter attached (never inside Cython's `with nogil`). */
#define XT_DETACH_BEGIN { PyThreadState *xt_saved_ = PyEval_SaveThread();
#define XT_DETACH_END PyEval_RestoreThread(xt_saved_); }
#else
/* The GIL is the lock. */
typedef struct { char unused; } xt_mutex;
#define XT_LOCKED 0
static inline void xt_init(xt_mutex *l) { (void)l; }
static inline void xt_lock(xt_mutex *l) { (void)l; }
static inline void xt_unlock(xt_mutex *l) { (void)l; }
/* Nothing ever waits for another thread here (see ring_close()). */
#define XT_DETACH_BEGIN {
#define XT_DETACH_END }
#endif
#endif

/* A word that other threads read without the lock (always written under
 * it): a relaxed atomic where threads really run at once, a plain access
 * where the GIL makes them take turns. */
#if XT_LOCKED
#define XT_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define XT_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define XT_LOAD_ACQUIRE(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)
#define XT_STORE_RELEASE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#else
#define XT_LOAD(x) (x)
#define XT_STORE(x, v) ((x) = (v))
#define XT_LOAD_ACQUIRE(x) (x)
#define XT_STORE_RELEASE(x, v) ((x) = (v))
#endif

/* The same for the loop's flags, as functions Cython can call with a
 * field's address (docs/threading.md, item 12).  A Cython bint is a C int.
 * Each compiles to one plain load or store on x86-64 and arm64 at these
 * orderings (acquire/release: ldar/stlr on arm64). */
static inline int xt_load_int(const int *p) { return XT_LOAD(*p); }
static inline void xt_store_int(int *p, int v) { XT_STORE(*p, v); }
static inline int xt_load_int_acquire(const int *p) { return XT_LOAD_ACQUIRE(*p); }
static inline void xt_store_int_release(int *p, int v) { XT_STORE_RELEASE(*p, v); }
static inline unsigned long xt_load_ulong(const unsigned long *p) { return XT_LOAD(*p); }
static inline void xt_store_ulong(unsigned long *p, unsigned long v) { XT_STORE(*p, v); }

/* 1 where threads really run at once (a free-threaded build): the loop's
 * thread-only structures (timer heap, fd table) then refuse foreign threads
 * even outside debug mode, since there a race corrupts C memory instead of
 * Python objects' state.  0 with the GIL (asyncio's rule: check only in
 * debug mode).  The pthread test build is not a Python build: 0.
 * MINLOOP_THREAD_GUARDS (setup.py's switch of the same name, tests only)
 * compiles the guards into a GIL build, so that their paths run where no
 * free-threaded Python is installed. */
#if (defined(Py_GIL_DISABLED) || defined(MINLOOP_THREAD_GUARDS)) && \
    !defined(MINLOOP_XT_PTHREAD)
#define XT_GUARD_THREADS 1
#else
#define XT_GUARD_THREADS 0
#endif

#endif
