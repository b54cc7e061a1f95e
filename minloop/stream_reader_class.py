"""asyncio.StreamReader with readline(), readexactly() and read(n) over
compiled steps (stream_reader.pyx says what a step does and checks).

These coroutines are Python on purpose: the interpreter runs the frame of a
native coroutine inline when it is awaited, and a compiled coroutine per
call measured slower than asyncio's own (benchmarks/RESULTS.md,
2026-11-28).  For the same reason readexactly() and read() each spell out
their loop rather than share one: a shared coroutine would be a second frame
per call.  Each one is asyncio's method with what runs
between its awaits in a step: a step returns the bytes to return, or the
future to await (the one asyncio's _wait_for_data() awaits, which is
cleared after it as there), or ASYNCIO when asyncio's method is to run
instead.  The except clauses are readline()'s own, for what its wait
raises into it.
"""

from asyncio import exceptions, streams

from .stream_reader import (ASYNCIO, read_step, readexactly_step,
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
