"""Each callback scheduled without context= runs in its own copy of the
context that was current when it was scheduled (asyncio's Handle semantics).

minloop shares one snapshot between handles scheduled from an unchanged
context and gives each handle its private copy when it runs or when its
context is asked for; these tests hold it to asyncio's behaviour."""

import contextvars
import threading

import pytest

import sys


@pytest.fixture
def var():
    """A fresh variable per test: values set in one test stay in pytest's
    context, so a shared variable would carry them into the next."""
    return contextvars.ContextVar('var', default='unset')


@pytest.fixture
def get_context_supported(loop_kind):
    if loop_kind == 'asyncio' and sys.version_info < (3, 12):
        pytest.skip('asyncio.Handle.get_context() is new in Python 3.12')


def run_batch(loop):
    loop.call_soon(loop.stop)
    loop.run_forever()


def test_callback_sees_values_from_schedule_time(loop, var):
    seen = []
    var.set('a')
    loop.call_soon(lambda: seen.append(var.get()))
    var.set('b')
    loop.call_soon(lambda: seen.append(var.get()))
    loop.call_later(0, lambda: seen.append(var.get()))
    var.set('c')
    loop.run_until_complete(_sleep(0.001))
    assert seen == ['a', 'b', 'b']


def test_a_callbacks_set_does_not_leak_to_its_siblings(loop, var):
    """Handles scheduled back to back from one context: each has its own."""
    seen = []

    def setter(value):
        seen.append(var.get())
        var.set(value)
        seen.append(var.get())

    var.set('base')
    for value in ('x', 'y', 'z'):
        loop.call_soon(setter, value)
    loop.call_later(0, setter, 't')
    run_batch(loop)
    loop.run_until_complete(_sleep(0.001))
    assert seen == ['base', 'x', 'base', 'y', 'base', 'z', 'base', 't']
    assert var.get() == 'base'


def test_get_context_is_the_context_the_callback_runs_in(loop, var, get_context_supported):
    seen = []
    var.set('outer')
    h1 = loop.call_soon(lambda: seen.append(('h1', var.get())))
    h2 = loop.call_soon(lambda: seen.append(('h2', var.get())))
    ctx = h1.get_context()
    assert isinstance(ctx, contextvars.Context)
    assert ctx[var] == 'outer'
    assert h1.get_context() is ctx            # stable
    ctx.run(var.set, 'changed-for-h1')        # only h1 runs in ctx
    run_batch(loop)
    assert seen == [('h1', 'changed-for-h1'), ('h2', 'outer')]
    assert h2.get_context() is not ctx


def test_get_context_after_run_shows_the_callbacks_changes(loop, var, get_context_supported):
    var.set('before')
    h = loop.call_soon(var.set, 'set-by-callback')
    run_batch(loop)
    assert h.get_context()[var] == 'set-by-callback'
    assert var.get() == 'before'


def test_threads_schedule_with_their_own_contexts(loop, var):
    seen = []
    var.set('loop-thread')

    def other_thread():
        var.set('worker')
        loop.call_soon_threadsafe(lambda: seen.append(var.get()))
        loop.call_soon_threadsafe(loop.stop)

    loop.call_soon(lambda: seen.append(var.get()))
    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    loop.run_forever()
    assert seen == ['loop-thread', 'worker']


def test_context_reset_between_calls_is_seen(loop, var):
    seen = []
    token = var.set('one')
    loop.call_soon(lambda: seen.append(var.get()))
    var.reset(token)
    loop.call_soon(lambda: seen.append(var.get()))
    run_batch(loop)
    assert seen == ['one', 'unset']


def test_scheduling_from_inside_another_context(loop, var):
    seen = []
    ctx = contextvars.copy_context()
    ctx.run(var.set, 'inside')
    var.set('outside')
    ctx.run(loop.call_soon, lambda: seen.append(var.get()))
    loop.call_soon(lambda: seen.append(var.get()))
    ctx.run(loop.call_soon, lambda: seen.append(var.get()))
    run_batch(loop)
    assert seen == ['inside', 'outside', 'inside']


async def _sleep(d):
    import asyncio
    await asyncio.sleep(d)


def test_context_values_are_not_kept_alive_after_their_callbacks(loop, var):
    """A value held only by a context variable dies with the handles that
    captured it (no cache may keep it), as with asyncio's per-handle copies."""
    import gc
    import weakref

    class Request:
        pass

    def schedule():
        request = Request()
        var.set(request)
        loop.call_soon(lambda: None)
        loop.call_later(0, lambda: None)
        # Everything is scheduled from this one context, the stop included,
        # so nothing scheduled later could displace a cached copy.
        loop.call_later(0.002, loop.stop)
        return weakref.ref(request)

    ref = contextvars.copy_context().run(schedule)
    loop.run_forever()
    gc.collect()
    assert ref() is None


