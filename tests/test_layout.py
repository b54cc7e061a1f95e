"""docs/layout.md, the map of the code, stays true.

- Every source file of the package and of src/ (.py, .pyx, .pxd, .pyi, .c,
  .h) is named in exactly one row of the map's tables, and every file a row
  names exists.
- A row's "uses" column is what its files cimport, include and import
  within the package, as the code says (derived below).
- The tests a row names exist.
- The layers picture is the one the "uses" columns give.

A new module (or a changed import) makes these fail with the row or the
block to paste: `python tests/test_layout.py` prints every row's derived
"uses" cell and the layers block.
"""

import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUT = os.path.join(ROOT, "docs", "layout.md")
PKG = os.path.join(ROOT, "minloop")
SRC = os.path.join(ROOT, "src")
# Where a test named in the map may live.
TEST_DIRS = ("tests", "tests/c", "tests/conformance", "benchmarks", "benchmarks/net")
SOURCE_EXTS = (".py", ".pyx", ".pxd", ".pyi", ".c", ".h")
TICKED = re.compile(r"`([^`]+)`")


# ---------------------------------------------------------------------------
# Names: a file is named in the map as `loop.pyx` (minloop/), `bench/rows.py`
# (minloop/bench/) or `fd_table.h` (src/).

def path_of(name):
    """The repository path a map name stands for."""
    if name.endswith((".c", ".h")):
        return os.path.join("src", name)
    return os.path.join("minloop", name)


def name_of(path):
    rel = os.path.relpath(path, ROOT)
    top, _, rest = rel.partition(os.sep)
    return rest.replace(os.sep, "/") if top in ("minloop", "src") else rel


def source_files():
    """Map names of every source file there is."""
    names = set()
    for top in (PKG, SRC):
        for dirpath, dirnames, files in os.walk(top):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for f in files:
                # Cython's generated .c files sit next to the .pyx: not sources.
                if f.endswith(SOURCE_EXTS) and not (top == PKG and f.endswith(".c")):
                    names.add(name_of(os.path.join(dirpath, f)))
    return names


# ---------------------------------------------------------------------------
# What a file uses, from the code.

_CIMPORT = re.compile(r"^\s*from\s+(\.+)(\w*)\s+cimport\b", re.M)
_EXTERN = re.compile(r'cdef\s+extern\s+from\s+"([^"]+)"')
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_FROM_IMPORT = re.compile(
    r"^\s*from\s+(\.+)([\w.]*)\s+import\s+(?:\(([^)]*)\)|([^\n#]*))", re.M)


def _module(pkg_dir, dotted):
    """The map name of module `dotted` under pkg_dir, or None."""
    base = os.path.join(pkg_dir, *dotted.split(".")) if dotted else pkg_dir
    if os.path.isdir(base):
        return name_of(os.path.join(base, "__init__.py"))
    for ext in (".py", ".pyx"):
        if os.path.exists(base + ext):
            return name_of(base + ext)
    return None


def uses_of(name):
    """The map names a file cimports, includes or imports, in the package."""
    path = os.path.join(ROOT, path_of(name))
    with open(path, encoding="utf-8") as f:
        text = f.read()
    here = os.path.dirname(path)
    found = set()
    for m in _CIMPORT.finditer(text):
        pkg = here
        for _ in range(len(m.group(1)) - 1):
            pkg = os.path.dirname(pkg)
        found.add(name_of(os.path.join(pkg, m.group(2) + ".pxd")))
    for header in _EXTERN.findall(text) + _INCLUDE.findall(text):
        if os.path.exists(os.path.join(SRC, header)):
            found.add(header)
    for m in _FROM_IMPORT.finditer(text):
        pkg = here
        for _ in range(len(m.group(1)) - 1):
            pkg = os.path.dirname(pkg)
        dotted = m.group(2)
        target = _module(pkg, dotted)
        base = os.path.join(pkg, *dotted.split(".")) if dotted else pkg
        for item in (m.group(3) or m.group(4)).split(","):
            words = item.split()
            sub = _module(base, words[0]) if words and os.path.isdir(base) else None
            if sub is not None:
                found.add(sub)
            elif target is not None:
                found.add(target)
    found.discard(name)
    return found


# ---------------------------------------------------------------------------
# The map's tables.

