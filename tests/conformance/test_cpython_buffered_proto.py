"""CPython's test.test_asyncio.test_buffered_proto, on the loop under test.

BufferedProtocolSelectorTests (an asyncio.BufferedProtocol client over
create_connection against a start_server server) builds
asyncio.SelectorEventLoop in new_loop(); it is subclassed here with new_loop()
returning the loop under test.  Left out: BufferedProtocolProactorTests
(Windows only).
"""
from test.test_asyncio import test_buffered_proto as _buffered_proto

from ._harness import bind, new_event_loop

bind("test_buffered_proto", globals(), only=())


class BufferedProtocolSelectorTests(_buffered_proto.BufferedProtocolSelectorTests):

    def new_loop(self):
        return new_event_loop()


LOOP_IN_EVERY_TEST = (BufferedProtocolSelectorTests,)
