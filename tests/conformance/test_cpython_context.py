"""CPython's test.test_asyncio.test_context, on the loop under test.

The one test calls asyncio.run(), which takes its loop from the event loop
policy that the conftest installs before each test.
"""
from ._harness import bind

bind("test_context", globals())
