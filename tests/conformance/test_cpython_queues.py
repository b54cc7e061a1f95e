"""CPython's test.test_asyncio.test_queues, on the loop under test.

Every class is a unittest.IsolatedAsyncioTestCase: its asyncio.Runner takes
its loop from the event loop policy that the conftest installs before each test.
"""
from ._harness import bind

bind("test_queues", globals())
