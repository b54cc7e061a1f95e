"""Version switches have one home each (issue 12, item 5): asyncio behaviours
in minloop/_asyncio_compat.py, compile-time interpreter facts in
src/py_compat.h.  A version test anywhere else is the drift that issue
removed.  (.pyi stubs keep theirs: type checkers understand only
sys.version_info checks.)"""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOMES = {os.path.join("minloop", "_asyncio_compat.py"), os.path.join("src", "py_compat.h")}
VERSION_TEST = re.compile(r"sys\.version_info|PY_VERSION_HEX")


def _sources():
    for top in ("minloop", "src"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for name in names:
                if name.endswith((".py", ".pyx", ".pxd", ".h")) or (
                        top == "src" and name.endswith(".c")):
                    yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def test_sources_are_found():
    found = set(_sources())
    assert HOMES <= found
    assert os.path.join("minloop", "stream.pyx") in found


@pytest.mark.parametrize("path", sorted(set(_sources()) - HOMES))
def test_no_version_test_outside_its_home(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        hits = [n for n, line in enumerate(f, 1) if VERSION_TEST.search(line)]
    assert hits == [], f"{path}:{hits}: move the switch to {sorted(HOMES)}"
