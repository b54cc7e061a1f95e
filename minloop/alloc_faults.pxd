# The Python entry of a test build's allocation failures, written once.
#
# Each extension that links src/alloc_faults.c has its own copy of the
# switches (a static table per shared object), so each needs its own
# `_alloc_faults(site, skip=-1, fails=0)` that reaches its copy: the module
# that cimports this makes it with
#
#     _alloc_faults = alloc_faults_function()
#
# A .pxd cannot hold a `def`: the function is a builtin made here, over
# includes.pxd's arm_alloc_faults as compiled into that module (the C below
# is pasted into every module that cimports this one, so `arm` is that
# module's).

from .includes cimport arm_alloc_faults

cdef extern from *:
    """
    typedef long (*minloop_arm_faults_fn)(PyObject *site, long skip, long fails);
    static minloop_arm_faults_fn minloop_arm_faults = NULL;

    static PyObject *
    minloop_alloc_faults_call(PyObject *self, PyObject *args, PyObject *kwargs)
    {
        static char *names[] = {"site", "skip", "fails", NULL};
        PyObject *site;
        long skip = -1, fails = 0, failed;
        if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U|ll:_alloc_faults", names,
                                         &site, &skip, &fails))
            return NULL;
        failed = minloop_arm_faults(site, skip, fails);
        if (failed == -1 && PyErr_Occurred())
            return NULL;
        return PyLong_FromLong(failed);
    }

    static PyMethodDef minloop_alloc_faults_def = {
        "_alloc_faults", (PyCFunction)(void (*)(void))minloop_alloc_faults_call,
        METH_VARARGS | METH_KEYWORDS,
        "_alloc_faults(site, skip=-1, fails=0)\\n--\\n\\n"
        "Test builds only: includes.pxd's arm_alloc_faults for this module."};

    static PyObject *
    minloop_alloc_faults_function(minloop_arm_faults_fn arm)
    {
        minloop_arm_faults = arm;
        return PyCFunction_New(&minloop_alloc_faults_def, NULL);
    }
    """
    ctypedef long (*minloop_arm_faults_fn)(object, long, long) except -1
    object minloop_alloc_faults_function(minloop_arm_faults_fn arm)


cdef inline object alloc_faults_function():
    """This module's `_alloc_faults(site, skip=-1, fails=0)`: the failures
    at `site` since it was last armed; then, if skip >= 0, arms it to let
    `skip` allocations through and fail the `fails` after them."""
    return minloop_alloc_faults_function(<minloop_arm_faults_fn>arm_alloc_faults)
