"""CPython's test.test_asyncio.test_futures, on the loop under test.

Its tests run on test_utils.TestLoop (self.new_test_loop(); on 3.11, all of
them), CPython's fake-clock BaseEventLoop, on purpose: the module tests
asyncio.Future itself (the C and the Python one), which minloop uses as it is,
not the loop.  It is kept because it is cheap and part of what "drop-in"
promises; the conftest's summary counts such tests as run "on
test_utils.TestLoop alone".
"""
from ._harness import bind

bind("test_futures", globals())
