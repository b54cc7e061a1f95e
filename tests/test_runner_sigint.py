"""Ctrl-C under minloop.run(): asyncio's Runner semantics, on every Python.

The first SIGINT cancels the main task (which may clean up) and run() raises
KeyboardInterrupt; a second SIGINT raises KeyboardInterrupt at once.  Each
case runs in a child interpreter, so the test process's own SIGINT handling
is not touched.  asyncio.run() is the reference from 3.11 on; 3.10's
asyncio.run() has no such handling, and minloop.run() adds it there.
"""

import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import LOOP_KINDS, import_minloop, sigint_as_from_a_terminal

pytestmark = pytest.mark.main_interpreter("preexec_fn")

SCRIPT = textwrap.dedent("""
    import asyncio, os, signal, sys
    kind, mode = sys.argv[1], sys.argv[2]

    def interrupt():
        os.kill(os.getpid(), signal.SIGINT)

    async def main():
        loop = asyncio.get_running_loop()
        # os.kill itself as the callback: no Python bytecode runs after it
        # that would run the SIGINT handler, so the loop has to.
        loop.call_later(0.05, os.kill, os.getpid(), signal.SIGINT)
        if mode == "twice":
            # Survive the first Ctrl-C; the second must end run() at once.
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                print("cancelled, carrying on", flush=True)
            loop.call_later(0.05, interrupt)
            await asyncio.sleep(30)
            print("not interrupted", flush=True)
            return
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            print("main cancelled", flush=True)
            raise

    try:
        if kind == "minloop":
            import minloop
            minloop.run(main())
        else:
            asyncio.run(main())
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
""")


def run_script(kind, mode, cwd):
    # cwd: not the source tree, whose unbuilt minloop/ would shadow the
    # installed one for `python -c`.
    proc = subprocess.run([sys.executable, "-c", SCRIPT, kind, mode], cwd=cwd,
                          capture_output=True, text=True, timeout=20,
                          preexec_fn=sigint_as_from_a_terminal)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("\n")[:-1]


@pytest.fixture(params=LOOP_KINDS)
def kind(request):
    if request.param == "minloop":
        import_minloop()
    elif sys.version_info < (3, 11):
        pytest.skip("asyncio.run() of 3.10 does not cancel the main task on Ctrl-C")
    return request.param


@pytest.mark.skipif(not hasattr(signal, "SIGINT"), reason="needs POSIX signals")
def test_first_sigint_cancels_main_then_raises_keyboardinterrupt(kind, tmp_path):
    assert run_script(kind, "once", tmp_path) == ["main cancelled", "KeyboardInterrupt"]


@pytest.mark.skipif(not hasattr(signal, "SIGINT"), reason="needs POSIX signals")
def test_second_sigint_interrupts_at_once(kind, tmp_path):
    assert run_script(kind, "twice", tmp_path) == ["cancelled, carrying on", "KeyboardInterrupt"]