def test_a_callback_that_sets_nothing_keeps_the_values_of_its_scheduling(
        loop, var, get_context_supported):
    """minloop gives a run's private copy back to the shared snapshot when the
    callback set nothing; the handle's context still shows the same values,
    stays stable, and a later change through it reaches no other handle."""
    var.set('scheduled')
    kept = loop.call_soon(lambda: None)
    other = loop.call_soon(lambda: None)
    run_batch(loop)
    var.set('later')
    ctx = kept.get_context()
    assert ctx[var] == 'scheduled'
    assert kept.get_context() is ctx
    ctx.run(var.set, 'through-kept')
    assert other.get_context()[var] == 'scheduled'
    assert kept.get_context()[var] == 'through-kept'


def test_a_context_taken_during_the_run_is_the_one_kept(loop, var, get_context_supported):
    """The callback asks for its own handle's context while it runs: it is the
    context it runs in, and the handle keeps that very object afterwards."""
    var.set('scheduled')
    box = {}

    def callback():
        box['ctx'] = box['handle'].get_context()
        box['seen'] = box['ctx'][var]

    box['handle'] = loop.call_soon(callback)
    run_batch(loop)
    assert box['seen'] == 'scheduled'
    assert box['handle'].get_context() is box['ctx']


def test_a_chain_of_lone_callbacks_keeps_each_ones_values(loop, var, get_context_supported):
    """One callback per iteration, each setting the variable, scheduling the
    next, then setting it again: the only holder of its snapshot, so minloop
    runs it in that snapshot rather than a copy.  Each still sees the value
    current when it was scheduled, its later change stays in its own context,
    and nothing reaches its successor or the scheduling code."""
    seen = []
    handles = []

    def step(n):
        seen.append(var.get())
        var.set(f'scheduled-by-{n}')
        if n < 4:
            handles.append(loop.call_soon(step, n + 1))
        else:
            loop.call_soon(loop.stop)
        var.set(f'after-{n}')

    var.set('start')
    handles.append(loop.call_soon(step, 0))
    loop.run_forever()
    assert seen == ['start'] + [f'scheduled-by-{n}' for n in range(4)]
    assert [h.get_context()[var] for h in handles] == [f'after-{n}' for n in range(5)]
    assert len({id(h.get_context()) for h in handles}) == 5
    assert var.get() == 'start'


def test_a_context_weakly_referenced_during_its_run_is_no_other_handles(
        loop, var, get_context_supported):
    """Handles from one context each run in a context of their own.  minloop
    hands a run's unchanged copy on to the next handle of the same snapshot;
    one that somebody took a weak reference to must not be handed on, or the
    reference would find another handle's context."""
    import weakref

    var.set('shared')
    refs, contexts = [], []
    first = loop.call_soon(lambda: refs.append(weakref.ref(first.get_context())))
    second = loop.call_soon(lambda: contexts.append(second.get_context()))
    run_batch(loop)
    assert contexts[0][var] == 'shared'
    assert refs[0]() is not contexts[0]
    assert first.get_context() is not second.get_context()


def _chain_in_a_context_without_variables(loop, var, steps, handles=None):
    """Runs `steps` callbacks, one per iteration, from a context nobody set
    a variable in; even steps set the variable after scheduling the next.
    Returns what each saw."""
    seen = []

    def step(n):
        seen.append(var.get())
        if n + 1 < steps:
            handle = loop.call_soon(step, n + 1)
            if handles is not None:
                handles.append(handle)
        else:
            loop.call_soon(loop.stop)
        if n % 2 == 0:
            var.set(f'after-{n}')

    def start():
        first = loop.call_soon(step, 0)
        if handles is not None:
            handles.append(first)

    contextvars.Context().run(start)
    loop.run_forever()
    return seen


@pytest.mark.parametrize('keep_handles', [False, True])
def test_a_chain_from_a_context_without_variables_keeps_each_ones_values(
        loop, var, keep_handles, request):
    """minloop keeps the snapshot of a context without variables (and a
    copy a run left so) from one iteration to the next: nothing in them to
    keep alive.  A callback that then sets a variable must still do so in a
    context of its own, unseen by the callbacks after it."""
    if keep_handles:
        request.getfixturevalue('get_context_supported')
    handles = [] if keep_handles else None
    seen = _chain_in_a_context_without_variables(loop, var, 8, handles)
    assert seen == ['unset'] * 8
    if keep_handles:
        values = [h.get_context().get(var, 'none') for h in handles]
        assert values == [f'after-{n}' if n % 2 == 0 else 'none' for n in range(8)]
        assert len({id(h.get_context()) for h in handles}) == 8
    assert var.get() == 'unset'


def test_chains_from_contexts_without_variables_in_two_threads(loop_factory, var):
    """Two loops in two threads, each a chain from a context without
    variables: what minloop keeps between iterations is process-wide, and
    one thread's callback must never run in, or see, another's context."""
    results = {}

    def run(name):
        lp = loop_factory()
        try:
            results[name] = _chain_in_a_context_without_variables(lp, var, 2000)
        finally:
            lp.close()

    threads = [threading.Thread(target=run, args=(name,)) for name in 'ab']
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {'a': ['unset'] * 2000, 'b': ['unset'] * 2000}
