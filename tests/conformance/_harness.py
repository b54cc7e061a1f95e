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
from asyncio import base_events

from test.test_asyncio import utils as test_utils

ENV_VAR = "MINLOOP_CONFORMANCE_LOOP"
LOOP_NAME = os.environ.get(ENV_VAR, "minloop").strip() or "minloop"


class HarnessError(Exception):
    """The loop under test cannot be loaded; the run stops at once."""


def _load():
    """Return (loop factory, policy class, loop class) for LOOP_NAME."""
    if LOOP_NAME == "asyncio":
        return (asyncio.SelectorEventLoop, asyncio.DefaultEventLoopPolicy,
                asyncio.SelectorEventLoop)
    try:
        module = importlib.import_module(LOOP_NAME)
        api = (module.new_event_loop, module.EventLoopPolicy, module.Loop)
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
      "fake"    -- test_utils.TestLoop, CPython's fake-clock BaseEventLoop that
                   some tests build on purpose; it stays asyncio's;
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
        elif isinstance(loop, test_utils.TestLoop):
            kind = "fake"
        elif isinstance(loop, base_events.BaseEventLoop):
            kind = "asyncio"
        else:
            kind = "other"
        self.kinds.setdefault(kind, set()).add(type(loop).__qualname__)

    def has(self, kind):
        return kind in self.kinds


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


def ssl_protocol_class():
    """The TLS protocol layer of the implementation under test: minloop's
    own (minloop.tls.SSLProtocol), else asyncio's."""
    if LOOP_NAME == "minloop":
        from minloop import tls
        return tls.SSLProtocol
    from asyncio import sslproto
    return sslproto.SSLProtocol


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
    every TestCase subclass bound to a module-level name.  The module's
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
            namespace[name] = obj
    namespace["CPYTHON_MODULE"] = module_name
    return module
