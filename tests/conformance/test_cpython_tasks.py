"""CPython's test.test_asyncio.test_tasks, on the loop under test.

Tests that need a real loop call asyncio.new_event_loop() or asyncio.run(),
which take it from the event loop policy that the conftest installs before each
test.  Tests that use self.new_test_loop() run on test_utils.TestLoop, CPython's
fake-clock BaseEventLoop, on purpose: they test asyncio.Task and the functions
of asyncio.tasks with controlled time, and stay on it.
"""
from ._harness import bind

bind("test_tasks", globals())
