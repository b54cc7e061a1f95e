/* threadsafe_handle: the monitor under call_soon_threadsafe()'s handles.
 *
 * From Python 3.14 asyncio's call_soon_threadsafe() returns a
 * _ThreadSafeHandle, whose cancel() and cancelled() hold an RLock that its
 * _run() holds while the callback runs.  So, from another thread, cancel()
 * and cancelled() wait for a running callback to finish, and a handle
 * cancelled after the loop's unlocked check but before the callback starts
 * is still skipped.  Called from the callback itself (the same thread),
 * they do not wait.
 *
 * asyncio makes an RLock per handle for that: a second object, and a lock
 * taken twice per callback.  Here the handle keeps the one fact the lock
 * stands for, the thread running its callback (h->_runner, 0 when none),
 * guarded by the GIL (below) or, on the free-threaded build, by one
 * process-wide mutex.  Waits are rare (a cancel() racing the very callback
 * it cancels), so they share one mutex and condition variable.
 *
 * The mutex is held for a few stores, never while calling Python code or
 * waiting for the interpreter: a thread that must wait parks on the
 * condition variable detached from the interpreter (the GIL released, or
 * off the free-threaded build's stop-the-world), and takes the interpreter
 * back only after letting go of the mutex. */
#ifndef MINLOOP_THREADSAFE_HANDLE_H
#define MINLOOP_THREADSAFE_HANDLE_H

#include <Python.h>
#include <pthread.h>

#include "handle_bases.h"

static pthread_mutex_t ts_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ts_idle = PTHREAD_COND_INITIALIZER;

#ifndef Py_GIL_DISABLED
/* With the GIL, a few stores that call no Python code are atomic with
 * respect to every other Python thread: the run, cancel() and cancelled()
 * read and write _runner and _cancelled under the GIL alone, and the mutex
 * serves only a thread that must wait (then no lock is taken per callback).
 * A waiter counts itself and takes the mutex before it lets go of the GIL,
 * so the runner, which clears _runner and reads the count under the GIL
 * after that, cannot miss it, and cannot signal before it waits (the
 * signal needs the mutex, which the waiter holds until it waits). */
static unsigned long ts_waiters = 0;   /* changed under the GIL */

#define TS_RUNNER(h) __atomic_load_n(&(h)->_runner, __ATOMIC_ACQUIRE)
#define TS_SET_RUNNER(h, v) __atomic_store_n(&(h)->_runner, (v), __ATOMIC_RELEASE)

/* Returns once no other thread runs h's callback (the GIL held, as on
 * entry; released while waiting). */
static void
ts_wait_for_runner(MinloopThreadSafeHandle *h, unsigned long me)
{
    unsigned long runner;
    while ((runner = TS_RUNNER(h)) != 0 && runner != me) {
        PyThreadState *state;
        ts_waiters++;
        pthread_mutex_lock(&ts_mutex);
        state = PyEval_SaveThread();
        while ((runner = TS_RUNNER(h)) != 0 && runner != me)
            pthread_cond_wait(&ts_idle, &ts_mutex);
        /* Never wait for the GIL holding the mutex: the GIL's holder may
         * be waiting for the mutex. */
        pthread_mutex_unlock(&ts_mutex);
        PyEval_RestoreThread(state);
        ts_waiters--;
    }
}

#define TS_LOCK()
#define TS_UNLOCK()

#else
/* No GIL: the mutex guards every handle's _runner and, for these handles,
 * the change of _cancelled; the waiter count with them. */
static unsigned long ts_waiters = 0;   /* changed under ts_mutex */

#define TS_RUNNER(h) ((h)->_runner)
#define TS_SET_RUNNER(h, v) ((h)->_runner = (v))

/* With ts_mutex held (as on return): returns once no other thread runs h's
 * callback, detached from the interpreter while waiting. */
