"""The objects call_soon/call_later/call_at return, as programs use them:
weak references, identity, lifetime.  Every test runs on asyncio's loop too."""

import asyncio
import gc
import weakref

import pytest


def run_one_iteration(loop):
    loop.call_soon(loop.stop)
    loop.run_forever()


@pytest.mark.parametrize('schedule', ['call_soon', 'call_later', 'call_at'])
def test_handles_take_weak_references(loop, schedule):
    if schedule == 'call_soon':
        handle = loop.call_soon(int)
    elif schedule == 'call_later':
        handle = loop.call_later(0, int)
    else:
        handle = loop.call_at(loop.time(), int)
    ref = weakref.ref(handle)
    assert ref() is handle
    proxy = weakref.proxy(handle)
    assert proxy.cancelled() is False
    run_one_iteration(loop)
    assert ref() is handle              # still held here
    del handle
    gc.collect()                        # asyncio's loop may hold it in a cycle
    run_one_iteration(loop)             # minloop lets go one iteration late
    assert ref() is None
    with pytest.raises(ReferenceError):
        proxy.cancelled()


def test_weak_reference_callbacks_run_when_a_handle_dies(loop):
    died = []
    handle = loop.call_later(0, int)
    ref = weakref.ref(handle, lambda r: died.append(r))
    run_one_iteration(loop)
    del handle
    gc.collect()
    run_one_iteration(loop)
    assert died == [ref]


def test_handles_live_in_weak_collections(loop):
    """Libraries keep their timers in WeakSets / WeakKeyDictionaries."""
    timers = weakref.WeakSet()
    owners = weakref.WeakKeyDictionary()
    handles = [loop.call_later(0, int, i) for i in range(5)]   # unequal
    for i, h in enumerate(handles):
        timers.add(h)
        owners[h] = i
    assert len(timers) == 5 and sorted(owners.values()) == [0, 1, 2, 3, 4]
    run_one_iteration(loop)
    assert len(timers) == 5
    del handles, h
    gc.collect()
    run_one_iteration(loop)
    assert len(timers) == 0 and len(owners) == 0


# ----------------------------------------------------------------------
# The handles' types: asyncio's classes, as programs check them


def make(loop, schedule):
    if schedule == 'call_soon':
        return loop.call_soon(int)
    if schedule == 'call_later':
        return loop.call_later(0, int)
    return loop.call_at(loop.time() + 3600, int)


def test_call_soon_returns_an_asyncio_handle(loop):
    handle = loop.call_soon(int)
    assert isinstance(handle, asyncio.Handle)
    assert not isinstance(handle, asyncio.TimerHandle)
    assert asyncio.Handle in type(handle).__mro__
    assert issubclass(type(handle), asyncio.Handle)
    assert not issubclass(type(handle), asyncio.TimerHandle)


@pytest.mark.parametrize('schedule', ['call_later', 'call_at'])
def test_timed_calls_return_asyncio_timer_handles(loop, schedule):
    timer = make(loop, schedule)
    assert isinstance(timer, asyncio.TimerHandle)
    assert isinstance(timer, asyncio.Handle)
    assert asyncio.TimerHandle in type(timer).__mro__
    assert issubclass(type(timer), asyncio.TimerHandle)


@pytest.mark.main_interpreter("signals")
def test_signal_handlers_handles_are_asyncio_handles(loop):
    import signal
    loop.add_signal_handler(signal.SIGUSR1, int)
    try:
        handle = loop._signal_handlers[signal.SIGUSR1]
        assert isinstance(handle, asyncio.Handle)
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)


def test_reader_handles_are_asyncio_handles(loop):
    import socket
    a, b = socket.socketpair()
    try:
        handle = loop.add_reader(a.fileno(), int)
        if handle is not None:          # asyncio's add_reader returns None
            assert isinstance(handle, asyncio.Handle)
            assert not isinstance(handle, asyncio.TimerHandle)
        loop.remove_reader(a.fileno())
    finally:
        a.close()
        b.close()


def test_timer_state_reads_as_asyncio_s(loop):
    timer = loop.call_later(3600, int)
    assert timer._scheduled is True
    assert timer._when == timer.when()
    assert timer._cancelled is False and timer.cancelled() is False
    assert timer._callback is int and timer._args == ()
    assert timer._source_traceback is None and timer._repr is None
    timer.cancel()
    assert timer._cancelled is True
    assert timer._callback is None and timer._args is None
    run_one_iteration(loop)
    assert timer._scheduled is False


