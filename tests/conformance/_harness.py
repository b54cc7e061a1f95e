"""The loop under test, and a record of every loop the tests create.

The conformance suite runs CPython's ``test.test_asyncio`` modules with some
event loop implementation put in place of asyncio's.  Which one is chosen by
``MINLOOP_CONFORMANCE_LOOP``:

* ``minloop`` (the default): ``minloop.new_event_loop`` / ``minloop.EventLoopPolicy``;
* ``asyncio``: asyncio's own ``SelectorEventLoop`` / ``DefaultEventLoopPolicy``,
  the baseline that proves the harness itself is right (everything passes);
* any other module name with the same API as minloop (``new_event_loop``,
  ``EventLoopPolicy``, ``Loop``), e.g. ``uvloop``: useful to check that the
  harness notices a loop that is not asyncio's.  The xfail registry applies
  to minloop only.

Loops are recorded so that the conftest can prove, test by test, that the
loops the tests ran on are the ones under test (see ``LoopRecord``).
"""

import asyncio
import importlib
import os
import warnings
from asyncio import base_events, proactor_events, selector_events

from test.test_asyncio import utils as test_utils

ENV_VAR = "MINLOOP_CONFORMANCE_LOOP"
LOOP_NAME = os.environ.get(ENV_VAR, "minloop").strip() or "minloop"


class HarnessError(Exception):
    """The loop under test cannot be loaded; the run stops at once."""


def _load():
    """Return (loop factory, policy class, loop class) for LOOP_NAME."""
    if LOOP_NAME == "asyncio":
        with warnings.catch_warnings():
            # asyncio's policy classes warn from 3.14 on (see below).
            warnings.simplefilter("ignore", DeprecationWarning)
            policy = asyncio.DefaultEventLoopPolicy
        return (asyncio.SelectorEventLoop, policy, asyncio.SelectorEventLoop)
    try:
        module = importlib.import_module(LOOP_NAME)
        with warnings.catch_warnings():
            # The policy class may warn where asyncio's policies are
            # deprecated (3.14+); the harness needs it all the same.
            warnings.simplefilter("ignore", DeprecationWarning)
            policy_class = module.EventLoopPolicy
        api = (module.new_event_loop, policy_class, module.Loop)
    except (ImportError, AttributeError) as exc:
        raise HarnessError(
            f"{ENV_VAR}={LOOP_NAME}: cannot load the loop under test ({exc!r}). "
            f"Build minloop in place first, and run pytest as "
            f"'python -m pytest' from the repository root (or install it); "
            f"{ENV_VAR}=asyncio runs the suite on asyncio's own loop."
        ) from exc
    loop = api[0]()
    loop.close()
    return api


_factory = _policy_base = LOOP_CLASS = None


def load():
    """Import the loop under test (once); raise HarnessError if it is broken."""
    global _factory, _policy_base, LOOP_CLASS
    if _factory is None:
        _factory, _policy_base, LOOP_CLASS = _load()


class LoopRecord:
    """What kinds of loop were created while one test ran.

    Kinds:
      "tested"  -- a loop of the implementation under test;
      "fake"    -- a stand-in loop that CPython's tests define themselves on
                   asyncio.BaseEventLoop, with no selector (so no I/O), and
                   build on purpose to test Future/Task: test_utils.TestLoop
                   (fake clock), test_futures' SimpleEvilEventLoop (a
                   call_soon that mutates the future, 3.14+); they stay
                   asyncio's;
      "asyncio" -- any other asyncio BaseEventLoop: if the implementation
                   under test is not asyncio, the test ran (partly) on
                   asyncio's loop instead of ours.
    Only kinds and class names are kept, never the loops, so that the record
    does not change when loops are collected.
    """

    def __init__(self):
        self.reset()

    def reset(self):
        self.kinds = {}          # kind -> set of class names

    def add(self, loop):
        if LOOP_CLASS is not None and isinstance(loop, LOOP_CLASS):
            kind = "tested"
        elif _is_fake(loop):
            kind = "fake"
        elif isinstance(loop, base_events.BaseEventLoop):
            kind = "asyncio"
        else:
            kind = "other"
        self.kinds.setdefault(kind, set()).add(type(loop).__qualname__)

    def has(self, kind):
        return kind in self.kinds


def _is_fake(loop):
    cls = type(loop)
    return (isinstance(loop, base_events.BaseEventLoop)
            and cls.__module__.startswith(_CPYTHON_TESTS)
            and not isinstance(loop, _REAL_LOOP_BASES))


