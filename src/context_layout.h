/* The layout of a contextvars.Context, as CPython 3.7 to 3.15 define it
 * (internal/pycore_context.h): its variables live in an immutable HAMT
 * that every ContextVar.set()/reset() replaces.  Used only where this
 * build knows the layout, and only after _check_context_layout() has
 * confirmed it at import time (the version gate: src/py_compat.h). */
#ifndef MINLOOP_CONTEXT_LAYOUT_H
#define MINLOOP_CONTEXT_LAYOUT_H

#include "py_compat.h"

#include <stddef.h>

typedef struct {
    PyObject_HEAD
    PyObject *ctx_prev;
    PyObject *ctx_vars;
    PyObject *ctx_weakreflist;
    int ctx_entered;
} minloop_context_layout;
#define minloop_context_vars(ctx) (((minloop_context_layout *)(ctx))->ctx_vars)
#define minloop_context_weakrefs(ctx) (((minloop_context_layout *)(ctx))->ctx_weakreflist)
#define MINLOOP_CONTEXT_WEAKREFS_OFFSET offsetof(minloop_context_layout, ctx_weakreflist)

#endif /* MINLOOP_CONTEXT_LAYOUT_H */
