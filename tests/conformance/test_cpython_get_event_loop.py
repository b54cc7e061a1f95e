"""CPython's TestPyGetEventLoop / TestCGetEventLoop tests that build their own
loop, on the loop under test.

test_cpython_events.py runs these classes as they are; two of their tests
build a loop of their own from ``asyncio.DefaultEventLoopPolicy`` (one
subclasses it, the other installs it; from 3.14 they name it
``test_utils.DefaultEventLoopPolicy``), so there they run on asyncio's loop
(the conftest's ASYNCIO_LOOP_ON_PURPOSE).  Here that name is the loop under
test's policy while they run, as it is for a program that
made minloop its default: the loop they run must be found by asyncio's
pure-Python running-loop functions (TestPyGetEventLoop installs them in
asyncio.events) and by the C ones.
"""
import asyncio
import unittest
from unittest import mock

from test.test_asyncio import test_events as _events
from test.test_asyncio import utils as _test_utils

from . import _harness

CPYTHON_MODULE = "test_events"

# Where the tests find asyncio's default policy class: from 3.14, which
# deprecates asyncio.DefaultEventLoopPolicy, they name test_utils'.
_DEFAULT_POLICY_HOME = (_test_utils if hasattr(_test_utils, "DefaultEventLoopPolicy")
                        else asyncio)

_TESTS = ("test_get_event_loop_returns_running_loop",
          "test_get_event_loop_returns_running_loop2")


def _on_loop_under_test(base):
    """A subclass of ``base`` with only _TESTS, run with the loop under
    test's policy as asyncio.DefaultEventLoopPolicy."""

    def setUp(self):
        patcher = mock.patch.object(_DEFAULT_POLICY_HOME, "DefaultEventLoopPolicy",
                                    type(_harness.new_policy()))
        patcher.start()
        self.addCleanup(patcher.stop)
        base.setUp(self)

    namespace = {"setUp": setUp}
    for name in unittest.defaultTestLoader.getTestCaseNames(base):
        if name not in _TESTS:
            namespace[name] = None      # not callable: the loader skips it
    return type(f"{base.__name__}OnLoopUnderTest", (base,), namespace)


_harness.load()
TestPyGetEventLoopOnLoopUnderTest = _on_loop_under_test(_events.TestPyGetEventLoop)
LOOP_IN_EVERY_TEST = (TestPyGetEventLoopOnLoopUnderTest,)
if hasattr(_events, "TestCGetEventLoop"):
    TestCGetEventLoopOnLoopUnderTest = _on_loop_under_test(_events.TestCGetEventLoop)
    LOOP_IN_EVERY_TEST += (TestCGetEventLoopOnLoopUnderTest,)
