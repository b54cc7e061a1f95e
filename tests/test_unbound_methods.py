"""Every method of minloop's compiled classes, called unbound with a `self`
of the wrong type, raises; none may read the object as one of ours.

Cython's own function type does not check `self` (cython/cython#6127):
Handle.cancel(object()) or SocketTransport.write(object(), b'x') read a
plain object as one of ours and crashed.  The modules are built with
binding=False, so methods are CPython's method descriptors, which check.
Run in a child process: the failure this guards against is a crash.

Not LoopCore's methods: loops are instances of the subclass Loop, so the
descriptor's check would cost every call of a loop method a subtype walk
(loop.pyx keeps Cython's function type, and that gap, on purpose).  call_soon
is the exception: its entry is src/soon_method.h's, which checks (cheaply);
tests/test_scheduling.py tests that."""

import subprocess
import sys

import pytest

CHILD = r'''
import asyncio, inspect, warnings
import minloop
from minloop import datagram, handles, pipes, selector_view, stream, tls

warnings.simplefilter("ignore")
classes = []
for module in (datagram, handles, pipes, selector_view, stream, tls):
    classes += [v for v in vars(module).values()
                if isinstance(v, type) and v.__module__ == module.__name__]
called = 0
for cls in classes:
    for name, attr in list(vars(cls).items()):
        if name in ("__new__", "__init_subclass__", "__class_getitem__") or not callable(attr):
            continue
        if isinstance(attr, (staticmethod, classmethod, type)):
            continue
        for args in ((), (1,), (1, print), (print, 1, 2)):
            try:
                result = attr(object(), *args)
            except Exception:
                pass
            else:
                if inspect.iscoroutine(result):
                    result.close()
            called += 1
print(called)
'''


@pytest.mark.usefixtures("minloop_module")
def test_compiled_methods_called_unbound_with_a_foreign_self_raise():
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.split()[-1]) > 200
