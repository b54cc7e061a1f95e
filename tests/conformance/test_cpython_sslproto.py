"""CPython's test.test_asyncio.test_sslproto, on the loop under test.

Bound here:

* StartTLSTests -- BaseStartTLS (loop.start_tls on client and server sides,
  TLS over create_connection/create_server with buffered and plain
  protocols, handshake timeouts, corrupted records, a memory-leak check) with
  new_loop() returning a loop of the implementation under test, as CPython's
  SelectorStartTLSTests binds it to asyncio's selector loop.  One test
  (3.14+: ..._failed_certificate_no_cycles) patches
  asyncio.sslproto.SSLProtocol.connection_made to see each TLS protocol's
  transport; for these tests that name is the implementation's own layer, as
  in SslProtoHandshakeTests below.
* SslProtoHandshakeTests -- the TLS protocol layer alone over a mock socket
  transport (handshake, timeouts, close during the handshake, extra info,
  EOF, writes after close, set_protocol).  The tests build
  asyncio.sslproto.SSLProtocol; for each test that name is the
  implementation's own layer (minloop.tls.SSLProtocol for minloop).  On
  3.10 they are tests of asyncio's older layer (a plain Protocol fed by
  data_received()); minloop's takes data_received() too, and passes them.

Left out: the Selector/Proactor classes, which run the mixin on asyncio's
loops.
"""
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

    def setUp(self):
        super().setUp()
        _bind_ssl_protocol(self)


def _bind_ssl_protocol(test):
    patcher = mock.patch.object(sslproto, 'SSLProtocol', ssl_protocol_class())
    patcher.start()
    test.addCleanup(patcher.stop)


@unittest.skipIf(_sslproto.ssl is None, 'No ssl module')
class SslProtoHandshakeTests(_sslproto.SslProtoHandshakeTests):

    def setUp(self):
        super().setUp()
        _bind_ssl_protocol(self)


LOOP_IN_EVERY_TEST = (StartTLSTests, SslProtoHandshakeTests)
