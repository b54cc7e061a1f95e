"""Build of minloop's compiled core.

Environment switches (for development and CI, never for wheels):
  MINLOOP_DEBUG=1     -O0 -g, assertions on, Cython line tracing off
  MINLOOP_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer (implies debug)
  MINLOOP_ANNOTATE=1  write Cython's HTML annotation next to each .pyx
  MINLOOP_THREAD_GUARDS=1  the free-threaded build's thread guards in a GIL
                      build (src/cross_thread.h): tests their paths where
                      no free-threaded Python is installed
  MINLOOP_STRIP=1     stripped modules: no debug information (Python's own
                      CFLAGS carry -g) and no symbol table; what release
                      wheels ship ([tool.cibuildwheel] sets it).  Off by
                      default: profilers and callgrind want the symbols.
  MINLOOP_ALLOC_FAULTS=1  allocations in the C units and a transport's
                      buffers that a test can fail on demand
                      (src/alloc_faults.h; the fault harness's allocation pass)
  MINLOOP_NO_TELEMETRY=1  compile the loop's telemetry out (src/telemetry.h):
                      loop.stats() and the rest raise NotImplementedError;
                      for measuring what it costs against the default build
  MINLOOP_POLLER=kqueue  on Linux: the kqueue poller (src/poller_kqueue.c)
                      instead of epoll, over libkqueue's emulation of the
                      kqueue API, installed by ../shared/tools/libkqueue/
                      build.sh into MINLOOP_LIBKQUEUE (default /usr/local).
                      Runs the macOS/BSD poller's code under the tests here
                      (docs/development.md says what it cannot show).
                      MINLOOP_POLLER=epoll, or unset: the platform's own.
"""
import copy
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

if sys.platform == "win32":
    raise RuntimeError("minloop supports Linux, macOS and the BSDs, not Windows")

from Cython.Build import cythonize  # noqa: E402  (after the platform check)


def flag(name):
    return os.environ.get(name, "") not in ("", "0")


sanitize = flag("MINLOOP_SANITIZE")
debug = flag("MINLOOP_DEBUG") or sanitize

compile_args = ["-O0", "-g3", "-UNDEBUG"] if debug else ["-O2"]
compile_args += ["-std=c99", "-Wall", "-Wno-unused-function", "-Wno-unreachable-code"]
link_args = []
if flag("MINLOOP_STRIP") and not debug:
    compile_args.append("-g0")  # after Python's -g, so it wins
    # The linker drops the symbol table (the module's PyInit_ entry stays
    # in the dynamic one); ld64 has no -s: -x drops the local symbols.
    link_args.append("-Wl,-x" if sys.platform == "darwin" else "-s")
if sanitize:
    san = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    compile_args += san
    link_args += san

poller_sources = ["src/poller_epoll.c", "src/poller_kqueue.c"]  # each compiles to nothing off its platform
# What the module with the poller (minloop.loop) adds to the common options.
poller_includes, poller_link = [], {}
macros = [("_GNU_SOURCE", None)]
poller_choice = os.environ.get("MINLOOP_POLLER", "")
if poller_choice not in ("", "epoll", "kqueue"):
    raise RuntimeError(f"MINLOOP_POLLER={poller_choice!r}: say epoll or kqueue (or leave it unset)")
if poller_choice == "epoll" and not sys.platform.startswith("linux"):
    raise RuntimeError("MINLOOP_POLLER=epoll: epoll is Linux's; this platform's poller is kqueue")
if poller_choice == "kqueue" and sys.platform.startswith("linux"):
    libkqueue = os.path.abspath(os.environ.get("MINLOOP_LIBKQUEUE", "/usr/local"))
    if not os.path.exists(os.path.join(libkqueue, "include", "kqueue", "sys", "event.h")):
        raise RuntimeError(f"MINLOOP_POLLER=kqueue: no libkqueue in {libkqueue} (MINLOOP_LIBKQUEUE); "
                           "install it with ../shared/tools/libkqueue/build.sh PREFIX")
    macros.append(("MINLOOP_POLLER_KQUEUE", "1"))
    # rpath: the module finds libkqueue.so where it was built against,
    # with no LD_LIBRARY_PATH.
    poller_includes = [os.path.join(libkqueue, "include", "kqueue")]
    poller_link = dict(library_dirs=[os.path.join(libkqueue, "lib")],
                       runtime_library_dirs=[os.path.join(libkqueue, "lib")],
                       libraries=["kqueue"])
if flag("MINLOOP_THREAD_GUARDS"):
    macros.append(("MINLOOP_THREAD_GUARDS", "1"))
if flag("MINLOOP_NO_TELEMETRY"):
    macros.append(("MINLOOP_NO_TELEMETRY", "1"))
alloc_faults = flag("MINLOOP_ALLOC_FAULTS")
if alloc_faults:
    macros.append(("MINLOOP_ALLOC_FAULTS", "1"))
common = dict(
    include_dirs=["src"],
    extra_compile_args=compile_args,
    extra_link_args=link_args,
    define_macros=macros,
)

# Modules whose cdef classes extend asyncio's transport classes: their
# types must be heap types (see src/transport_bases.c).
transport_common = dict(common, define_macros=common["define_macros"] + [("CYTHON_USE_TYPE_SPECS", "1")])

