"""CPython's test.test_asyncio.test_unix_events: the parts that run real
sockets on a real loop, on the loop under test.

Bound here:

* SelectorEventLoopUnixSocketTests -- create_unix_server/create_unix_connection
  (paths, pathlib, stale socket files, sock= of the wrong kind, argument
  errors).  CPython's setUp builds asyncio.SelectorEventLoop; here it builds
  the loop under test.
* TestFunctional -- add_reader/add_writer refusing an invalid object and an
  fd that a transport (create_connection(sock=)) owns; its setUp asks the
  policy (asyncio.new_event_loop()), which is the loop under test's.
* SelectorEventLoopUnixSockSendfileTests -- loop._sock_sendfile_native(), the
  hook under sock_sendfile(), refusing files it cannot send (no fd,
  io.BytesIO, a bad fd, no os.sendfile in asyncio.unix_events' os), and
  asyncio's per-step _sock_sendfile_native_impl (minloop's, with its
  signature) with os.sendfile patched, checked through loop._selector
  (minloop's: a read-only view of its fd table); its setUp asks the policy.

Left out, because they never run the loop under test's own I/O:

* SelectorEventLoopSignalTests -- asyncio's signal handling on a mocked
  signal module;
* UnixReadPipeTransportTests, UnixWritePipeTransportTests -- asyncio's pipe
  transport classes over test_utils.TestLoop and mocked pipes;
* the child watcher classes and PolicyTests -- asyncio's own watchers and
  policy; TestFork (3.12+) -- asyncio's fork handling of its policy's loop.
"""
from test.test_asyncio import test_unix_events as _unix_events
from test.test_asyncio import utils as test_utils

from ._harness import bind, new_event_loop

bind("test_unix_events", globals(),
     only=("TestFunctional", "SelectorEventLoopUnixSockSendfileTests"))


class SelectorEventLoopUnixSocketTests(_unix_events.SelectorEventLoopUnixSocketTests):

    def setUp(self):
        test_utils.TestCase.setUp(self)
        self.loop = new_event_loop()
        self.set_event_loop(self.loop)


LOOP_IN_EVERY_TEST = (SelectorEventLoopUnixSocketTests, TestFunctional,  # noqa: F821
                      SelectorEventLoopUnixSockSendfileTests)  # noqa: F821
