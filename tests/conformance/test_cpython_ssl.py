"""CPython's test.test_asyncio.test_ssl (3.11+), on the loop under test.

TestSSL drives TLS through the loop's transports: create_connection and
create_server with ssl=, start_tls, shutdown and close in every order,
flow control under TLS, unclosed-transport warnings.  Its setUp and
new_loop() call asyncio.new_event_loop(); the bound class makes both return
a loop of the implementation under test instead.
"""
import sys
import unittest

from ._harness import new_event_loop

CPYTHON_MODULE = "test_ssl"

if sys.version_info >= (3, 11):
    from test.test_asyncio import test_ssl as _ssl_tests

    @unittest.skipIf(_ssl_tests.ssl is None, 'No ssl module')
    class TestSSL(_ssl_tests.TestSSL):

        def setUp(self):
            super(_ssl_tests.TestSSL, self).setUp()
            self.loop = new_event_loop()
            self.set_event_loop(self.loop)
            self.addCleanup(self.loop.close)

        def new_loop(self):
            return new_event_loop()

    LOOP_IN_EVERY_TEST = (TestSSL,)
