"""CPython's test.test_asyncio.test_events, on the loop under test.

Bound here:

* EventLoopTests -- EventLoopTestsMixin (the loop's whole public API: call_*,
  run_*, readers/writers, signals, executors, sockets, servers, pipes, ...)
  with create_event_loop() returning a loop of the implementation under test,
  as CPython's Windows SelectEventLoopTests binds it.  CPython's Unix classes
  (SelectEventLoopTests, EPollEventLoopTests, PollEventLoopTests) add
  UnixEventLoopTestsMixin, which attaches an asyncio.SafeChildWatcher
  (a SIGCHLD handler) to the loop: that is asyncio's machinery for its own
  subprocess support, which minloop does not use (it waits on a pidfd), so it
  is left out, and the subprocess tests are bound on their own:
* SubprocessTests -- SubprocessTestsMixin on the same kind of loop.  On asyncio's
  loop, its default child watcher serves them, as for any asyncio user.
* TestPyGetEventLoop, TestCGetEventLoop -- asyncio.get_event_loop() and
  get_running_loop() (the Python and C versions) as seen from our loop, which
  their setUp creates with asyncio.new_event_loop().
* TestServer, TestAbstractServer -- Server.get_loop() and
  AbstractServer.wait_closed() run on our loop.

Left out, because they test asyncio's own classes and never touch the loop
under test:

* SelectEventLoopTests, EPollEventLoopTests, PollEventLoopTests (and
  KqueueEventLoopTests) -- the same mixins on asyncio's SelectorEventLoop;
* HandleTests, TimerTests -- asyncio.Handle / asyncio.TimerHandle constructed
  directly over a mock loop (minloop has its own handle classes; how they
  behave as seen from the loop is tested through EventLoopTests);
* AbstractEventLoopTests -- the NotImplementedError stubs of
  asyncio.AbstractEventLoop itself;
* PolicyTests -- asyncio.DefaultEventLoopPolicy / AbstractEventLoopPolicy.
"""
from test.test_asyncio import test_events as _events
from test.test_asyncio import utils as test_utils
from test import support

from ._harness import bind, new_event_loop

bind("test_events", globals(), only=(
    "TestPyGetEventLoop", "TestCGetEventLoop",
    "TestServer", "TestAbstractServer",
))


class EventLoopTests(_events.EventLoopTestsMixin, test_utils.TestCase):

    def create_event_loop(self):
        return new_event_loop()


class SubprocessTests(_events.SubprocessTestsMixin, test_utils.TestCase):

    # EventLoopTestsMixin's setUp/tearDown, without its tests.
    def setUp(self):
        super().setUp()
        self.loop = new_event_loop()
        self.set_event_loop(self.loop)

    def tearDown(self):
        if not self.loop.is_closed():
            test_utils.run_briefly(self.loop)
        self.doCleanups()
        support.gc_collect()
        super().tearDown()


# The conftest checks that each test of these classes ran a loop of the
# implementation under test (each one's setUp creates one).
LOOP_IN_EVERY_TEST = (EventLoopTests, SubprocessTests,
                      TestPyGetEventLoop, TestCGetEventLoop)  # noqa: F821
