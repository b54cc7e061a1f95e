"""CPython's test.test_asyncio.test_subprocess, on the loop under test.

Bound here:

* SubprocessTests -- SubprocessMixin (asyncio.create_subprocess_exec/shell and
  loop.subprocess_exec: pipes both ways, communicate, wait, kill, terminate,
  send_signal, broken pipes, pause_reading, DEVNULL, cancellation at each step,
  close() killing a running child and sparing a finished one, Popen errors,
  text-mode arguments refused) on a loop of the implementation under test.
  CPython binds the mixin once per child watcher class
  (SubprocessWatcherMixin attaches the watcher to the policy); minloop has no
  child watcher (it waits on a pidfd, or a thread where there is none), so
  the mixin is bound once, on a plain loop.  On asyncio's own loop
  (MINLOOP_CONFORMANCE_LOOP=asyncio) the policy's default watcher serves it,
  as for any asyncio user.

Left out, because they test asyncio's own classes, not the loop under test:

* SubprocessTransportTests -- asyncio's BaseSubprocessTransport subclassed
  over a mocked loop and Popen;
* Subprocess{Threaded,Safe,Fast,Pidfd,MultiLoop}WatcherTests,
  MultiLoopChildWatcherTests, GenericWatcherTests -- asyncio's child watchers
  (asyncio-private to its own loop; 3.12 deprecates them, 3.14 removes them).
"""
from test.test_asyncio import test_subprocess as _subprocess
from test.test_asyncio import utils as test_utils

from ._harness import new_event_loop


class SubprocessTests(_subprocess.SubprocessMixin, test_utils.TestCase):

    def setUp(self):
        super().setUp()
        self.loop = new_event_loop()
        self.set_event_loop(self.loop)


LOOP_IN_EVERY_TEST = (SubprocessTests,)
