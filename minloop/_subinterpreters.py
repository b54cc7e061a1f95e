"""minloop in a sub-interpreter: what it does there that it does not in the
main interpreter.

1. Each sub-interpreter runs minloop's compiled modules from a copy of its own.

asyncio's loop runs in every interpreter, sub-interpreters with their own
GIL included (3.12+; `concurrent.interpreters` from 3.14).  minloop's
compiled modules keep their state where the hot path already is: type
objects, free lists of handles, cached asyncio classes and functions, each a
C static of its binary.  An interpreter with its own GIL has its own asyncio
(other class objects), its own allocator and its own lock, so a second
interpreter must never touch the first one's statics.

Moving every static into per-interpreter module state (Cython's module-state
mode, or a lookup like asyncio's C Task makes) puts a lookup on each access
of a type or a cached object: 3.6x a handle in a measured micro-benchmark.
Instead the dynamic loader gives each interpreter its own statics: a
sub-interpreter that imports minloop loads a private copy of each compiled
module's file, so every static of that copy, and everything the hot path
reaches, is that interpreter's alone, and the code it runs is the very code
the main interpreter runs (the same speed, nothing to look up).  The main
interpreter loads the installed files, as any package does.

Facts this rests on, each forgotten once too often:
- glibc's dlopen() hands back an object it has already loaded when the path
  string equals one it loaded before, or when the file (device, inode) is
  one it has loaded: a copy needs a new file AND a path never used before in
  the process.  The path is in a new temporary directory named by the
  process and the interpreter (interpreter ids are never reused in a
  process); the file is a memfd where there is one (_private_copy()).
  Nothing stays behind once the copy is mapped: no file, no descriptor.
- CPython never unloads an extension module: a copy stays mapped after its
  interpreter ends (the modules it imported: all fifteen of a stripped
  wheel are 2.1 MB on 3.14 x86_64).  A program should pool its interpreters
  (InterpreterPoolExecutor does), not make one per task.
- The installed files refuse a second interpreter themselves: Cython's
  modules ("Interpreter change detected") and handle_bases.c, the C module
  with state (src/interpreter_claim.h), load in one interpreter each.
  Anything that bypasses this finder gets an ImportError, never another
  interpreter's objects.
- The copies are found here before the path finder looks, so that the
  modules' imports of one another (Cython's cimports import the module that
  defines a type or function) reach this interpreter's copies too.

2. Its helper threads are not daemons where the interpreter forbids them
(an isolated sub-interpreter does: `daemon_threads_allowed()`); each such
thread ends with what it serves (a child's exit, the stall watch's stop).
"""

import importlib.machinery
import os
import sys
import threading

# Where the installed files of this package's compiled modules are.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def is_main_interpreter():
    """True in the process's main interpreter (where no copy is needed)."""
    try:
        from _thread import _is_main_interpreter  # 3.12+
    except ImportError:
        try:
            import _xxsubinterpreters as interpreters  # 3.10, 3.11 builds that ship it
        except ImportError:
            return True
        return interpreters.get_current() == interpreters.get_main()
    return _is_main_interpreter()


def daemon_threads_allowed():
    """Whether this interpreter may start daemon threads (isolated
    sub-interpreters may not: 3.12+, gh-104812)."""
    allowed = getattr(threading, "_daemon_threads_allowed", None)
    return allowed is None or allowed()


def _interpreter_id():
    try:
        from _interpreters import get_current  # 3.13+
    except ImportError:
        try:
            from _xxsubinterpreters import get_current
        except ImportError:
            return "?"
    current = get_current()
    # 3.14 returns (id, whence), 3.12-3.13 an id object.
    return int(current[0] if isinstance(current, tuple) else current)


def _private_copy(original, short_name):
    """(path, cleanup): a new copy of the file at `original` under a path
    never dlopen()ed in this process, and what to remove once it is loaded.

    The copy's bytes go in a memfd where there is one (no disk, and no
    noexec mount refuses to map them), reached through a symlink in a new
    directory whose name is the process's and the interpreter's; once
    loaded, the symlink, the directory and the descriptor all go (the
    mapping keeps the memfd).  Elsewhere the bytes go in that directory.
    """
    import tempfile  # here: the main interpreter, which never copies, is spared it

    with open(original, "rb") as src:
        data = src.read()
    directory = tempfile.mkdtemp(prefix=f"minloop-{os.getpid()}-i{_interpreter_id()}-")
    path = os.path.join(directory, os.path.basename(original))
    fd = None
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create(f"minloop.{short_name}")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.symlink(f"/proc/self/fd/{fd}", path)
    else:
        with open(path, "wb") as dst:
            dst.write(data)

    def cleanup():
        os.unlink(path)
        os.rmdir(directory)
        if fd is not None:
            os.close(fd)
    return path, cleanup


class _CopyLoader(importlib.machinery.ExtensionFileLoader):
    """Loads a copy of an extension module; `__file__` names the original."""

    def __init__(self, name, copy_path, original, cleanup):
        super().__init__(name, copy_path)
        self._original = original
        self._cleanup = cleanup

    def create_module(self, spec):
        try:
            return super().create_module(spec)
        finally:
            # Mapped now (or failed): the file, its name and its
            # descriptor can go.
            cleanup, self._cleanup = self._cleanup, None
            if cleanup is not None:
                cleanup()

    def exec_module(self, module):
        super().exec_module(module)
        module.__file__ = self._original


class CopyFinder:
    """Finds `minloop.<compiled module>` as a private copy of its file."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        package, _, short_name = fullname.partition(".")
        if package != __package__ or "." in short_name or not short_name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, [_PACKAGE_DIR])
        if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return None
        copy_path, cleanup = _private_copy(spec.origin, short_name)
        loader = _CopyLoader(fullname, copy_path, spec.origin, cleanup)
        return importlib.machinery.ModuleSpec(fullname, loader, origin=copy_path)

    @classmethod
    def invalidate_caches(cls):
        pass


def install():
    """In a sub-interpreter, put the copy finder first; in the main one,
    nothing: the installed files are the main interpreter's."""
    if is_main_interpreter() or CopyFinder in sys.meta_path:
        return
    sys.meta_path.insert(0, CopyFinder)
