"""Conformance suite: CPython's own test.test_asyncio, run with minloop as the loop.

"Drop-in" means: asyncio's own tests pass on our loop.  This directory runs the
test.test_asyncio package installed with the running Python (its tests, not
copies) under pytest, with every loop those tests create being a minloop loop.

How to run (from the repository root, minloop built in place or installed):

    python -m pytest tests/conformance                 # on minloop
    MINLOOP_CONFORMANCE_LOOP=asyncio python -m pytest tests/conformance

The second runs the same tests on asyncio's own loop, with no expected
failures: it must be all green, which proves the harness itself right.  (Any
module with minloop's API -- new_event_loop, EventLoopPolicy, Loop -- can be
named, e.g. uvloop; the registry of expected failures is for minloop only.)

How the tests are bound to the loop (see each test_cpython_*.py):

* Each test_cpython_<name>.py copies the TestCase classes of
  test.test_asyncio.test_<name> into its namespace (_harness.bind), so pytest
  collects them here: node ids look like
  tests/conformance/test_cpython_tasks.py::SleepTests::test_sleep_zero.
* An autouse fixture installs the loop's event loop policy before every test
  (CPython's tests reset the policy in tearDown/tearDownModule), and resets it
  after.  Everything that asks the policy gets our loop: asyncio.new_event_loop(),
  asyncio.run(), asyncio.Runner, unittest.IsolatedAsyncioTestCase.
* asyncio.EventLoop (3.13+), which CPython's tests name from 3.14 where they
  want the default loop (a class's loop_factory, asyncio.run(loop_factory=...),
  asyncio.EventLoop()), makes our loop while a test runs; bind() gives a class
  whose loop_factory is asyncio.EventLoop one that makes our loop.
* test_events: EventLoopTestsMixin and SubprocessTestsMixin are bound to classes
  whose create_event_loop() returns our loop; test_runners: BaseTest.new_loop()
  is overridden to return our loop instead of a mocked asyncio.BaseEventLoop.
* test_utils.TestLoop, CPython's fake-clock loop, stays as it is where tests
  ask for it (self.new_test_loop()): those tests are about Task/Future with
  controlled time.  So do the other stand-in loops CPython's tests define
  on asyncio.BaseEventLoop without a selector (see _harness.LoopRecord).

Proof that the tests ran on our loop: every loop created during a test is
recorded (_harness.LoopRecord).  A test that created one of asyncio's own real
loops while the loop under test is not asyncio fails ("LoopBindingError"),
unless it is listed in ASYNCIO_LOOP_ON_PURPOSE below; a test of a class whose
setUp must create our loop (IsolatedAsyncioTestCase, the test_events bindings)
fails if it did not.  The terminal summary counts the tests by the loops they
ran on.

Expected failures: xfail_registry.py maps test ids to reasons; they are marked
xfail(strict=True), so an unexpected pass fails too.  On the Pythons CI runs
the suite on (EXACT_VERSIONS: 3.10 to 3.15) a registry entry that matches no
test fails a full run.

Time: the whole suite (1,600 tests on 3.11, 2,000 on 3.14) takes a few
minutes on 2 cores, on either loop; the heap is gc.freeze()d while it runs
(see _freeze_heap).
Every test has a 60 s limit (pytest-timeout, signal method: the test fails
and the run goes on); a test still running 60 s after that -- a hang the
signal could not break, e.g. in C -- makes faulthandler dump every thread's
traceback and exit the process (then record it in the registry as NotRun, and
report it as a loop bug).  MINLOOP_CONFORMANCE_TIMEOUT changes the limit.

Other Python versions: each runs its own test.test_asyncio (a module it lacks
is skipped); a registry entry may depend on the running asyncio (never on
a version list).  The registry must be exact on every Python CI runs this
suite on.
"""

import asyncio
import faulthandler
import fnmatch
import gc
import os
import sys
import unittest
from pathlib import Path

import pytest

from . import _harness
from . import xfail_registry

HERE = Path(__file__).parent
TIMEOUT = float(os.environ.get("MINLOOP_CONFORMANCE_TIMEOUT", "60"))
# The Pythons whose registry must be exact: those CI runs the suite on.
EXACT_VERSIONS = ((3, 10), (3, 11), (3, 12), (3, 13), (3, 14), (3, 15))
_EXACT = tuple(sys.version_info[:2]) in EXACT_VERSIONS

