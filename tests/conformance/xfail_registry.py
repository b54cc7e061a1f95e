"""Expected failures of CPython's test_asyncio on minloop: one place, one reason each.

Keys are ``"<cpython module>::<TestClass>::<test>"``, e.g.
``"test_events::EventLoopTests::test_create_connection"``; ``fnmatch`` patterns
(``*``, ``?``, ``[...]``) are allowed.  Values are the reason: a string marks
the test ``xfail(strict=True)`` -- it must fail, and a pass fails the run, so a
fixed test has to be taken out of here.  ``NotRun(reason)`` is for a test that
crashes or hangs the interpreter: it is not run at all (reported as xfail).

A reason says why, in one of these forms:
  "needs <feature>, issue N"           -- not built yet
  "tests asyncio private internal <name>"
  "minloop bug: <what is wrong>"        -- to be fixed in the loop

An entry that holds only where asyncio behaves in some way is added under a
test of the running asyncio itself (an attribute, a signature), never under a
list of Python versions: the condition then says why, and follows asyncio's
backports.  On every Python CI runs the conformance suite on (3.10 to 3.15)
the registry must be exactly right: an entry that matches no test fails the
run (see the conftest's EXACT_VERSIONS).

Empty on 3.10 to 3.13: every bound test passes there.  On 3.14 and 3.15
two tests of CPython's suite patch asyncio's own implementation classes,
which minloop's compiled ones are not (see _PATCHES_ASYNCIO_CLASSES); each
is listed where the running Python's suite has it.

These apply only when the loop under test is minloop: on asyncio's loop
(MINLOOP_CONFORMANCE_LOOP=asyncio) every test must pass.
"""


class NotRun(str):
    """A reason for a test that is not run: it crashes or hangs the interpreter."""


def private(name):
    return f"tests asyncio private internal {name}"


XFAIL = {}

# Tests that reach into asyncio's own transport classes by patching them:
# (CPython test module, class, test) -> reason.  minloop's socket transport
# and TLS protocol are compiled final classes: an instance attribute cannot
# be patched on one, and a patch of asyncio's class never reaches them.
_PATCHES_ASYNCIO_CLASSES = {
    ("test_ssl", "TestSSL", "test_remote_shutdown_receives_trailing_data_on_slow_socket"):
        private("_SelectorSocketTransport: patches write() on the live socket "
                "transport and swaps its _sock (read via _read_ready_cb) for a "
                "wrapper that sends half of each buffer"),
    ("test_sslproto", "BaseStartTLS", "test_create_connection_ssl_failed_certificate_no_cycles"):
        private("sslproto.SSLProtocol: patches asyncio's TLS protocol class's "
                "connection_made() to collect the transports it sees (gh-159049)"),
}


def _has_test(module, cls, test):
    import importlib
    try:
        mod = importlib.import_module(f"test.test_asyncio.{module}")
    except ImportError:
        return False
    return hasattr(getattr(mod, cls, None), test)


def entries():
    """The registry for the running Python and asyncio: {key pattern: reason}."""
    found = dict(XFAIL)
    for (module, cls, test), reason in _PATCHES_ASYNCIO_CLASSES.items():
        if _has_test(module, cls, test):
            # The class the conformance module binds it under.
            bound = "StartTLSTests" if cls == "BaseStartTLS" else cls
            found[f"{module}::{bound}::{test}"] = reason
    return found
