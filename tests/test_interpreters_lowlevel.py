"""minloop in an own-GIL sub-interpreter made with 3.13's low-level
`_interpreters` module (concurrent.interpreters, 3.14+, has
tests/test_interpreters.py).  On 3.12 (`_xxsubinterpreters`) minloop runs
there too, but CPython 3.12.1 aborts at exit once an own-GIL interpreter has
run asyncio's own loop, minloop imported or not: no test there."""
import os
import sys

import pytest

pytestmark = pytest.mark.main_interpreter("nested")

_interpreters = pytest.importorskip("_interpreters")


def test_a_sub_interpreter_runs_minloop_from_its_own_copy():
    import minloop  # noqa: F401  (the main interpreter's files, loaded first)
    iid = _interpreters.create()        # "isolated": its own GIL
    r, w = os.pipe()
    try:
        failed = _interpreters.run_string(iid, f"""
import sys, os
sys.path[:] = {sys.path!r}
import asyncio, minloop, minloop.loop

async def main():
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    got = await reader.read()
    writer.close()
    server.close()
    await server.wait_closed()
    return type(asyncio.get_running_loop()).__module__, got

loop_module, got = minloop.run(main())
copy = minloop.loop.__spec__.origin != minloop.loop.__file__
os.write({w}, repr((loop_module, got, copy)).encode())
""")
        assert failed is None
        assert os.read(r, 1000) == repr(("minloop.base_events", b"", True)).encode()
    finally:
        os.close(r)
        os.close(w)
        _interpreters.destroy(iid)
