"""minloop's public API (minloop only): run(), Runner/asyncio.run integration, install(), policy."""

import asyncio
import os
import subprocess
import sys
import warnings

import pytest


@pytest.fixture
def minloop(minloop_module):
    """The minloop module (skips if it is not importable at all)."""
    return minloop_module


@pytest.fixture
def restore_policy():
    """Put asyncio's event loop policy (and the thread's loop) back after the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = asyncio.get_event_loop_policy()
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_event_loop_policy(old)
        asyncio.set_event_loop(None)


def test_new_event_loop_is_abstract_event_loop(minloop):
    """minloop.new_event_loop() returns a minloop.Loop, an asyncio.AbstractEventLoop."""
    lp = minloop.new_event_loop()
    try:
        assert isinstance(lp, minloop.Loop)
        assert isinstance(lp, asyncio.AbstractEventLoop)
        assert issubclass(minloop.Loop, asyncio.AbstractEventLoop)
    finally:
        lp.close()


def test_every_public_abstract_event_loop_method_is_implemented(minloop):
    """No public AbstractEventLoop method is left to asyncio's abstract one.

    asyncio.AbstractEventLoop's methods all raise NotImplementedError; each
    must be replaced by a working one on minloop.Loop (Windows-only methods
    aside: minloop does not run there).
    """
    windows_only = {"create_pipe_connection", "start_serving_pipe"}
    abstract = asyncio.AbstractEventLoop
    missing = [name for name, value in vars(abstract).items()
               if callable(value) and not name.startswith("_")
               and name not in windows_only
               and getattr(minloop.Loop, name) is value]
    assert missing == []


def test_new_event_loop_returns_distinct_loops(minloop):
    """Each new_event_loop() call makes a new loop."""
    a = minloop.new_event_loop()
    b = minloop.new_event_loop()
    try:
        assert a is not b
    finally:
        a.close()
        b.close()


def test_run_returns_result_on_minloop(minloop):
    """minloop.run(main()) returns main's result; the running loop is a minloop.Loop."""
    async def main():
        await asyncio.sleep(0.001)
        return type(asyncio.get_running_loop())

    cls = minloop.run(main())
    assert issubclass(cls, minloop.Loop)
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()


def test_run_propagates_exception(minloop):
    """minloop.run re-raises main's exception."""
    async def main():
        raise LookupError("from main")

    with pytest.raises(LookupError, match="from main"):
        minloop.run(main())


def test_run_debug_flag(minloop):
    """minloop.run(main, debug=True) runs the loop in debug mode."""
    async def main():
        return asyncio.get_running_loop().get_debug()

    assert minloop.run(main(), debug=True) is True
    assert minloop.run(main(), debug=False) is False


def test_run_cleans_up_tasks_and_asyncgens(minloop):
    """minloop.run cancels leftover tasks and finalizes async generators, as asyncio.run does."""
    log = []

    async def agen():
        try:
            yield 1
            yield 2
        finally:
            log.append("agen finalized")

    async def leftover():
        try:
            await asyncio.sleep(30)
        finally:
            log.append("task cancelled")

    holder = []

    async def main():
        asyncio.create_task(leftover())
        g = agen()
        holder.append(g)
        await g.__anext__()
        await asyncio.sleep(0)
        return "done"

    assert minloop.run(main()) == "done"
    assert sorted(log) == ["agen finalized", "task cancelled"]


def test_run_rejects_non_coroutine(minloop):
    """minloop.run(non-coroutine) fails as asyncio.run() does on the running
    Python (ValueError up to 3.13; 3.14 takes any awaitable, TypeError)."""
    with pytest.raises(Exception) as want:
        asyncio.run(1)
    with pytest.raises(want.type) as got:
        minloop.run(1)
    assert str(got.value) == str(want.value)


@pytest.mark.skipif(not hasattr(asyncio, "Runner"), reason="asyncio.run() of 3.10 wants a coroutine")
def test_run_takes_what_asyncio_run_takes(minloop):
    """An awaitable that is not a coroutine: run as asyncio.run() does
    (3.14 wraps it, earlier Runners refuse it)."""
    async def answer():
        return 42

    class Awaitable:
        def __await__(self):
            return answer().__await__()

    awaitable = Awaitable()   # one object: its repr is in the message

    def outcome(run):
        try:
            return run(awaitable)
        except Exception as exc:
            return type(exc), str(exc)

    assert outcome(minloop.run) == outcome(asyncio.run)


def test_run_inside_running_loop_raises(minloop):
    """minloop.run from inside a running loop -> RuntimeError."""
    async def inner():
        pass

    async def main():
        coro = inner()
        try:
            minloop.run(coro)
        except RuntimeError as exc:
            return str(exc)
        finally:
            coro.close()

    # asyncio.Runner.run() names itself the same way.
    assert minloop.run(main()) == "minloop.run() cannot be called from a running event loop"


def test_run_releases_fds(minloop, open_fds, assert_no_fd_leak):
    """minloop.run leaves no fd behind."""
    before = open_fds()

    async def main():
        await asyncio.get_running_loop().run_in_executor(None, lambda: None)

    minloop.run(main())
    assert_no_fd_leak(before, "minloop.run")


