"""Expected failures of CPython's test_asyncio on minloop: one place, one reason each.

Keys are ``"<cpython module>::<TestClass>::<test>"``, e.g.
``"test_events::EventLoopTests::test_create_connection"``; ``fnmatch`` patterns
(``*``, ``?``, ``[...]``) are allowed.  Values are the reason: a string marks
the test ``xfail(strict=True)`` -- it must fail, and a pass fails the run, so a
fixed test has to be taken out of here.  ``NotRun(reason)`` is for a test that
crashes or hangs the interpreter: it is not run at all (reported as xfail).

A reason says why, in one of these forms:
  "needs <feature>, issue N"           -- not built yet (none today)
  "tests asyncio private internal <name>"
  "minloop bug: <what is wrong>"        -- to be fixed in the loop

XFAIL applies on every Python version; XFAIL_BY_VERSION[(3, X)] adds entries
(or, with a value of None, drops a shared one) for that version only.  CI runs
the conformance suite on 3.11, which must be exactly right: there, an entry
that matches no test fails the run (see the conftest).

These apply only when the loop under test is minloop: on asyncio's loop
(MINLOOP_CONFORMANCE_LOOP=asyncio) every test must pass.
"""

import inspect
import sys
from asyncio import sslproto


class NotRun(str):
    """A reason for a test that is not run: it crashes or hangs the interpreter."""


def private(name):
    return f"tests asyncio private internal {name}"


def _each(reason, *keys):
    return dict.fromkeys(keys, reason)


XFAIL = {
    # --- asyncio internals ----------------------------------------------------
    # They call asyncio's per-chunk callback with hand-made arguments and
    # read the registration from loop._selector.
    **_each(private("_sock_sendfile_native_impl, _selector"),
            "test_unix_events::SelectorEventLoopUnixSockSendfileTests::test_sock_sendfile_cancel[12]",
            "test_unix_events::SelectorEventLoopUnixSockSendfileTests::test_sock_sendfile_blocking_error",
            "test_unix_events::SelectorEventLoopUnixSockSendfileTests::test_sock_sendfile_os_error_*_call",
            "test_unix_events::SelectorEventLoopUnixSockSendfileTests::test_sock_sendfile_exception"),
    # Patches asyncio.unix_events.os to hide os.sendfile (minloop calls
    # sendfile(2) from C).
    "test_unix_events::SelectorEventLoopUnixSockSendfileTests::test_sock_sendfile_not_available":
        private("asyncio.unix_events.os"),
    # Counts calls of loop._run_once (patched on the instance) and names
    # loop._clock_resolution and loop._selector in its assertion message.
    "test_events::EventLoopTests::test_timeout_rounding":
        private("_run_once, _clock_resolution, _selector"),
}

# asyncio before 3.13 ends a TLS connection closed during its handshake with
# the socket transport's abort(); 3.13's with _force_close(None) (its _abort
# takes the exception), the same for a real transport, and minloop's layer
# does as 3.13's.  The test asserts which of the two a mock transport saw.
if "exc" not in inspect.signature(getattr(sslproto.SSLProtocol, "_abort", lambda self, exc: None)).parameters:
    XFAIL["test_sslproto::SslProtoHandshakeTests::test_close_during_handshake"] = private(
        "SSLProtocol._abort calling transport.abort() (3.13: _force_close(None))")

XFAIL_BY_VERSION = {}


def entries(version=None):
    """The registry for one Python version: {key pattern: reason}."""
    version = tuple(version or sys.version_info[:2])
    merged = dict(XFAIL)
    for key, reason in XFAIL_BY_VERSION.get(version, {}).items():
        if reason is None:
            merged.pop(key, None)
        else:
            merged[key] = reason
    return merged