def map_rows():
    """[(files, uses, tests, line)] of every table headed `| files | ...`."""
    rows, header = [], None
    with open(LAYOUT, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.startswith("|"):
                header = None
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = [c.lower() for c in cells] if cells[0].lower() == "files" else []
                continue
            if not header or set(cells[0]) <= set("-: "):
                continue
            cell = dict(zip(header, cells))
            rows.append((TICKED.findall(cell["files"]), TICKED.findall(cell.get("uses", "")),
                         TICKED.findall(cell.get("tests", "")), n))
    return rows


def derived_uses(files):
    uses = set()
    for f in files:
        if os.path.exists(os.path.join(ROOT, path_of(f))):
            uses |= uses_of(f)
    return uses - set(files)


def _sort_key(name):
    return (name.startswith("bench/"), name)


def uses_cell(files):
    return " ".join(f"`{u}`" for u in sorted(derived_uses(files), key=_sort_key)) or "-"


def layers_block(rows):
    """Each row (by its first file) in the layer above everything it uses."""
    owner = {f: files[0] for files, _, _, _ in rows for f in files}
    deps = {files[0]: {owner.get(u, u) for u in derived_uses(files)} for files, _, _, _ in rows}
    level = {}

    def depth(key, seen=()):
        if key not in level:
            # In a fixed order: where the uses form a cycle (issue 44), the
            # edge dropped must not depend on the hash seed.
            inner = [depth(d, seen + (key,)) for d in sorted(deps.get(key, ()), key=_sort_key)
                     if d not in seen]
            level[key] = 1 + max(inner, default=-1)
        return level[key]

    for key in deps:
        depth(key)
    lines = []
    for n in range(max(level.values()) + 1):
        keys = sorted((k for k in level if level[k] == n), key=_sort_key)
        lines.append(f"{n:2d}  " + "\n    ".join(
            k + (f"  <- {', '.join(sorted(deps[k], key=_sort_key))}" if deps[k] else "")
            for k in keys))
    return "\n".join(lines)


def _layers_in_map():
    with open(LAYOUT, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- layers[^>]*-->\n```\n(.*?)\n```\n<!-- /layers -->", text, re.S)
    return m and m.group(1)


# ---------------------------------------------------------------------------

def test_every_source_file_is_on_the_map():
    named = [f for files, _, _, _ in map_rows() for f in files]
    missing = sorted(source_files() - set(named))
    assert not missing, "docs/layout.md does not name these; add a row each:\n" + "\n".join(
        f"| `{f}` | what it is | its asyncio counterpart | {uses_cell([f])} | its tests |"
        for f in missing)
    twice = sorted({f for f in named if named.count(f) > 1})
    assert not twice, f"named in more than one row of docs/layout.md: {twice}"


def test_every_file_on_the_map_exists():
    gone = sorted(f for files, _, _, _ in map_rows() for f in files
                  if not os.path.exists(os.path.join(ROOT, path_of(f))))
    assert not gone, f"docs/layout.md names files that do not exist (drop or rename their rows): {gone}"


def test_uses_columns_are_the_codes():
    wrong = []
    for files, uses, _, line in map_rows():
        if set(uses) - {"-"} != derived_uses(files):
            wrong.append(f"docs/layout.md:{line} ({files[0]}): uses should read {uses_cell(files)}")
    assert not wrong, "\n".join(wrong)


def test_named_tests_exist():
    gone = []
    for _, _, tests, line in map_rows():
        for t in tests:
            if not any(os.path.exists(os.path.join(ROOT, d, t)) for d in TEST_DIRS):
                gone.append(f"docs/layout.md:{line}: {t}")
    assert not gone, "tests named on the map that are in none of " + ", ".join(TEST_DIRS) + ":\n" + "\n".join(gone)


def test_layers_picture_is_the_tables():
    expected = layers_block(map_rows())
    assert _layers_in_map() == expected, (
        "docs/layout.md's layers block (between <!-- layers --> and <!-- /layers -->) "
        "should read:\n" + expected)


def test_finds_what_it_checks():
    # The derivation sees each kind of dependency it claims to.
    assert "loop.pxd" in uses_of("stream.pyx")                    # from .x cimport
    assert "fd_table.h" in uses_of("includes.pxd")                 # cdef extern from
    assert "poller.h" in uses_of("poller_epoll.c")                 # #include
    assert "_asyncio_compat.py" in uses_of("signals.py")           # from .x import
    assert "bench/cli.py" in uses_of("__main__.py")              # from .pkg import module
    assert "__init__.py" in uses_of("bench/report.py")             # from .. import name
    assert {"loop.pyx", "sock_ops.pyx", "fd_table.c", "bench/rows.py"} <= source_files()
    assert "loop.c" not in source_files()                          # Cython's output


if __name__ == "__main__":
    # What to paste: every row's derived uses cell, then the layers block.
    for files, _, _, line in map_rows():
        print(f"{line}: {' '.join(files)}: {uses_cell(files)}")
    print()
    print(layers_block(map_rows()))
    sys.exit(0)
