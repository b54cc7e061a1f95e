"""``python -m minloop run``: run a program as ``python`` would, on minloop.

    python -m minloop run script.py [args...]    as  python script.py [args...]
    python -m minloop run -m module [args...]    as  python -m module [args...]

Everything after the script (or ``-m MODULE``) is the program's, its options
included: ``run -m uvicorn --port 8000 app:app`` gives ``--port`` to uvicorn
and ``run -m pkg -h`` shows pkg's help.  What the program sees is what python
would give it: ``sys.argv``, ``sys.path[0]``, a fresh ``__main__`` module; a
missing file or module gets python's one-line message and exit status; a
traceback starts at the program's first frame, not in minloop or runpy.

minloop's event loop policy is installed first, so ``asyncio.run()``,
``asyncio.Runner()`` and ``asyncio.new_event_loop()`` make minloop loops.  A
program that picks its own loop (a ``loop_factory``, ``uvloop.install()``, a
server's ``--loop`` option) still gets the loop it picked: ``run`` then says
so, once, on stderr (see ``watch_for_other_loops``).
"""

import builtins
import functools
import importlib.machinery
import importlib.util
import io
import marshal
import os
import pkgutil
import re
import runpy
import sys
import threading
import types

from . import _asyncio_compat


# Our options that take a value, and the environment variable each sets
# (minloop/telemetry/environ.py reads them as each loop is made).
_TELEMETRY_OPTIONS = {'--stall': 'MINLOOP_STALL', '--metrics': 'MINLOOP_METRICS'}


def parse(argv, parser, environ=None):
    """(module, script, the program's arguments) from what follows ``run``.

    Only what comes before the program is ours (-h, -m MODULE, --,
    --stall SECONDS, --metrics [HOST:]PORT); the first other word is the
    script.  The telemetry options go into `environ` (a dict: the variables
    to set).  ``parser`` is run's argparse parser, used for its help and its
    usage errors (status 2).
    """
    from .telemetry import environ as telemetry_environ
    checks = {'--stall': telemetry_environ.parse_stall,
              '--metrics': telemetry_environ.parse_metrics}
    environ = {} if environ is None else environ
    skip = 0
    for i, arg in enumerate(argv):
        if skip:
            skip -= 1
            continue
        name, eq, value = arg.partition('=')
        if name in _TELEMETRY_OPTIONS:
            if not eq:
                if i + 1 == len(argv):
                    parser.error(f'argument {name}: expected one argument')
                value, skip = argv[i + 1], 1
            try:
                checks[name](value)
            except ValueError as exc:
                parser.error(f'argument {name}: {str(exc).partition(": ")[2]}')
            environ[_TELEMETRY_OPTIONS[name]] = value
            continue
        if arg == '-m':
            if i + 1 == len(argv):
                parser.error('argument -m: expected one argument')
            return argv[i + 1], None, argv[i + 2:]
        if arg.startswith('-m'):  # -mMODULE, as python takes it
            return arg[2:], None, argv[i + 1:]
        if arg in ('-h', '--help'):
            parser.print_help()
            parser.exit()
        if arg == '--':
            i += 1
            break
        if arg.startswith('-') and arg != '-':
            parser.error(f'unrecognized option {arg} (options for the program go '
                         f'after the script or -m MODULE)')
        break
    else:
        i = len(argv)
    if i == len(argv):
        parser.error('a script or -m MODULE is required')
    return None, argv[i], argv[i + 1:]


def main(argv, parser):
    environ = {}
    module, script, args = parse(argv, parser, environ)
    # Through the environment, so that the processes the program starts (a
    # server's workers) have them too.
    os.environ.update(environ)
    from .policy import _install
    _install()
    watch_for_other_loops()
    try:
        if module is not None:
            return _run_module(module, args)
        return _run_path(script, args)
    except SystemExit:
        raise
    except BaseException as exc:
        # The interpreter reports it (its excepthook, its exit status:
        # 1, or death by SIGINT for KeyboardInterrupt), from the program's
        # own frames.
        _report_from_program_frames(exc)
        raise


# --- running the program ----------------------------------------------------

def _fresh_main_module():
    # The program gets a __main__ of its own, as under python; ours (this
    # command's) stays alive through the references our functions hold.
    main = types.ModuleType('__main__')
    main.__builtins__ = builtins
    sys.modules['__main__'] = main
    return main


def _set_sys_path0(directory):
    # `python -m minloop` put the current directory first; `python
    # script.py` puts the script's directory there instead (none with -P).
    if getattr(sys.flags, 'safe_path', False):
        return
    if sys.path and sys.path[0] == os.getcwd():
        sys.path[0] = directory
    else:
        sys.path.insert(0, directory)


