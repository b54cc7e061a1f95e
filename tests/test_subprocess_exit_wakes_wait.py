"""Process.wait() and a pipe the child's own child keeps open.

Where the running asyncio wakes wait() at the child's exit (3.10, and again
from 3.14, gh-119710), wait() returns while a grandchild still holds the
child's stdout; where it wakes it only once every pipe is closed (3.11-3.13),
wait() waits for the grandchild too.  Both loops, as the running asyncio.
"""

import asyncio
import subprocess
import sys
import textwrap

from minloop import _asyncio_compat

# The child starts a grandchild that inherits its stdin and stdout, says
# "ready" once it runs, and lives until its stdin ends.
CHILD = textwrap.dedent("""\
    import subprocess, sys
    subprocess.run([sys.executable, "-c",
        "import sys; sys.stdout.write('ready'); sys.stdout.flush(); sys.stdin.read()"])
    """)


def test_wait_and_a_pipe_a_grandchild_holds(loop):
    async def main():
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            await proc.stdout.readexactly(5)
            proc.kill()
            if _asyncio_compat.SUBPROCESS_WAKES_WAITERS_AT_EXIT:
                return await asyncio.wait_for(proc.wait(), 10)
            try:
                # Never returns while the grandchild lives.
                await asyncio.wait_for(asyncio.shield(proc.wait()), 0.5)
            except asyncio.TimeoutError:
                return "waited for the pipes"
            return "returned early"
        finally:
            proc.stdin.close()      # the grandchild ends
            await proc.stdout.read()
            await proc.wait()

    result = loop.run_until_complete(main())
    if _asyncio_compat.SUBPROCESS_WAKES_WAITERS_AT_EXIT:
        assert result == -9
    else:
        assert result == "waited for the pipes"