extensions = [
    Extension("minloop._transport_bases", ["src/transport_bases.c"], **common),
    # Handle and TimerHandle extend asyncio's classes through C base types
    # (src/handle_bases.c), so theirs are heap types too.
    Extension("minloop._handle_bases", ["src/handle_bases.c"], **common),
    Extension("minloop.handles", ["minloop/handles.pyx", "src/timer_heap.c"], **transport_common),
    Extension(
        "minloop.loop",
        ["minloop/loop.pyx", "src/fd_table.c", "src/timer_heap.c", "src/wakeup.c", *poller_sources],
        **dict(common, include_dirs=common["include_dirs"] + poller_includes, **poller_link),
    ),
    Extension("minloop.loop_metrics", ["minloop/loop_metrics.pyx"], **common),
    Extension("minloop.fd_owners", ["minloop/fd_owners.pyx"], **common),
    Extension("minloop.stall", ["minloop/stall.pyx"], **common),
    Extension("minloop.page_reader", ["minloop/page_reader.pyx"], **common),
    Extension("minloop.sock_ops", ["minloop/sock_ops.pyx"], **common),
    Extension("minloop.selector_view", ["minloop/selector_view.pyx"], **common),
    Extension("minloop.stream_reader", ["minloop/stream_reader.pyx"], **common),
    Extension("minloop.stream", ["minloop/stream.pyx"], **transport_common),
    Extension("minloop.datagram", ["minloop/datagram.pyx"], **transport_common),
    Extension("minloop.pipes", ["minloop/pipes.pyx"], **transport_common),
    Extension("minloop.tls", ["minloop/tls.pyx"], **transport_common),
]

if alloc_faults:
    # Each module its own copy of the switches (src/alloc_faults.h).
    for ext in extensions:
        ext.sources.append("src/alloc_faults.c")


def cython_processes():
    """Cython's translations run in a process per core where the processes
    are forked.  Spawned ones (macOS; forkserver, Linux's default from
    3.14) would run this file again as their main module, setup() and all.
    """
    import multiprocessing
    if multiprocessing.get_start_method() != "fork":
        return 0
    return os.cpu_count() or 1


class ParallelBuildExt(build_ext):
    """build_ext compiling the modules on every core unless told (-j N):
    pip and `python -m build` give it no -j, and CI builds the extension
    nine times (venvs, sanitizer and guard builds, 3.14/3.15, four wheels).
    A wheel of 3.11 on two cores: 111 s in sequence, 65 s so (87 s with the
    modules in the order listed).
    """

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def build_extensions(self):
        # The largest first, so that neither core is left with a big one
        # at the end.
        self.extensions.sort(key=lambda e: -sum(map(os.path.getsize, e.sources)))
        super().build_extensions()

    def build_extension(self, ext):
        # Each module's objects in a directory of its own: two modules
        # (handles, loop) compile src/timer_heap.c, and one timer_heap.o
        # written by one thread could be linked half-written by another.
        own = copy.copy(self)
        own.build_temp = os.path.join(self.build_temp, ext.name)
        build_ext.build_extension(own, ext)


# The slot Cython 3.3 writes only in its module-state mode, which
# looks the module's state up on every access of a type or cached object.
# minloop's modules keep that state in C statics instead, one set per loaded
# copy of the file: each sub-interpreter loads copies of its own
# (minloop/_subinterpreters.py), and a copy refuses a second interpreter
# (Cython's own check, "Interpreter change detected").  So each module may
# say it runs in an interpreter with its own GIL.
_SLOT_ANCHOR = "  #if PY_VERSION_HEX >= 0x030C0000 && CYTHON_USE_MODULE_STATE\n"
_SLOT = ("  #if PY_VERSION_HEX >= 0x030C0000 && !CYTHON_USE_MODULE_STATE  /* minloop: setup.py */\n"
         "  {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},\n"
         "  #endif\n")


def declare_per_interpreter_gil(c_file):
    """Adds the Py_mod_multiple_interpreters slot to a module Cython wrote
    (once: a file Cython did not write again has it)."""
    with open(c_file) as f:
        text = f.read()
    if _SLOT in text:
        return
    if text.count(_SLOT_ANCHOR) != 1:
        raise RuntimeError(f"{c_file}: Cython's module slots are not where setup.py looks "
                           "for them (declare_per_interpreter_gil); was Cython upgraded?")
    with open(c_file, "w") as f:
        f.write(text.replace(_SLOT_ANCHOR, _SLOT + _SLOT_ANCHOR))


def cythonized(extensions, **options):
    modules = cythonize(extensions, **options)
    for module in modules:
        for source in module.sources:
            if source.startswith("minloop") and source.endswith(".c"):
                declare_per_interpreter_gil(source)
    return modules


setup(
    cmdclass={"build_ext": ParallelBuildExt},
    ext_modules=cythonized(
        extensions,
        nthreads=cython_processes(),
        language_level=3,
        annotate=flag("MINLOOP_ANNOTATE"),
        # Python's indexing semantics stay on (negative indexes, bounds
        # checks): the hot paths index C arrays, which these do not affect.
        # binding=False: methods of our cdef classes are CPython's method
        # descriptors, which check their `self` (Cython's own function type
        # does not: SocketTransport.close(object()) read a plain object as a
        # transport and crashed; cython/cython#6127).  binding=True at the
        # top of a module overrides it: sock_ops.pyx, whose functions become
        # Loop methods by assignment, and loop.pyx, where the check would
        # cost every loop method call (it says why).  The signatures go in
        # the docstrings in the form inspect.signature() reads.
        compiler_directives={"embedsignature": True,
                             "embedsignature.format": "clinic",
                             "binding": False},
    ),
)