def _run_module(module, args):
    """As ``python -m module args``."""
    _fresh_main_module()
    sys.argv = ['-m', *args]  # argv[0] becomes the module's file once found
    # The function python -m itself calls: its lookup, its error messages
    # ("No module named ...", "... is a package and cannot be directly
    # executed": sys.exit with status 1).
    runpy._run_module_as_main(module, alter_argv=True)
    return 0


def _run_path(path, args):
    """As ``python path args``: a script, a compiled .pyc, a directory or a
    zip file with a __main__.py, or ``-`` for standard input."""
    if path == '-':
        main = _fresh_main_module()
        sys.argv = ['-', *args]
        _set_sys_path0('')
        source = sys.stdin.buffer.read() if sys.stdin is not None else b''
        exec(compile(source, '<stdin>', 'exec', dont_inherit=True), main.__dict__)
        return 0
    abspath = os.path.abspath(path)
    sys.argv = [path, *args]
    if pkgutil.get_importer(abspath) is not None:
        # A directory or a zip file: its __main__ module runs, as python
        # does it (the error for a missing one is python's, status 1).
        _fresh_main_module()
        _set_sys_path0(abspath)
        runpy._run_module_as_main('__main__', alter_argv=False)
        return 0
    try:
        with io.open_code(abspath) as f:
            data = f.read()
    except OSError as exc:
        program = sys.orig_argv[0] if getattr(sys, 'orig_argv', None) else 'python'
        print(f"{program}: can't open file {abspath!r}: [Errno {exc.errno}] {exc.strerror}",
              file=sys.stderr)
        return 2
    main = _fresh_main_module()
    main.__file__ = abspath
    if _asyncio_compat.MODULES_HAVE_CACHED:
        main.__cached__ = None
    if data[:4] == importlib.util.MAGIC_NUMBER:
        main.__loader__ = importlib.machinery.SourcelessFileLoader('__main__', abspath)
        code = marshal.loads(data[16:])
    else:
        main.__loader__ = importlib.machinery.SourceFileLoader('__main__', abspath)
        code = compile(data, abspath, 'exec', dont_inherit=True)
    _set_sys_path0(os.path.dirname(os.path.realpath(abspath)))
    exec(code, main.__dict__)
    return 0


def _report_from_program_frames(exc):
    """Have the interpreter's report of exc start at the program's frames.

    exc propagates on to the interpreter, which adds our callers' frames and
    passes it to sys.excepthook; the hook put here for that one call strips
    everything before the program's first frame, as a traceback under
    ``python script.py`` has none of python's own.
    """
    ours = {_run_path.__code__.co_filename, runpy._run_code.__code__.co_filename}
    tb = exc.__traceback__  # from main()'s frame down to where exc was raised
    while tb is not None and tb.tb_frame.f_code.co_filename in ours:
        tb = tb.tb_next
    hook = sys.excepthook

    def excepthook(exc_type, value, traceback):
        sys.excepthook = hook
        if value is exc:
            traceback = tb
            value.__traceback__ = tb  # 3.13's printer reads it from here
        hook(exc_type, value, traceback)

    sys.excepthook = excepthook


# --- saying so when the program runs another loop --------------------------

def watch_for_other_loops():
    """Write one line to stderr when the main thread starts running an event
    loop that is not minloop's (the program chose it).

    Every loop announces itself when it starts running: asyncio's (and
    minloop's Python parts) call asyncio.events._set_running_loop at each
    run_forever, uvloop the asyncio._set_running_loop it finds at import.
    Wrapping those two names costs one Python call per run_forever, never
    anything per iteration; minloop's compiled core bound the original at
    import and does not pass through here at all.
    """
    import asyncio
    import asyncio.events as events

    from .base_events import Loop

    original = events._set_running_loop
    main_thread = threading.get_ident()
    warned = False

    @functools.wraps(original)
    def _set_running_loop(loop):
        nonlocal warned
        if (loop is not None and not warned and not isinstance(loop, Loop)
                and threading.get_ident() == main_thread):
            warned = True
            _warn_other_loop(loop)
        original(loop)

    events._set_running_loop = _set_running_loop
    asyncio._set_running_loop = _set_running_loop


def _warn_other_loop(loop):
    if sys.stderr is None:
        return
    cls = type(loop)
    name = f'{cls.__module__}.{cls.__qualname__}'
    hint = ('a loop_factory, uvloop.run() or .install(), or a --loop option '
            'chose it')
    uvicorn = sys.modules.get('uvicorn')
    if uvicorn is not None:
        # Loop factories by import string came with uvicorn 0.36; before,
        # --loop asyncio left the choice to the policy, which is ours.
        version = tuple(int(n) for n in re.findall(r'\d+', getattr(uvicorn, '__version__', ''))[:2])
        option = 'minloop:new_event_loop' if version >= (0, 36) else 'asyncio'
        hint = f'uvicorn chose it: pass --loop {option}'
    print(f'python -m minloop run: the program runs its own event loop, {name}, '
          f'not minloop ({hint})', file=sys.stderr, flush=True)