# Tests that build one of asyncio's own loops on purpose, while also running
# on ours: they test asyncio's policy machinery, so the asyncio loop is part of
# the test, not a sign that the binding failed.
ASYNCIO_LOOP_ON_PURPOSE = {
    "test_events::Test*GetEventLoop::test_get_event_loop_returns_running_loop":
        "its Policy subclasses asyncio.DefaultEventLoopPolicy",
    "test_events::Test*GetEventLoop::test_get_event_loop_returns_running_loop2":
        "installs asyncio.DefaultEventLoopPolicy",
    "test_runners::RunTests::test_loop_factory_default_event_loop":
        "asserts that asyncio.run(loop_factory=asyncio.EventLoop) runs asyncio's loop",
}


def _is_ours(item):
    """Whether a test is one of this directory's (the hooks see every test)."""
    return Path(str(item.path)).parent == HERE


def registry_key(item):
    """The registry key of a test: "<cpython module>::<class>::<test>"."""
    module = getattr(item.module, "CPYTHON_MODULE", item.module.__name__)
    cls = item.cls.__name__ if item.cls is not None else ""
    return f"{module}::{cls}::{item.name}"


def _matching(key, patterns):
    return [p for p in patterns if fnmatch.fnmatchcase(key, p)]


# --- configuration ---------------------------------------------------------

def pytest_configure(config):
    _harness.install_recorder()
    config.stash[_state_key] = _State()


def pytest_unconfigure(config):
    _harness.uninstall_recorder()
    _freeze_heap(False)


class _State:
    def __init__(self):
        self.registry = {}
        self.matched = set()        # registry patterns that matched a test
        self.deselected = False
        self.modules = set()        # conformance test modules collected
        self.by_kind = {}           # "tested"/"fake"/... -> number of tests
        self.class_names = {}       # kind -> names of the loop classes seen
        self.on_purpose = []        # keys that ran asyncio's loop on purpose


_state_key = pytest.StashKey()


def pytest_deselected(items):
    if items and any(_is_ours(i) for i in items):
        items[0].config.stash[_state_key].deselected = True


def pytest_collection_modifyitems(config, items):
    state = config.stash[_state_key]
    if _harness.LOOP_NAME == "minloop":
        state.registry = xfail_registry.entries()
    for item in items:
        if not _is_ours(item):
            continue
        state.modules.add(Path(str(item.path)).name)
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(TIMEOUT))
        matched = _matching(registry_key(item), state.registry)
        if not matched:
            continue
        state.matched.update(matched)
        # The most specific pattern (the longest) gives the reason.
        reason = state.registry[max(matched, key=len)]
        if isinstance(reason, xfail_registry.NotRun):
            item.add_marker(pytest.mark.xfail(run=False, reason=reason))
        else:
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))


# --- every test ------------------------------------------------------------

@pytest.fixture(autouse=True)
def _loop_under_test_policy(request):
    """Install the loop under test's policy before each test, reset it after;
    while the test runs, asyncio.EventLoop makes the loop under test too
    (see _harness.ASYNCIO_EVENT_LOOP), except in a test that uses asyncio's
    own loop on purpose."""
    _harness.load()
    _harness.set_event_loop_policy(_harness.new_policy())
    on_purpose = _matching(registry_key(request.node), ASYNCIO_LOOP_ON_PURPOSE)
    if _harness.ASYNCIO_EVENT_LOOP is not None and not on_purpose:
        asyncio.EventLoop = _harness.new_event_loop
    try:
        yield
    finally:
        if _harness.ASYNCIO_EVENT_LOOP is not None:
            asyncio.EventLoop = _harness.ASYNCIO_EVENT_LOOP
        _harness.set_event_loop_policy(None)


def _needs_tested_loop(item):
    cls = item.cls
    return cls is not None and (
        issubclass(cls, unittest.IsolatedAsyncioTestCase)
        or cls in getattr(item.module, "LOOP_IN_EVERY_TEST", ()))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not _is_ours(item):
        return (yield)
    record = _harness.RECORD
    record.reset()
    state = item.config.stash[_state_key]
    try:
        result = yield
    finally:
        # Count each test once, by the most telling loop it created (a
        # failed one too, so that the summary's lines add up).
        kind = next((k for k in ("tested", "asyncio", "other", "fake")
                     if record.has(k)), "none")
        state.by_kind[kind] = state.by_kind.get(kind, 0) + 1
        state.class_names.setdefault(kind, set()).update(record.kinds.get(kind, ()))
    # A unittest failure or skip is kept on the item, and is reported in
    # preference to anything raised here: the check below only speaks for a
    # test that otherwise passed.
    if getattr(item, "_excinfo", None):
        return result
    key = registry_key(item)
    problems = []
    if _harness.LOOP_NAME != "asyncio" and record.has("asyncio"):
        if _matching(key, ASYNCIO_LOOP_ON_PURPOSE):
            state.on_purpose.append(key)
        else:
            problems.append(
                f"it created asyncio's own loop(s) "
                f"{sorted(record.kinds['asyncio'])} instead of "
                f"{_harness.LOOP_NAME}'s")
    if record.has("other"):
        problems.append(f"it created unknown loop(s) {sorted(record.kinds['other'])}")
    if _needs_tested_loop(item) and not record.has("tested"):
        problems.append(f"it never created a {_harness.LOOP_NAME} loop")
    if problems:
        pytest.fail(f"LoopBindingError: {key} did not run on the loop under "
                    f"test: " + "; ".join(problems), pytrace=False)
    return result


