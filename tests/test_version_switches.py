"""Version switches have one home each (issue 12, item 5): asyncio behaviours
in minloop/_asyncio_compat.py, compile-time interpreter facts in
src/py_compat.h.  A version test anywhere else is the drift that issue
removed, and so is a getattr()/hasattr() probe of asyncio (issue 22,
item 5).  (.pyi stubs keep their version tests: type checkers understand
only sys.version_info checks.)"""

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


# A probe of asyncio: getattr(X, ...) or hasattr(X, ...) where X is asyncio,
# a name bound to one of its modules or classes, or an attribute of one.
# Asking asyncio whether it has a thing is a version switch too, and two
# copies of one drift apart (loop.pyx and signals.py each had their own
# fallback for asyncio's private _iscoroutinefunction).
PROBE = re.compile(r"\b(?:getattr|hasattr)\(\s*([A-Za-z_][\w.]*)")
_IMPORT_FROM = re.compile(r"^\s*from\s+asyncio(?:\.\w+)*\s+c?import\s+(?:\(([^)]*)\)|([^\n#]*))", re.M)
_IMPORT_AS = re.compile(r"^\s*import\s+asyncio(?:\.\w+)*\s+as\s+(\w+)", re.M)
_ASSIGN = re.compile(r"^\s*(?:cdef\s+object\s+)?(\w+)\s*=\s*([A-Za-z_]\w*)(?:\.\w+)*\s*$", re.M)


def asyncio_names(text):
    """Names in a source that stand for asyncio or something of it."""
    names = {"asyncio"}
    for m in _IMPORT_FROM.finditer(text):
        for item in (m.group(1) or m.group(2)).split(","):
            words = item.split()
            if words:
                names.add(words[-1])
    names.update(_IMPORT_AS.findall(text))
    # Aliases of those (`_Base = _aio_selector.BaseSelectorEventLoop`), to a fixpoint.
    while True:
        more = {name for name, root in _ASSIGN.findall(text) if root in names} - names
        if not more:
            return names
        names |= more


def asyncio_probes(text):
    """Lines (1-based) of `text` that probe asyncio with getattr/hasattr."""
    names = asyncio_names(text)
    return [text.count("\n", 0, m.start()) + 1 for m in PROBE.finditer(text)
            if m.group(1).split(".")[0] in names]


def test_probe_finder_sees_the_forms():
    text = ("import asyncio\n"
            "from asyncio import coroutines as _aio_coroutines, events\n"
            "import asyncio.unix_events as _unix\n"
            "_Base = _aio_coroutines.Something\n"
            "a = getattr(_aio_coroutines, '_iscoroutinefunction', None)\n"
            "b = hasattr(asyncio.unix_events, 'can_use_pidfd')\n"
            "c = hasattr(_Base, 'x')\n"
            "d = getattr(_unix, 'y', None)\n"
            "e = getattr(events, 'z', None)\n"
            "f = hasattr(os, 'pidfd_open')\n"
            "h = getattr(\n    _aio_coroutines, 'x', None)\n"
            "g = getattr(transport, '_start_tls_compatible', False)\n")
    assert asyncio_probes(text) == [5, 6, 7, 8, 9, 11]


@pytest.mark.parametrize("path", sorted(
    p for p in set(_sources()) - HOMES if not p.endswith((".h", ".c"))))
def test_no_asyncio_probe_outside_its_home(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        hits = asyncio_probes(f.read())
    assert hits == [], (
        f"{path}:{hits}: a getattr/hasattr of asyncio is a version switch; "
        f"define it once in minloop/_asyncio_compat.py and use that name")
