"""CPython's test.test_asyncio.test_base_events: its datagram endpoint tests
that run on real sockets, on the loop under test.

Bound here:

* BaseEventLoopWithSelectorTests -- only its test_create_datagram_endpoint*
  tests without @patch_socket, with setUp creating a loop of the
  implementation under test instead of asyncio's SelectorEventLoop.  They
  drive loop.create_datagram_endpoint() (asyncio's own coroutine on minloop,
  ending in minloop's compiled transport) over real sockets: argument
  checks, sock=, Unix datagram sockets, socket options, allow_broadcast.

Left out:

* the @patch_socket datagram tests: they replace asyncio.base_events' socket
  module with a MagicMock, which reaches minloop only in part (its
  getaddrinfo uses the real socket module) and hands the transport mock
  sockets whose fileno() is 1 -- they test asyncio's coroutine against mocks,
  not the loop;
* BaseEventTests (helpers), BaseEventLoopTests (a bare asyncio.BaseEventLoop
  with a mock selector), the stream/server tests of
  BaseEventLoopWithSelectorTests (for the stream transports to bind),
  RunningLoopTests and TestSelectorUtils.

Also bound:

* BaseLoopSockSendfileTests -- loop.sock_sendfile()'s argument checks and
  its sends, with setUp creating a loop of the implementation under test
  instead of asyncio's BaseSelectorEventLoop.  CPython picks that loop
  because it has no native sendfile, so that the class tests the read-and-send
  fallback; the rest of its tests pass through minloop's native path.  Left
  out are the two that assert there is no native path
  (test__sock_sendfile_native_failure, test_sock_sendfile_no_fallback): they
  test BaseEventLoop's stub _sock_sendfile_native, and fail on asyncio's own
  SelectorEventLoop as on minloop.
"""
from test.support import os_helper
from test.test_asyncio import test_base_events as _base_events
from test.test_asyncio import utils as test_utils

from ._harness import new_event_loop

CPYTHON_MODULE = "test_base_events"

class BaseEventLoopWithSelectorTests(test_utils.TestCase):
    # CPython's class name, so registry keys read as CPython's test ids.

    def setUp(self):
        super().setUp()
        self.loop = new_event_loop()
        self.set_event_loop(self.loop)


# Not bound to a module-level name: pytest would collect all of CPython's class.
for _name, _test in vars(_base_events.BaseEventLoopWithSelectorTests).items():
    # mock.patch decorators leave their patchings on the function.
    if (_name.startswith("test_create_datagram_endpoint")
            and not hasattr(_test, "patchings")):
        setattr(BaseEventLoopWithSelectorTests, _name, _test)
del _name, _test


class BaseLoopSockSendfileTests(_base_events.BaseLoopSockSendfileTests):

    # CPython's setUp, on the loop under test.
    def setUp(self):
        self.loop = new_event_loop()
        self.set_event_loop(self.loop)
        self.file = open(os_helper.TESTFN, 'rb')
        self.addCleanup(self.file.close)
        test_utils.TestCase.setUp(self)

    # Not collected (see the module's docstring).
    test__sock_sendfile_native_failure = None
    test_sock_sendfile_no_fallback = None


# The conftest checks that each test ran a loop of the implementation under test.
LOOP_IN_EVERY_TEST = (BaseEventLoopWithSelectorTests, BaseLoopSockSendfileTests)
