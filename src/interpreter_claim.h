/* A copy of a compiled module serves one interpreter.
 *
 * A module whose binary keeps Python objects in C statics (handle_bases.c's
 * free lists; every Cython module's types and cached objects) may run in
 * any interpreter, own GIL included, but only in one per loaded copy of its
 * file: objects of one interpreter must never reach another, which has its
 * own allocator and its own GIL.  minloop/_subinterpreters.py gives each
 * sub-interpreter a private copy of every compiled module's file, and so
 * fresh statics.  This claim is the guard behind it: the first interpreter
 * to execute a copy owns it, and any other that reaches the same copy (by
 * loading the installed file past minloop's finder) gets an ImportError,
 * as Cython's modules give ("Interpreter change detected"). */
#ifndef MINLOOP_INTERPRETER_CLAIM_H
#define MINLOOP_INTERPRETER_CLAIM_H

#include <Python.h>

/* 0 if this copy is the current interpreter's (claiming it if no one has),
 * -1 with ImportError if another interpreter's. */
static int
minloop_claim_interpreter(const char *module_name)
{
    /* Set once, by the first interpreter that executes this copy.  Two
     * interpreters with their own GIL (and their own import locks) may get
     * here at once: a compare-and-swap decides.  Interpreter ids start at 0
     * (the main one) and are never reused in a process. */
    static int64_t owner = -1;
    int64_t current = PyInterpreterState_GetID(PyInterpreterState_Get());
    int64_t unclaimed = -1;

    if (current < 0)
        return -1;
    if (__atomic_compare_exchange_n(&owner, &unclaimed, current, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return 0;
    /* `unclaimed` now holds the owner. */
    if (unclaimed != current) {
        PyErr_Format(PyExc_ImportError,
                     "%s: this copy of the module belongs to interpreter %lld; "
                     "import minloop (not the module's file) so that each "
                     "interpreter loads a copy of its own",
                     module_name, (long long)unclaimed);
        return -1;
    }
    return 0;
}

#endif /* MINLOOP_INTERPRETER_CLAIM_H */
