"""Async generator hooks and shutdown_asyncgens."""

import asyncio
import gc
import sys
import warnings

import pytest


def test_shutdown_asyncgens_finalizes_suspended_generator(loop):
    """shutdown_asyncgens() closes a suspended async generator: its finally runs."""
    log = []

    async def agen():
        try:
            yield 1
            yield 2
        finally:
            log.append("finally")

    async def main():
        g = agen()
        assert await g.__anext__() == 1
        return g

    g = loop.run_until_complete(main())
    assert log == []
    loop.run_until_complete(loop.shutdown_asyncgens())
    assert log == ["finally"]
    del g


def test_shutdown_asyncgens_finally_can_await(loop):
    """The generator's finally block may itself await on the loop during shutdown."""
    log = []

    async def agen():
        try:
            yield 1
        finally:
            await asyncio.sleep(0.001)
            log.append("awaited in finally")

    async def main():
        g = agen()
        await g.__anext__()
        return g

    g = loop.run_until_complete(main())
    loop.run_until_complete(loop.shutdown_asyncgens())
    assert log == ["awaited in finally"]
    del g


def test_shutdown_asyncgens_with_none_alive(loop):
    """shutdown_asyncgens() with no generators completes and returns None."""
    assert loop.run_until_complete(loop.shutdown_asyncgens()) is None


def test_shutdown_asyncgens_error_reported(loop):
    """An error while closing a generator is reported with 'asyncgen' in the context."""
    contexts = []
    loop.set_exception_handler(lambda lp, ctx: contexts.append(ctx))

    async def agen():
        try:
            yield 1
        finally:
            raise ValueError("close failed")

    async def main():
        g = agen()
        await g.__anext__()
        return g

    g = loop.run_until_complete(main())
    loop.run_until_complete(loop.shutdown_asyncgens())
    assert len(contexts) == 1
    ctx = contexts[0]
    assert ctx["asyncgen"] is g
    assert isinstance(ctx["exception"], ValueError)
    assert ctx["message"] == ("an error occurred during closing of asynchronous "
                              f"generator {g!r}")


def test_hooks_installed_while_running_and_restored(loop):
    """run_forever installs the loop's asyncgen hooks and restores the previous ones."""
    def firstiter(agen):
        pass

    def finalizer(agen):
        pass

    old = sys.get_asyncgen_hooks()
    sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=finalizer)
    try:
        inside = []
        loop.call_soon(lambda: inside.append(sys.get_asyncgen_hooks()))
        loop.call_soon(loop.stop)
        loop.run_forever()
        hooks = inside[0]
        assert hooks.firstiter is not None and hooks.finalizer is not None
        assert hooks.firstiter is not firstiter
        assert hooks.finalizer is not finalizer
        after = sys.get_asyncgen_hooks()
        assert after.firstiter is firstiter
        assert after.finalizer is finalizer
    finally:
        sys.set_asyncgen_hooks(*old)


def test_hooks_restored_after_exception(loop):
    """The previous asyncgen hooks come back even when run_forever exits by exception."""
    old = sys.get_asyncgen_hooks()

    def firstiter(agen):
        pass

    sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=None)
    try:
        def bad():
            raise KeyboardInterrupt

        loop.call_soon(bad)
        with pytest.raises(KeyboardInterrupt):
            loop.run_forever()
        assert sys.get_asyncgen_hooks().firstiter is firstiter
    finally:
        sys.set_asyncgen_hooks(*old)


def test_finalizer_hook_closes_dropped_generator(loop):
    """A suspended generator dropped while the loop runs is closed via aclose() on the loop."""
    log = []

    async def agen():
        try:
            yield 1
            yield 2
        finally:
            log.append("finally")

    async def main():
        g = agen()
        await g.__anext__()
        del g
        gc.collect()
        for _ in range(5):
            await asyncio.sleep(0)
        return list(log)

    assert loop.run_until_complete(main()) == ["finally"]


def test_generator_iterated_on_loop_is_tracked(loop):
    """An async generator started on the loop is finalized by shutdown_asyncgens, not before."""
    log = []

    async def agen():
        try:
            for i in range(10):
                yield i
        finally:
            log.append("closed")

    holder = []

    async def main():
        g = agen()
        holder.append(g)
        async for i in g:
            if i == 3:
                break

    loop.run_until_complete(main())
    # 'break' in async for does not close the generator by itself.
    assert log == []
    loop.run_until_complete(loop.shutdown_asyncgens())
    assert log == ["closed"]


def test_firstiter_after_shutdown_warns(loop):
    """Starting a new generator after shutdown_asyncgens() emits a ResourceWarning."""
    loop.run_until_complete(loop.shutdown_asyncgens())

    async def agen():
        yield 1

    async def main():
        g = agen()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            await g.__anext__()
        await g.aclose()
        return caught

    caught = loop.run_until_complete(main())
    msgs = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert len(msgs) == 1
    assert "was scheduled after loop.shutdown_asyncgens() call" in msgs[0]


def test_asyncio_run_style_shutdown(loop):
    """The asyncio.run() shutdown sequence works: cancel tasks, shutdown_asyncgens, executor."""
    log = []

    async def agen():
        try:
            while True:
                yield
        finally:
            log.append("agen closed")

    async def forever():
        try:
            await asyncio.sleep(30)
        finally:
            log.append("task cancelled")

    async def main():
        asyncio.get_running_loop().create_task(forever())
        g = agen()
        await g.__anext__()
        await loop.run_in_executor(None, lambda: None)
        return g

    g = loop.run_until_complete(main())
    pending = asyncio.all_tasks(loop)
    for t in pending:
        t.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())
    assert log == ["task cancelled", "agen closed"]
    del g
