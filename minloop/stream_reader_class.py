"""asyncio.StreamReader with readline(), readexactly() and read(n) over
compiled steps (stream_reader.pyx says what a step does and checks).

These coroutines are Python on purpose: the interpreter runs the frame of a
native coroutine inline when it is awaited, and a compiled coroutine per
call measured slower than asyncio's own (benchmarks/RESULTS.md, "Figures
moved out of code comments (issue 44)").  For the same reason readexactly() and read() each spell out
their loop rather than share one: a shared coroutine would be a second frame
per call.  Each one is asyncio's method with what runs
between its awaits in a step: a step returns the bytes to return, or the
future to await (the one asyncio's _wait_for_data() awaits, which is
cleared after it as there), or ASYNCIO when asyncio's method is to run
instead.  The except clauses are readline()'s own, for what its wait
raises into it.  On 3.15 the class has readline() alone (py_compat.h,
MINLOOP_STEPS_STREAM_READS).

made_as_steps_readers() gives start_server()'s readers this class from
birth (below).
"""

import types

from asyncio import exceptions, streams

from .stream_reader import (ASYNCIO, STEPS, STEPS_READS, read_step, readexactly_step,
                            readline_overrun, readline_step)

# asyncio's class, as at import (what its methods are is looked up per call).
_StreamReader = streams.StreamReader


class StreamReader(_StreamReader):
    """asyncio.StreamReader, its per-message coroutines compiled."""

    async def readline(self):
        got = readline_step(self, True)
        while type(got) is not bytes:
            if got is ASYNCIO:
                return await _StreamReader.readline(self)
            try:
                try:
                    await got
                finally:
                    self._waiter = None
            except exceptions.IncompleteReadError as e:
                return e.partial
            except exceptions.LimitOverrunError as e:
                readline_overrun(self, e)
            got = readline_step(self, False)
        return got

    async def readexactly(self, n):
        got = readexactly_step(self, n, True)
        while type(got) is not bytes:
            if got is ASYNCIO:
                return await _StreamReader.readexactly(self, n)
            try:
                await got
            finally:
                self._waiter = None
            got = readexactly_step(self, n, False)
        return got

    async def read(self, n=-1):
        got = read_step(self, n, True)
        while type(got) is not bytes:
            if got is ASYNCIO:
                return await _StreamReader.read(self, n)
            try:
                await got
            finally:
                self._waiter = None
            got = read_step(self, n, False)
        return got

    if not STEPS_READS:
        # 3.15: asyncio's own readexactly() and read(n), one coroutine each
        # there, cost less than these (py_compat.h).
        del readexactly, read


# Readers made as the subclass
#
# asyncio.start_server() (and start_unix_server()) hand loop.create_server()
# a factory, nested in them, that makes each connection's StreamReader and
# StreamReaderProtocol.  minloop's _start_serving() runs that factory's own
# code with this module's StreamReader under the name `StreamReader`: the
# reader is born of the subclass instead of having its __class__ assigned
# after (stream_reader.pyx, adopt_stream_reader()).  An assignment moves the
# instance's attribute values out of the object into a dict, and every
# attribute read of asyncio's own methods on it then takes the slow path,
# about twice as slow, and every line, read(n) and readexactly() pays it
# (benchmarks/RESULTS.md, "Figures moved out of code comments (issue 44)").
#
# Only asyncio's own factory, exactly: its code object, its module's
# globals, and asyncio.streams.StreamReader still asyncio's class (a program
# that replaced it gets its own class, as asyncio would give it).  The
# factory's globals are a copy of asyncio.streams' taken as the server
# starts: a later replacement of another name there is not seen by that
# server's factory.

def _nested_factory(func):
    for const in func.__code__.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == 'factory':
            return const
    return None


_FACTORY_CODES = frozenset(
    code for code in (_nested_factory(streams.start_server),
                      _nested_factory(streams.start_unix_server))
    if code is not None)


def made_as_steps_readers(factory):
    """factory, or one running its code with the subclass as StreamReader
    when it is asyncio's start_server() factory (see above)."""
    if (not STEPS or type(factory) is not types.FunctionType
            or factory.__code__ not in _FACTORY_CODES
            or factory.__globals__ is not vars(streams)
            or streams.StreamReader is not _StreamReader):
        return factory
    names = dict(vars(streams))
    names['StreamReader'] = StreamReader
    made = types.FunctionType(factory.__code__, names, factory.__name__,
                              factory.__defaults__, factory.__closure__)
    made.__qualname__ = factory.__qualname__
    return made