def test_loop_timer_handle_cancelled_accepts_its_timers(loop):
    """asyncio's hook, called as asyncio.TimerHandle.cancel() calls it."""
    timer = loop.call_later(3600, int)
    loop._timer_handle_cancelled(timer)
    timer.cancel()
    run_one_iteration(loop)
    assert timer.cancelled()


@pytest.mark.parametrize('schedule', ['call_soon', 'call_later'])
def test_repr_is_asyncio_s_format(loop, schedule):
    handle = make(loop, schedule)
    name = type(handle).__name__
    assert name == ('Handle' if schedule == 'call_soon' else 'TimerHandle')
    text = repr(handle)
    assert text.startswith(f'<{name} ') and 'int()' in text
    handle.cancel()
    assert repr(handle).startswith(f'<{name} cancelled')


def test_timers_compare_and_hash_as_asyncio_s(loop):
    t0 = loop.call_at(100.0, int)
    t1 = loop.call_at(200.0, int)
    same = loop.call_at(100.0, int)
    assert t0 < t1 and t1 > t0 and t0 <= same and t0 >= same
    assert t0 == same and hash(t0) == hash(same) and t0 != t1
    assert (t0 == loop.call_soon(int)) is False


# ----------------------------------------------------------------------
# asyncio's code, called explicitly on minloop's handles through asyncio's
# classes: it must not corrupt anything.  minloop's private attributes are
# read-only, so asyncio's assignments raise AttributeError before any
# change; reading goes through minloop's properties.


@pytest.fixture
def minloop_loop(minloop_module):
    lp = minloop_module.new_event_loop()
    yield lp
    lp.close()


@pytest.mark.parametrize('schedule', ['call_soon', 'call_later', 'call_at'])
def test_asyncio_s_methods_called_explicitly_are_safe(minloop_loop, schedule):
    loop = minloop_loop
    handle = make(loop, schedule)
    base = asyncio.TimerHandle if schedule != 'call_soon' else asyncio.Handle
    with pytest.raises(AttributeError):
        base.cancel(handle)
    assert not handle.cancelled()
    with pytest.raises(AttributeError):
        asyncio.Handle.__init__(handle, int, (), loop)
    assert handle._callback is int
    assert asyncio.Handle._repr_info(handle)[0] == type(handle).__name__
    assert 'int()' in asyncio.Handle.__repr__(handle)
    assert asyncio.Handle.cancelled(handle) is False
    asyncio.Handle._run(handle)          # runs int() in the handle's context
    if schedule != 'call_soon':
        assert asyncio.TimerHandle.when(handle) == handle.when()
        assert asyncio.TimerHandle.__eq__(handle, handle) is True
        assert asyncio.TimerHandle.__hash__(handle) == hash(handle)
    handle.cancel()
    run_one_iteration(loop)
    assert handle.cancelled()


def test_asyncio_s_slots_read_on_minloop_handles_are_objects(minloop_loop):
    """asyncio's own member descriptors read our storage: what is there is
    what asyncio would keep (objects), or nothing (AttributeError)."""
    loop = minloop_loop
    timer = loop.call_later(3600, int, 1)
    assert asyncio.Handle._callback.__get__(timer) is int
    # One or two arguments live in the handle itself until the tuple is
    # asked for (handles.pyx, "Arguments"); from then on asyncio's slot
    # holds it.  Before, asyncio's descriptor finds None there.
    assert asyncio.Handle._args.__get__(timer) is None
    assert timer._args == (1,)
    assert asyncio.Handle._args.__get__(timer) is timer._args
    many = loop.call_later(3600, int, 1, 2, 3)
    assert asyncio.Handle._args.__get__(many) == (1, 2, 3)
    many.cancel()
    assert asyncio.Handle._cancelled.__get__(timer) is False
    assert asyncio.Handle._loop.__get__(timer) is loop
    for name in ('_scheduled', '_when'):
        with pytest.raises(AttributeError):
            getattr(asyncio.TimerHandle, name).__get__(timer)
    timer.cancel()
    assert asyncio.Handle._cancelled.__get__(timer) is True


