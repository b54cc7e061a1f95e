"""CPython's test.test_asyncio.test_sslproto, on the loop under test.

Bound here:

* StartTLSTests -- BaseStartTLS (loop.start_tls on client and server sides,
  TLS over create_connection/create_server with buffered and plain
  protocols, handshake timeouts, corrupted records, a memory-leak check) with
  new_loop() returning a loop of the implementation under test, as CPython's
  SelectorStartTLSTests binds it to asyncio's selector loop.

Left out: SslProtoHandshakeTests, which drive asyncio's SSLProtocol over a
mock transport (the loop only runs callbacks there; asyncio's SSLProtocol is
what minloop uses too, unchanged), and the Selector/Proactor classes, which
run the mixin on asyncio's loops.
"""
import unittest

from test.test_asyncio import test_sslproto as _sslproto

from ._harness import new_event_loop

CPYTHON_MODULE = "test_sslproto"


@unittest.skipIf(_sslproto.ssl is None, 'No ssl module')
class StartTLSTests(_sslproto.BaseStartTLS, unittest.TestCase):

    def new_loop(self):
        return new_event_loop()


LOOP_IN_EVERY_TEST = (StartTLSTests,)
