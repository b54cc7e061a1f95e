"""CPython's test.test_asyncio.test_streams, on the loop under test.

StreamTests' setUp builds its loop with asyncio.new_event_loop(), which asks
the event loop policy: the conftest installs the loop under test's policy
before every test, so the class is bound as it is.  The tests drive
StreamReader/StreamWriter over the loop's TCP and Unix transports
(open_connection, start_server, their Unix twins) against threaded servers
and clients from test_utils, and over the loop's own servers.
"""
from ._harness import bind

bind("test_streams", globals())

# The conftest checks that each test of these classes ran a loop of the
# implementation under test (StreamTests' setUp creates one).
LOOP_IN_EVERY_TEST = (StreamTests,)  # noqa: F821
