"""CPython's test.test_asyncio.test_sslproto, on the loop under test.

Bound here:

* StartTLSTests -- BaseStartTLS (loop.start_tls on client and server sides,
  TLS over create_connection/create_server with buffered and plain
  protocols, handshake timeouts, corrupted records, a memory-leak check) with
  new_loop() returning a loop of the implementation under test, as CPython's
  SelectorStartTLSTests binds it to asyncio's selector loop.
* SslProtoHandshakeTests -- the TLS protocol layer alone over a mock socket
  transport (handshake, timeouts, close during the handshake, extra info,
  EOF, writes after close, set_protocol).  The tests build
  asyncio.sslproto.SSLProtocol; for each test that name is the
  implementation's own layer (minloop.tls.SSLProtocol for minloop).  3.11+
  only: 3.10's tests are of asyncio's older TLS layer.

Left out: the Selector/Proactor classes, which run the mixin on asyncio's
loops.
"""
import sys
import unittest
from asyncio import sslproto
from unittest import mock

from test.test_asyncio import test_sslproto as _sslproto

from ._harness import new_event_loop, ssl_protocol_class

CPYTHON_MODULE = "test_sslproto"


@unittest.skipIf(_sslproto.ssl is None, 'No ssl module')
class StartTLSTests(_sslproto.BaseStartTLS, unittest.TestCase):

    def new_loop(self):
        return new_event_loop()


@unittest.skipIf(_sslproto.ssl is None, 'No ssl module')
@unittest.skipIf(sys.version_info < (3, 11), "3.10's tests are of another TLS layer")
class SslProtoHandshakeTests(_sslproto.SslProtoHandshakeTests):

    def setUp(self):
        super().setUp()
        patcher = mock.patch.object(sslproto, 'SSLProtocol', ssl_protocol_class())
        patcher.start()
        self.addCleanup(patcher.stop)


LOOP_IN_EVERY_TEST = (StartTLSTests, SslProtoHandshakeTests)