static void
ts_wait_for_runner(MinloopThreadSafeHandle *h, unsigned long me)
{
    while (h->_runner != 0 && h->_runner != me) {
        PyThreadState *state;
        ts_waiters++;
        state = PyEval_SaveThread();
        pthread_cond_wait(&ts_idle, &ts_mutex);
        ts_waiters--;
        /* Never wait for the interpreter holding the mutex: a thread
         * attached to it may be waiting for the mutex. */
        pthread_mutex_unlock(&ts_mutex);
        PyEval_RestoreThread(state);
        pthread_mutex_lock(&ts_mutex);
    }
}

#define TS_LOCK() pthread_mutex_lock(&ts_mutex)
#define TS_UNLOCK() pthread_mutex_unlock(&ts_mutex)

#endif

/* fork() in a thread while another held the mutex (or waited): the child
 * has one thread, so none holds it and none waits there. */
static void
ts_after_fork_in_child(void)
{
    pthread_mutex_init(&ts_mutex, NULL);
    pthread_cond_init(&ts_idle, NULL);
    ts_waiters = 0;
}

/* Once, at import (handles.pyx). */
static int
minloop_ts_init(void)
{
    return pthread_atfork(NULL, NULL, ts_after_fork_in_child) == 0 ? 0 : -1;
}

/* Whether this thread is running h's callback (only this thread can have
 * put its own id there, so no lock is needed to see it).  Most often no
 * thread is: then this thread's id is not asked for. */
static inline int
minloop_ts_running_here(MinloopThreadSafeHandle *h)
{
    unsigned long runner = __atomic_load_n(&h->_runner, __ATOMIC_RELAXED);
    return runner != 0 && runner == PyThread_get_thread_ident();
}

/* Before running h's callback, on a thread not running it already
 * (handle_run() asks minloop_ts_running_here() first).  1: run it, then
 * call minloop_ts_run_ended(); 0: cancelled, skip it. */
static inline int
minloop_ts_run_begins(MinloopThreadSafeHandle *h)
{
    unsigned long me = PyThread_get_thread_ident();
    int run = 0;
    TS_LOCK();
    if (TS_RUNNER(h) != 0)   /* rarely: no call otherwise */
        ts_wait_for_runner(h, me);
    if (h->_cancelled != Py_True) {
        TS_SET_RUNNER(h, me);
        run = 1;
    }
    TS_UNLOCK();
    return run;
}

static inline void
minloop_ts_run_ended(MinloopThreadSafeHandle *h)
{
    TS_LOCK();
    TS_SET_RUNNER(h, 0);
    if (ts_waiters) {
#ifndef Py_GIL_DISABLED
        pthread_mutex_lock(&ts_mutex);
        pthread_cond_broadcast(&ts_idle);
        pthread_mutex_unlock(&ts_mutex);
#else
        pthread_cond_broadcast(&ts_idle);
#endif
    }
    TS_UNLOCK();
}

/* cancel()'s first half: waits while another thread runs the callback, then
 * marks h cancelled.  1 if this call cancelled it, 0 if it was already. */
static int
minloop_ts_cancel(MinloopThreadSafeHandle *h)
{
    unsigned long me = PyThread_get_thread_ident();
    int changed = 0;
    TS_LOCK();
    ts_wait_for_runner(h, me);
    if (h->_cancelled != Py_True) {
        /* True and False live as long as the interpreter: the reference
         * moves without a deallocation. */
        PyObject *old = h->_cancelled;
        Py_INCREF(Py_True);
        h->_cancelled = Py_True;
        Py_XDECREF(old);
        changed = 1;
    }
    TS_UNLOCK();
    return changed;
}

/* cancelled(): waits while another thread runs the callback. */
static int
minloop_ts_cancelled(MinloopThreadSafeHandle *h)
{
    unsigned long me = PyThread_get_thread_ident();
    int cancelled;
    TS_LOCK();
    ts_wait_for_runner(h, me);
    cancelled = h->_cancelled == Py_True;
    TS_UNLOCK();
    return cancelled;
}

#endif /* MINLOOP_THREADSAFE_HANDLE_H */
