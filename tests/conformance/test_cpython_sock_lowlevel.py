"""CPython's test.test_asyncio.test_sock_lowlevel, on the loop under test.

BaseSockTestsMixin (the loop's sock_* methods against real sockets: TCP and
Unix clients, accept, recvfrom, sendto, huge payloads, cancellation races) is
bound to a class whose create_event_loop() returns the loop under test.
CPython's own classes (Select/EPoll/Poll/KqueueEventLoopTests) run the mixin
on asyncio's SelectorEventLoop and are left out.
"""
from test.test_asyncio import test_sock_lowlevel as _sock_lowlevel
from test.test_asyncio import utils as test_utils

from ._harness import new_event_loop

CPYTHON_MODULE = "test_sock_lowlevel"


class SockLowLevelTests(_sock_lowlevel.BaseSockTestsMixin, test_utils.TestCase):

    def create_event_loop(self):
        return new_event_loop()


# The conftest checks that each test ran a loop of the implementation under test.
LOOP_IN_EVERY_TEST = (SockLowLevelTests,)