_heap_frozen = False


def _freeze_heap(freeze):
    """gc.freeze() the heap while this directory's tests run, only then.

    Some CPython tests call gc.collect() hundreds of times (test_task_del_collect:
    100 times, in each of 8 classes); a full collection walks every object,
    and pytest's collected items make the heap large.  Freezing what exists
    before the first conformance test (the collected tests, the imported
    modules) takes it out of every later collection: 10 s -> 0.02 s for such
    a test, a third of the suite's time.  Objects the tests create are not
    frozen, so they are collected as before.  The heap is unfrozen before any
    other directory's test, whose gc.get_objects()/get_referrers() must see
    everything.
    """
    global _heap_frozen
    if freeze and not _heap_frozen:
        gc.collect()
        gc.freeze()
    elif not freeze and _heap_frozen:
        gc.unfreeze()
    _heap_frozen = freeze


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Freeze the heap (see _freeze_heap); the last resort against a hang
    that the timeout signal cannot break."""
    # pytest calls this hook for every test of the session.
    _freeze_heap(_is_ours(item))
    if not _is_ours(item):
        return (yield)
    try:
        from _pytest.faulthandler import fault_handler_stderr_fd_key
        stderr = item.config.stash[fault_handler_stderr_fd_key]
    except (ImportError, KeyError):
        stderr = sys.__stderr__
    faulthandler.dump_traceback_later(TIMEOUT + 60, exit=True, file=stderr)
    try:
        return (yield)
    finally:
        faulthandler.cancel_dump_traceback_later()
        if nextitem is None:
            _freeze_heap(False)


# --- reporting -------------------------------------------------------------

def _expected_modules():
    return {p.name for p in HERE.glob("test_cpython_*.py")}


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = config.stash[_state_key]
    if not state.modules:
        return
    tr = terminalreporter
    tr.section("conformance")
    tr.line(f"loop under test: {_harness.LOOP_NAME} "
            f"({_harness.LOOP_CLASS!r}), Python {sys.version.split()[0]}")
    # Each test is counted once, under the first of these it fits, so the
    # lines add up to the tests run.
    names = {"tested": f"created a loop under test ({_harness.LOOP_NAME})",
             "asyncio": "created one of asyncio's own real loops",
             "other": "created an unknown loop",
             "fake": "created only stand-in loops of CPython's tests",
             "none": "created no loop"}
    tr.line("tests run, each counted once, by the loops it created:")
    for kind in names:
        if kind in state.by_kind:
            classes = ", ".join(sorted({name.rpartition(".")[2] for name
                                        in state.class_names.get(kind, ())}))
            tr.line(f"  {state.by_kind[kind]:5d} {names[kind]}"
                    + (f": {classes}" if classes else ""))
    tr.line(f"  {sum(state.by_kind.values()):5d} in all")
    for key in state.on_purpose:
        tr.line(f"  asyncio's loop on purpose: {key}")
    stale = _stale_entries(config)
    if stale:
        exact = _EXACT
        tr.line(f"xfail registry entries that match no test"
                f"{' (this fails the run)' if exact else ''}:",
                red=exact, yellow=not exact)
        for key in stale:
            tr.line(f"  {key}")


def _stale_entries(config):
    """Registry entries that matched no collected test, on a full run only."""
    state = config.stash[_state_key]
    full_run = (not state.deselected
                and not config.option.keyword and not config.option.markexpr
                and state.modules >= _expected_modules())
    if not full_run:
        return []
    return sorted(set(state.registry) - state.matched)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    if (exitstatus == 0 and _EXACT
            and _stale_entries(session.config)):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
