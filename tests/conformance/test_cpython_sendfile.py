"""CPython's test.test_asyncio.test_sendfile, on the loop under test.

Bound here:

* SendfileTests -- SendfileTestsBase (SendfileMixin + SockSendfileMixin):
  loop.sendfile() on TCP transports (native, forced fallback, TLS, partial,
  pre/post data, peer closing mid-way, write() during sendfile, a datagram
  transport refused) and loop.sock_sendfile() (whole file, offset/count,
  empty file, mixed with sock_sendall), with create_event_loop() returning a
  loop of the implementation under test.  CPython binds the same base to
  asyncio's SelectorEventLoop once per selector (EPollEventLoopTests,
  PollEventLoopTests, SelectEventLoopTests, KqueueEventLoopTests); those
  classes test asyncio's loop, so they are left out.

The sendfile tests of test_base_events and test_unix_events are bound in
test_cpython_base_events.py and test_cpython_unix_events.py.
"""
from test.test_asyncio import test_sendfile as _sendfile
from test.test_asyncio import utils as test_utils

from ._harness import new_event_loop

CPYTHON_MODULE = "test_sendfile"


class SendfileTests(_sendfile.SendfileTestsBase, test_utils.TestCase):

    def create_event_loop(self):
        return new_event_loop()


# The conftest checks that each test ran a loop of the implementation under test.
LOOP_IN_EVERY_TEST = (SendfileTests,)