def test_handles_cannot_be_made_by_calling_the_class(minloop_module):
    from minloop.handles import Handle, TimerHandle
    for cls in (Handle, TimerHandle):
        with pytest.raises(TypeError):
            cls(int, (), None)


# ----------------------------------------------------------------------
# The free list both types share


def test_dead_handles_of_both_types_are_reused(minloop_loop):
    """A burst of handles and timers, run and dropped, then another: the
    second comes from the free list, so the collector's allocation count
    stays flat (an allocated handle would count)."""
    loop = minloop_loop

    def burst():
        for i in range(1000):
            loop.call_soon(int)
            loop.call_later(-1, int)
        run_one_iteration(loop)
        run_one_iteration(loop)     # the released ring lets go of them

    burst()
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        burst()
        assert gc.get_count()[0] - before < 50
    finally:
        gc.enable()


def test_a_reused_handle_has_no_weak_references_of_its_last_life(minloop_loop):
    loop = minloop_loop
    died = []
    handle = loop.call_soon(int)
    ref = weakref.ref(handle, died.append)
    run_one_iteration(loop)
    del handle
    run_one_iteration(loop)
    run_one_iteration(loop)
    assert ref() is None and died == [ref]
    fresh = [loop.call_soon(int) for _ in range(100)]
    assert all(weakref.getweakrefcount(h) == 0 for h in fresh)
    assert ref() is None
    run_one_iteration(loop)


def test_python_subclasses_of_the_handle_types_are_not_recycled(minloop_module):
    """A Python subclass adds a __dict__: its instances must be freed, not
    put on the free list that hands memory to our exact types."""
    from minloop.handles import Handle, TimerHandle
    for cls in (Handle, TimerHandle):
        sub = type('Sub', (cls,), {'__init__': lambda self: None})
        objs = [sub() for _ in range(50)]
        for o in objs:
            o.extra = 1
        del objs, o
    loop = minloop_module.new_event_loop()
    try:
        handles = [loop.call_soon(int) for _ in range(200)]
        assert all(type(h) is Handle for h in handles)
        run_one_iteration(loop)
    finally:
        loop.close()


def test_handles_and_timers_keep_apart_on_their_free_lists(minloop_module):
    """A Handle is smaller than a TimerHandle: the memory of a dead one must
    come back only as its own kind (a Handle's reused for a timer would be
    written past its end; PYTHONMALLOC=debug reports that at the free)."""
    loop = minloop_module.new_event_loop()
    try:
        fired = []
        for rnd in range(3):
            # Dead handles of one kind, then many of the other made at once.
            kinds = ([loop.call_soon(int) for _ in range(500)] if rnd % 2
                     else [loop.call_later(60, int) for _ in range(500)])
            for k in kinds:
                k.cancel()
            del kinds
            run_one_iteration(loop)
            now = loop.time()
            timers = [loop.call_at(now - i * 1e-6, fired.append, (rnd, i))
                      for i in range(400)]
            handles = [loop.call_soon(fired.append, (rnd, 'soon', i)) for i in range(400)]
            assert all(t.when() == now - i * 1e-6 for i, t in enumerate(timers))
            assert all(t._scheduled for t in timers)
            assert not any(h.cancelled() for h in handles)
            del timers, handles
            run_one_iteration(loop)
        # Every timer fired once, latest deadline last; every handle once.
        for rnd in range(3):
            mine = [f for f in fired if f[0] == rnd]
            assert mine[:400] == [(rnd, 'soon', i) for i in range(400)]
            assert mine[400:] == [(rnd, i) for i in reversed(range(400))]
    finally:
        loop.close()


