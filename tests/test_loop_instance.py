"""The loop as an object, on both loops: a program may set, read and delete
attributes of its own on it and hold it weakly; and the interpreter runs a
program's method lookups on it (`loop.call_soon(...)`) specialised, as it
does on asyncio's loop.  minloop keeps its own attributes in slots and its
instance dict unmade until a program sets one (base_events.Loop, loop.pxd):
the lookups would otherwise take the interpreter's generic path on every
call from 3.12 on.
"""

import dis
import gc
import sys
import sysconfig
import weakref

import pytest


def test_program_attributes(loop):
    loop.my_registry = {"a": 1}
    assert loop.my_registry == {"a": 1}
    assert vars(loop)["my_registry"] == {"a": 1}
    del loop.my_registry
    assert not hasattr(loop, "my_registry")
    with pytest.raises(AttributeError):
        del loop.my_registry


def test_weak_reference(loop_factory):
    loop = loop_factory()
    ref = weakref.ref(loop)
    assert ref() is loop
    loop.close()
    del loop
    gc.collect()
    assert ref() is None


def test_own_attributes_are_not_in_the_instance_dict(loop, minloop_only):
    # Set by the loop's __init__ (asyncio's names), kept in slots.
    assert loop._default_executor is None
    assert loop._exception_handler is None
    assert loop._signal_handlers == {}
    assert vars(loop) == {}
    loop._default_executor = "x"  # a program may still replace them
    assert loop._default_executor == "x" and vars(loop) == {}
    loop._default_executor = None


# The names of the unspecialised forms of the method-lookup instruction.
GENERIC = {"LOAD_ATTR", "LOAD_METHOD", "LOAD_ATTR_ADAPTIVE", "LOAD_METHOD_ADAPTIVE"}


def _lookup_instruction(func, name):
    (ins,) = [i for i in dis.get_instructions(func, adaptive=True)
              if i.opname.startswith(("LOAD_ATTR", "LOAD_METHOD")) and name in i.argrepr]
    return ins.opname


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the interpreter specialises from 3.11")
@pytest.mark.skipif(bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
                    reason="free-threaded builds specialise differently, or not at all")
def test_method_lookups_run_specialised(loop):
    def schedule(loop):
        loop.call_soon(nothing)
        loop.time()

    def nothing():
        pass

    for _ in range(200):  # well past the interpreter's warm-up
        schedule(loop)
    loop.run_until_complete(_noop())
    for name in ("call_soon", "time"):
        opname = _lookup_instruction(schedule, name)
        assert opname not in GENERIC and "METHOD" in opname, (name, opname)


def test_method_lookups_work_after_an_attribute_is_set(loop):
    # The dict is made by the program's own attribute: lookups still work
    # (specialised or not, that is the interpreter's business).
    loop.extra = 1
    calls = []
    for _ in range(50):
        loop.call_soon(calls.append, 1)
    loop.run_until_complete(_noop())
    assert calls == [1] * 50 and loop.extra == 1


async def _noop():
    pass
