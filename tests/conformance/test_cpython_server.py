"""CPython's test.test_asyncio.test_server, on the loop under test.

* SelectorStartServerTests -- asyncio.start_server/start_unix_server,
  Server.start_serving()/serve_forever()/async with; CPython's class builds
  asyncio.SelectorEventLoop in new_loop(), so it is subclassed here with
  new_loop() returning the loop under test.
* TestServer2 (3.12+), UnixServerCleanupTests (3.13+) -- Server.wait_closed()
  and the Unix socket file's cleanup, as IsolatedAsyncioTestCase tests: their
  loop comes from the policy, which the conftest sets to the loop under test.

Left out: ProactorStartServerTests (Windows only; skipped there anyway).
"""
from test.test_asyncio import test_server as _server

from ._harness import bind, new_event_loop

bind("test_server", globals(), only=("TestServer2", "UnixServerCleanupTests"))


class SelectorStartServerTests(_server.SelectorStartServerTests):

    def new_loop(self):
        return new_event_loop()


LOOP_IN_EVERY_TEST = (SelectorStartServerTests,)