@pytest.mark.skipif(sys.version_info < (3, 12),
                    reason="asyncio.run(loop_factory=) is new in Python 3.12")
def test_asyncio_run_with_loop_factory(minloop):
    """asyncio.run(main(), loop_factory=minloop.new_event_loop) runs on minloop."""
    async def main():
        return type(asyncio.get_running_loop())

    assert issubclass(asyncio.run(main(), loop_factory=minloop.new_event_loop), minloop.Loop)


@pytest.mark.skipif(not hasattr(asyncio, "Runner"), reason="asyncio.Runner is new in 3.11")
def test_asyncio_runner_with_loop_factory(minloop):
    """asyncio.Runner(loop_factory=minloop.new_event_loop) runs several coroutines on one minloop loop."""
    async def which():
        return asyncio.get_running_loop()

    with asyncio.Runner(loop_factory=minloop.new_event_loop) as runner:
        a = runner.run(which())
        b = runner.run(which())
        assert isinstance(a, minloop.Loop)
        assert a is b is runner.get_loop()
    assert a.is_closed()


def test_install_sets_policy(minloop, restore_policy):
    """minloop.install() makes asyncio.new_event_loop() return a minloop loop."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        minloop.install()
        assert isinstance(asyncio.get_event_loop_policy(), minloop.EventLoopPolicy)
    lp = asyncio.new_event_loop()
    try:
        assert isinstance(lp, minloop.Loop)
    finally:
        lp.close()


def test_install_then_asyncio_run(minloop, restore_policy):
    """After minloop.install(), plain asyncio.run() runs on minloop."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        minloop.install()

    async def main():
        return type(asyncio.get_running_loop())

    assert issubclass(asyncio.run(main()), minloop.Loop)


def test_event_loop_policy(minloop, restore_policy):
    """minloop.EventLoopPolicy is an asyncio policy whose new_event_loop makes minloop loops."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        policy = minloop.EventLoopPolicy()
        assert isinstance(policy, asyncio.AbstractEventLoopPolicy)
        lp = policy.new_event_loop()
    try:
        assert isinstance(lp, minloop.Loop)
    finally:
        lp.close()


def test_import_emits_no_deprecation_warning(minloop):
    """`python -W error::DeprecationWarning -c 'import minloop'` succeeds."""
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(minloop.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c",
         "import minloop; minloop.new_event_loop().close()"],
        env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_public_names(minloop):
    """The documented public names exist."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # the policy API, 3.14+
        for name in ("Loop", "new_event_loop", "run", "install", "EventLoopPolicy"):
            assert hasattr(minloop, name), name


# --- the policy deprecation (Python 3.14, gh-127949): minloop warns where
# asyncio does, for the same use, at the caller's line; and no more.

def deprecations(action):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = action()
    return [w for w in caught if issubclass(w.category, DeprecationWarning)], result


def test_run_warns_as_asyncio_run_does(minloop):
    """None on any Python so far: asyncio.run() uses no deprecated API."""
    async def main():
        return 1

    assert [str(w.message) for w in deprecations(lambda: minloop.run(main()))[0]] == \
        [str(w.message) for w in deprecations(lambda: asyncio.run(main()))[0]] == []


def test_install_warns_as_set_event_loop_policy_does(minloop, restore_policy):
    asyncio_warns = deprecations(lambda: asyncio.set_event_loop_policy(None))[0]
    caught, _ = deprecations(lambda: minloop.install())
    assert len(caught) == len(asyncio_warns) <= 1
    if caught:
        assert str(caught[0].message) == \
            "'minloop.install' is deprecated and slated for removal in Python 3.16"
        assert caught[0].filename == __file__    # the caller's line
    assert isinstance(deprecations(asyncio.events.get_event_loop_policy)[1],
                      minloop.policy.EventLoopPolicy)


def test_event_loop_policy_warns_as_asyncios_policy_class_does(minloop):
    asyncio_warns = deprecations(lambda: asyncio.DefaultEventLoopPolicy)[0]
    caught, cls = deprecations(lambda: minloop.EventLoopPolicy)
    assert len(caught) == len(asyncio_warns) <= 1
    if caught:
        assert str(caught[0].message) == \
            "'minloop.EventLoopPolicy' is deprecated and slated for removal in Python 3.16"
        assert caught[0].filename == __file__
    assert cls is minloop.policy.EventLoopPolicy
    # A star import touches no deprecated name, as asyncio's does not.
    names = [n for n in minloop.__all__ if n in ("EventLoopPolicy", "install")]
    asyncio_has_it = "DefaultEventLoopPolicy" in asyncio.__all__
    assert names == (["install", "EventLoopPolicy"] if asyncio_has_it else ["install"])
    assert deprecations(lambda: exec("from minloop import *", {}))[0] == []


def test_the_launcher_uses_no_deprecated_api(minloop, tmp_path):
    """python -m minloop run installs minloop's policy the way asyncio.run()
    makes its loop: without a DeprecationWarning (an error here)."""
    (tmp_path / "prog.py").write_text(
        "import asyncio\nasync def main():\n    print(type(asyncio.get_running_loop()).__module__)\n"
        "asyncio.run(main())\n")
    proc = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-m", "minloop",
                           "run", "prog.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("minloop")