def test_handles_are_no_bigger_than_before(minloop_module):
    import sys
    loop = minloop_module.new_event_loop()
    try:
        h = loop.call_soon(int)
        t = loop.call_later(0, int)
        # A Handle fits pymalloc's 128-byte size class with the GC header
        # (and, from 3.12, the managed weak-reference pre-header, whose dict
        # pointer goes unused): 120 bytes on 3.10/3.11, 128 from 3.12.  A
        # timer has three words more (its deadline and its heap token).  One
        # or two arguments live in the handle (in asyncio.TimerHandle's two
        # slots), where they took a tuple of 48-56 bytes more before.
        assert sys.getsizeof(h) <= 128
        assert sys.getsizeof(t) == sys.getsizeof(h) + 24
        one = loop.call_soon(print, 'x')
        assert sys.getsizeof(one) == sys.getsizeof(h)
        assert one._args == ('x',)
        # call_soon_threadsafe()'s handle (an asyncio._ThreadSafeHandle
        # from 3.14) is a Handle's size too: it keeps the thread running
        # it where a Handle keeps a second argument.
        for args in [(), ('x',), ('x', 'y')]:
            ts = loop.call_soon_threadsafe(print, *args)
            assert sys.getsizeof(ts) == sys.getsizeof(h)
            assert ts._args == args
    finally:
        loop.close()


@pytest.mark.parametrize('how', ['delete', 'set'])
@pytest.mark.parametrize('schedule', ['call_soon', 'call_later'])
def test_asyncio_s_slot_descriptors_cannot_crash_the_loop(loop, schedule, how):
    # asyncio's member descriptors still apply to our handles (they are
    # asyncio.Handle instances).  Deleting a slot through them, or setting
    # it to an object of the wrong type, used to leave NULL or a non-tuple
    # where the compiled code trusted an object (a segfault on the next run
    # or repr).  Any exception is fine here, as on asyncio; a crash is not.
    # A timer also has asyncio.TimerHandle's two slots, which keep a
    # minloop handle's one or two arguments.
    slots = [(asyncio.Handle, s) for s in asyncio.Handle.__slots__ if s != '__weakref__']
    if schedule == 'call_later':
        slots += [(asyncio.TimerHandle, s) for s in asyncio.TimerHandle.__slots__]
    errors = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    for cls, slot in slots:
        handle = getattr(loop, schedule)(*([0] if schedule == 'call_later' else []),
                                         print, 'never printed', 'twice')
        descriptor = cls.__dict__[slot]
        try:
            if how == 'delete':
                descriptor.__delete__(handle)
            else:
                descriptor.__set__(handle, 5)
        except (AttributeError, TypeError):
            pass
        for use in (repr, lambda h: h.cancelled(), lambda h: h.get_context(),
                    lambda h: getattr(h, slot), lambda h: h._run()):
            try:
                use(handle)
            except Exception:
                pass
        try:
            run_one_iteration(loop)
        except Exception:
            pass
        try:
            handle.cancel()
        except Exception:
            pass
    try:
        run_one_iteration(loop)   # asyncio's raises for a timer without _cancelled
    except AttributeError:
        pass
    assert loop.call_soon(int).cancelled() is False


# ----------------------------------------------------------------------
# Arguments kept in the handle (one or two; handles.pyx, "Arguments")


@pytest.mark.parametrize('nargs', [0, 1, 2, 3])
def test_a_callback_that_cancels_its_own_handle_keeps_its_arguments(loop, nargs):
    """cancel() drops the handle's references to its arguments; the running
    call must still hold its own (asyncio's call unpacked them)."""
    seen = []
    args = [[i] for i in range(nargs)]

    def callback(*got):
        handle.cancel()
        seen.append((got, handle._args, handle.cancelled()))

    handle = loop.call_soon(callback, *args)
    expected_args = tuple(args)
    del args
    run_one_iteration(loop)
    assert seen == [(expected_args, None, True)]


@pytest.mark.parametrize('nargs', [1, 2])
def test_arguments_read_before_and_after_the_run_are_the_same_tuple(loop, nargs):
    ran = []
    handle = loop.call_later(0, lambda *a: ran.append(a), *range(nargs))
    first = handle._args
    assert first == tuple(range(nargs)) and handle._args is first
    run_one_iteration(loop)
    assert ran == [first] and handle._args is first


def test_arguments_replaced_by_none_through_asyncio_s_slot_fail_the_call(loop):
    """`_args` set to None through asyncio's own descriptor: the call fails
    (asyncio's unpacks None) and is reported; the callback does not run as
    if it had no arguments."""
    ran, errors = [], []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    handle = loop.call_soon(lambda *args: ran.append(args))
    try:
        asyncio.Handle._args.__set__(handle, None)
    except AttributeError:
        pytest.skip("this loop's handles do not take asyncio's slot")
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert ran == []
    assert len(errors) == 1 and isinstance(errors[0]['exception'], TypeError)
