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

Empty on every Python CI runs: every bound test passes.

These apply only when the loop under test is minloop: on asyncio's loop
(MINLOOP_CONFORMANCE_LOOP=asyncio) every test must pass.
"""


class NotRun(str):
    """A reason for a test that is not run: it crashes or hangs the interpreter."""


XFAIL = {}


def entries():
    """The registry for the running Python and asyncio: {key pattern: reason}."""
    return dict(XFAIL)