_CPYTHON_TESTS = test_utils.__name__.rpartition(".")[0] + "."   # "test.test_asyncio."
# asyncio's loops that do I/O: a test's subclass of one is a real asyncio loop.
_REAL_LOOP_BASES = (selector_events.BaseSelectorEventLoop,
                    proactor_events.BaseProactorEventLoop)

RECORD = LoopRecord()
_base_init = base_events.BaseEventLoop.__init__


def _recording_base_init(self, *args, **kwargs):
    _base_init(self, *args, **kwargs)
    RECORD.add(self)


def install_recorder():
    """Record every asyncio BaseEventLoop built from now on (TestLoop too)."""
    base_events.BaseEventLoop.__init__ = _recording_base_init


def uninstall_recorder():
    base_events.BaseEventLoop.__init__ = _base_init


def new_event_loop():
    """A new loop of the implementation under test (recorded)."""
    loop = _factory()
    RECORD.add(loop)
    return loop


# asyncio.EventLoop (3.13+) is asyncio's own loop class for the platform.
# From 3.14, with the policy system deprecated, CPython's tests name it where
# they want "the default loop": as a TestCase's loop_factory (read when the
# class is defined) and in calls (asyncio.run(..., loop_factory=asyncio.EventLoop),
# asyncio.EventLoop()).  The conftest points the name at new_event_loop while
# a test runs, and bind() rebinds the class attributes.
ASYNCIO_EVENT_LOOP = getattr(asyncio, "EventLoop", None)


def _with_tested_loop_factory(cls, module_name):
    """A subclass of ``cls`` (same name) whose loop_factory makes the loop
    under test, for a class whose loop_factory is asyncio.EventLoop."""
    return type(cls.__name__, (cls,), {
        "loop_factory": staticmethod(new_event_loop),
        "__module__": module_name,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
    })


def ssl_protocol_class():
    """The TLS protocol layer of the implementation under test: minloop's
    own (minloop.tls.SSLProtocol), else asyncio's."""
    if LOOP_NAME == "minloop":
        from minloop import tls
        return tls.SSLProtocol
    from asyncio import sslproto
    return sslproto.SSLProtocol


# asyncio.set_event_loop_policy() is deprecated from 3.14 (removal in 3.16);
# CPython's tests set the policy through the function under it, which does
# not warn, and so does the conftest.
set_event_loop_policy = getattr(asyncio.events, "_set_event_loop_policy",
                                asyncio.set_event_loop_policy)

_policy_classes = {}


def new_policy():
    """A policy of the implementation under test whose loops are recorded.

    It is the implementation's own policy class with only new_event_loop
    wrapped, so get_event_loop(), child watchers etc. are the implementation's.
    """
    cls = _policy_classes.get(_policy_base)
    if cls is None:
        class ConformancePolicy(_policy_base):
            def new_event_loop(self):
                loop = super().new_event_loop()
                RECORD.add(loop)
                return loop
        cls = _policy_classes[_policy_base] = ConformancePolicy
    return cls()


def bind(module_name, namespace, *, only=None, exclude=()):
    """Copy the unittest.TestCase classes of a CPython test module into
    ``namespace`` (a conformance test module's globals) so pytest collects
    them there, under this directory's conftest.

    These are exactly the classes unittest's loader would run for the module:
    every TestCase subclass bound to a module-level name; one whose
    loop_factory is asyncio.EventLoop is bound as a subclass whose
    loop_factory makes the loop under test.  The module's
    tearDownModule (which only resets the event loop policy) is not copied:
    the conftest resets the policy around every test.  ``only`` / ``exclude``
    name the classes to take / to leave out.  Returns the module; skips the
    whole conformance module where this Python version has no such module.
    """
    import unittest

    import pytest

    load()      # a broken loop under test fails the collection, loudly
    full_name = f"test.test_asyncio.{module_name}"
    try:
        module = importlib.import_module(full_name)
    except ModuleNotFoundError as exc:
        if exc.name != full_name:
            raise
        pytest.skip(f"{full_name} does not exist on this Python version",
                    allow_module_level=True)
    for name, obj in vars(module).items():
        if (isinstance(obj, type) and issubclass(obj, unittest.TestCase)
                and obj.__name__ == name and name not in exclude
                and (only is None or name in only)):
            if (ASYNCIO_EVENT_LOOP is not None
                    and getattr(obj, "loop_factory", None) is ASYNCIO_EVENT_LOOP):
                obj = _with_tested_loop_factory(
                    obj, namespace.get("__name__", obj.__module__))
            namespace[name] = obj
    namespace["CPYTHON_MODULE"] = module_name
    return module
