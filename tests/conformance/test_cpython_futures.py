"""CPython's test.test_asyncio.test_futures, on the loop under test.

Most tests run on test_utils.TestLoop (self.new_test_loop()), CPython's
fake-clock BaseEventLoop, on purpose: they test asyncio.Future itself, and stay
on it.  Tests that need a real loop call asyncio.new_event_loop(), which takes
it from the event loop policy that the conftest installs before each test.
"""
from ._harness import bind

bind("test_futures", globals())
