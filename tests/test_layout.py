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
    if name.endswith(".py"):
        found |= _absolute_imports(text)
    found.discard(name)
    return found


def _absolute_imports(text):
    """`import minloop.x` and `from minloop.x import y` anywhere in a Python
    file's code (inside functions too; not in its docstrings)."""
    import ast

    def module(dotted):
        top, _, rest = dotted.partition(".")
        return _module(PKG, rest) if top == "minloop" else None

    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(module(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from minloop.x import y`: the module y if it is one, else x.
            found.update(module(f"{node.module}.{a.name}") or module(node.module)
                         for a in node.names)
    found.discard(None)
    return found


# ---------------------------------------------------------------------------
# Cycles.  A module is its files of one name (loop.pyx, loop.pxd and loop.pyi
# are the module loop; timer_heap.h and timer_heap.c the unit timer_heap): a
# cimport of loop.pxd makes the importer need the module loop at run time, so
# cycles are found between modules, and named by the files that make each
# edge (a Python import inside a function counts: it is a cycle put off).

# Cycles known and being broken elsewhere, each by the set of files its
# message names.  Nothing else may be here for long: the check exists so that
# the layers are a stack.
CYCLES_BEING_BROKEN = set()


def unit_of(name):
    """The module (or C unit) a map name belongs to: its path less the extension."""
    return os.path.splitext(path_of(name))[0]


def import_graph():
    """{module: {module it uses: (the file that uses it, the file it names)}}."""
    graph = {}
    for name in sorted(source_files()):
        edges = graph.setdefault(unit_of(name), {})
        for used in sorted(uses_of(name)):
            if unit_of(used) != unit_of(name):
                edges.setdefault(unit_of(used), (path_of(name), path_of(used)))
    return graph


def find_cycles(graph):
    """One cycle in each strongly connected part of `graph` ({node: iterable
    of nodes}) that has one: [node, ..., node], the first node repeated last,
    the shortest cycle through that part's least node.  [] when there is none."""
    index, low, on_stack, stack, parts = {}, {}, set(), [], []

    def connect(v):  # Tarjan's, iterative: the graph may be deep
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        part.add(w)
                        if w == node:
                            break
                    parts.append(part)

    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            connect(v)
    cycles = []
    for part in parts:
        start = min(part)
        if len(part) == 1 and start not in graph.get(start, ()):
            continue
        # Breadth first from start, inside the part, back to start.
        prev, frontier, found = {start: None}, [start], None
        while frontier and found is None:
            nxt = []
            for u in frontier:
                for w in sorted(graph.get(u, ())):
                    if w == start:
                        found = u
                        break
                    if w in part and w not in prev:
                        prev[w] = u
                        nxt.append(w)
                if found is not None:
                    break
            frontier = nxt
        path, u = [start], found
        while u is not None and u != start:
            path.append(u)
            u = prev[u]
        cycles.append([start] + path[1:][::-1] + [start])
    return sorted(cycles)


def cycle_files(cycle, graph):
    """A module cycle as the files that make each edge: loop.pyx cimports
    fd_owners.pxd, whose file cimports loop.pxd -> `minloop/loop.pyx ->
    minloop/fd_owners.pxd -> minloop/loop.pyx`."""
    return [graph[a][b][0] for a, b in zip(cycle, cycle[1:])]


def describe_cycle(cycle, graph):
    files = cycle_files(cycle, graph)
    hops = [f"{graph[a][b][0]} (imports {graph[a][b][1]})" for a, b in zip(cycle, cycle[1:])]
    return " -> ".join(files + files[:1]) + "\n      " + "\n      ".join(hops)


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
            # In a fixed order: where the uses form a cycle (one of
            # CYCLES_BEING_BROKEN), the edge left out of the depth must not
            # depend on the hash seed; the block marks it "(cycle)".
            inner = [depth(d, seen + (key,)) for d in sorted(deps.get(key, ()), key=_sort_key)
                     if d not in seen]
            level[key] = 1 + max(inner, default=-1)
        return level[key]

    for key in deps:
        depth(key)
    lines = []
    for n in range(max(level.values()) + 1):
        keys = sorted((k for k in level if level[k] == n), key=_sort_key)
        # A use that is not below its row is one edge of a cycle (which
        # test_no_import_cycles fails on): said, not dropped.
        lines.append(f"{n:2d}  " + "\n    ".join(
            k + (f"  <- {', '.join(d if level.get(d, -1) < n else d + ' (cycle)' for d in sorted(deps[k], key=_sort_key))}"
                 if deps[k] else "")
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


def test_no_import_cycles():
    # Every import and cimport among the package's modules, lazy ones too,
    # goes one way: from a layer to the layers below it.
    graph = import_graph()
    cycles = find_cycles(graph)
    found = {frozenset(cycle_files(c, graph)) for c in cycles}
    new = [describe_cycle(c, graph) for c in cycles
           if frozenset(cycle_files(c, graph)) not in CYCLES_BEING_BROKEN]
    assert not new, "import cycles among minloop's modules (break each):\n" + "\n".join(new)
    gone = sorted(sorted(k) for k in CYCLES_BEING_BROKEN - found)
    assert not gone, (f"CYCLES_BEING_BROKEN names cycles there are no longer (remove them "
                      f"from tests/test_layout.py): {gone}")


def test_cycle_finder_on_made_up_graphs():
    assert find_cycles({}) == []
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert find_cycles({"a": {"b", "c"}, "b": {"c"}, "c": {"d"}}) == []      # a diamond
    assert find_cycles({"a": {"a"}}) == [["a", "a"]]                           # itself
    assert find_cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]
    # A back edge deep down, below an acyclic start (the edge the layers'
    # depth() leaves out).
    assert find_cycles({"top": {"m"}, "m": {"x"}, "x": {"y"}, "y": {"m", "z"}}) == [
        ["m", "x", "y", "m"]]
    # Two cycles apart: each named; the shortest through a part's least node.
    assert find_cycles({"a": {"b"}, "b": {"c", "a"}, "c": {"a"},
                        "p": {"q"}, "q": {"p"}}) == [["a", "b", "a"], ["p", "q", "p"]]
    # Deep: no recursion limit.
    chain = {i: {i + 1} for i in range(5000)}
    chain[5000] = {0}
    assert len(find_cycles(chain)[0]) == 5002
    # Named by the files that make each edge.
    graph = {"minloop/a": {"minloop/b": ("minloop/a.pyx", "minloop/b.pxd")},
             "minloop/b": {"minloop/a": ("minloop/b.pxd", "minloop/a.pxd")}}
    assert describe_cycle(find_cycles(graph)[0], graph).splitlines()[0] == (
        "minloop/a.pyx -> minloop/b.pxd -> minloop/a.pyx")


def test_a_cycle_fails_the_check(monkeypatch):
    # bench/loops.py importing bench/cli.py in a function (as options.py
    # imported runner.py) closes bench/cli -> ... -> bench/loops -> bench/cli.
    real = uses_of

    def uses_with_a_cycle(name):
        return real(name) | ({"bench/cli.py"} if name == "bench/loops.py" else set())

    monkeypatch.setattr(sys.modules[__name__], "uses_of", uses_with_a_cycle)
    with pytest.raises(AssertionError, match=r"minloop/bench/\w+\.py -> .*minloop/bench/loops\.py"):
        test_no_import_cycles()


# ---------------------------------------------------------------------------
# The claims in the prose: where a symbol lives, which .pyx has a .pxd and a
# .pyi, which tests run on asyncio's loop.

DOCS = (LAYOUT, os.path.join(ROOT, "docs", "design.md"))
# A hop: `minloop/loop.pyx:651` `_run_iteration` (the symbol on that line).
HOP = re.compile(r"`((?:minloop|src)/[\w/]+\.\w+):(\d+)`\s+`([^`]+)`")


def hops():
    """[(doc, its line, path, line, symbol)] of every hop in the docs."""
    found = []
    for doc in DOCS:
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        for m in HOP.finditer(text):
            found.append((os.path.relpath(doc, ROOT), text.count("\n", 0, m.start()) + 1,
                          m.group(1), int(m.group(2)), m.group(3)))
    return found


def _on(line, symbol):
    return re.search(r"(?<![\w])" + re.escape(symbol) + r"(?![\w])", line) is not None


def where_now(path, symbol):
    """Where `symbol` is in path now: its definitions first, then its uses."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    at = [n for n, line in enumerate(lines, 1) if _on(line, symbol)]
    defines = re.compile(r"^\s*(?:(?:cdef|cpdef|def|class|static|inline|int|void|struct|"
                         r"#\s*define)\b.*)?\b" + re.escape(symbol) + r"\b\s*[(:=\[]")
    first = [n for n in at if defines.search(lines[n - 1])]
    return first + [n for n in at if n not in first]


def stale_hops(found):
    stale = []
    for doc, n, path, line, symbol in found:
        full = os.path.join(ROOT, path)
        if not os.path.exists(full):
            stale.append(f"{doc}:{n}: `{path}:{line}` `{symbol}`: {path} does not exist")
            continue
        with open(full, encoding="utf-8") as f:
            lines = f.read().split("\n")
        if line <= len(lines) and _on(lines[line - 1], symbol):
            continue
        now = where_now(path, symbol)
        where = (f"now at {path}:{now[0]}" + (f" (also {', '.join(map(str, now[1:6]))}"
                                                + (" ..." if len(now) > 6 else "") + ")"
                                                if len(now) > 1 else "")
                 if now else f"no longer in {path}")
        stale.append(f"{doc}:{n}: `{path}:{line}` `{symbol}`: not on line {line}; {where}")
    return stale


def test_every_hop_names_the_line_its_symbol_is_on():
    found = hops()
    # The design overview's two paths are there (and this test reads them).
    assert sum(doc == "docs/design.md" for doc, *_ in found) >= 40
    stale = stale_hops(found)
    assert not stale, ("hops whose symbol has moved (write the line it is on now, or the "
                       "symbol that is there now):\n" + "\n".join(stale))


def test_a_moved_symbol_is_named_with_its_new_line():
    found = [("docs/design.md", 1, "minloop/loop.pyx", 1, "_run_iteration"),
             ("docs/design.md", 2, "minloop/loop.pyx", 1, "no_such_symbol_anywhere")]
    first, gone = stale_hops(found)
    now = where_now("minloop/loop.pyx", "_run_iteration")[0]
    with open(os.path.join(ROOT, "minloop", "loop.pyx"), encoding="utf-8") as f:
        assert "_run_iteration" in f.read().split("\n")[now - 1]
    assert first.startswith("docs/design.md:1: `minloop/loop.pyx:1` `_run_iteration`: "
                            f"not on line 1; now at minloop/loop.pyx:{now}")
    assert gone.endswith("no longer in minloop/loop.pyx")


def _marked_block(name):
    with open(LAYOUT, encoding="utf-8") as f:
        text = f.read()
    m = re.search(rf"<!-- {name}[^>]*-->\n(.*?)<!-- /{name} -->", text, re.S)
    assert m, f"docs/layout.md has no <!-- {name} --> block"
    return m.group(1)


def test_which_pyx_has_a_pxd_and_a_pyi():
    block = _marked_block("pxd-pyi")
    claimed = {}
    for line in block.splitlines():
        m = re.match(r"- (with|without) a `\.(pxd|pyi)`: (.*)", line.strip())
        if m:
            claimed[m.group(1), m.group(2)] = set(TICKED.findall(m.group(3).split(" (")[0]
                                                                 if m.group(1) == "without"
                                                                 and m.group(2) == "pxd"
                                                                 else m.group(3)))
    pyx = sorted(f for f in os.listdir(PKG) if f.endswith(".pyx"))
    wrong = []
    for ext in ("pxd", "pyi"):
        have = {f for f in pyx if os.path.exists(os.path.join(PKG, f[:-4] + "." + ext))}
        for kind, want in (("with", have), ("without", set(pyx) - have)):
            got = {f for f in claimed.get((kind, ext), set()) if f.endswith(".pyx")}
            if got != want:
                wrong.append(f"- {kind} a `.{ext}`: " + " ".join(f"`{f}`" for f in sorted(want)))
    assert not wrong, "docs/layout.md's pxd-pyi block should read (and say why):\n" + "\n".join(wrong)


def test_the_symbols_the_change_table_names_are_in_its_files():
    # "To change X, open Y": `loop.pyx` (`call_later`, `_call_at`) claims
    # that loop.pyx has them.
    with open(LAYOUT, encoding="utf-8") as f:
        text = f.read()
    table = text[text.index("## To change X, open Y"):text.index("## Tests")]
    claim = re.compile(r"((?:`[\w/]+\.(?:pyx|pxd|py|h|c)`/?)+)\s*\(([^()]*(?:\(\)[^()]*)*)\)")
    missing = []
    for m in claim.finditer(table):
        files = [path_of(f) for f in TICKED.findall(m.group(1))]
        texts = []
        for path in files:
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                texts.append(f.read())
        for sym in re.findall(r"`(\w+)(?:\(\))?`", m.group(2)):
            if not any(_on(t, sym) for t in texts):
                missing.append(f"`{sym}` is in none of {', '.join(files)}")
    assert not missing, "docs/layout.md's \"To change X\" table names:\n" + "\n".join(missing)


def loops_of_test_files():
    """{test file: whether any of its tests runs on asyncio's loop}, from
    pytest's own collection (a test id with an `asyncio` parameter); None
    for a file that collects nothing here (skipped whole: the ASan build has
    no telemetry, say), which this run cannot judge."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", "tests"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    on_asyncio = {os.path.basename(p): False
                  for p in os.listdir(os.path.join(ROOT, "tests"))
                  if p.startswith("test_") and p.endswith(".py")}
    collected = set()
    for line in proc.stdout.splitlines():
        path, sep, rest = line.partition("::")
        if sep:
            collected.add(os.path.basename(path))
        m = re.search(r"\[(.*)\]$", rest)
        if sep and m and "asyncio" in m.group(1).split("-"):
            on_asyncio[os.path.basename(path)] = True
    assert sum(on_asyncio.values()) > 20, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {f: (on if f in collected else None) for f, on in on_asyncio.items()}


@pytest.mark.timeout(300)   # it collects the whole suite: seconds idle, more beside a full run
def test_the_tests_said_to_run_on_minloop_only_are_those():
    loops = loops_of_test_files()
    unjudged = {f for f, on in loops.items() if on is None}
    claimed = set(TICKED.findall(_marked_block("minloop-only"))) - unjudged
    actual = {f for f, on in loops.items() if on is False}
    assert claimed == actual, (
        "docs/layout.md's minloop-only block should list:\n"
        + " ".join(f"`{f}`" for f in sorted(actual))
        + f"\n(run on asyncio's loop too: {sorted(claimed - actual)}; "
          f"not on it: {sorted(actual - claimed)})")


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
    assert "top_tasks.py" in uses_of("top.py")                     # from . import x, in a function
    assert "bench/runner.py" in uses_of("bench/options.py")
    assert _absolute_imports("def f():\n    from minloop.bench import cli\n") == {"bench/cli.py"}
    assert _absolute_imports('"""from minloop import loop"""') == set()  # a docstring


if __name__ == "__main__":
    # What to paste: every row's derived uses cell, then the layers block.
    for files, _, _, line in map_rows():
        print(f"{line}: {' '.join(files)}: {uses_cell(files)}")
    print()
    print(layers_block(map_rows()))
    sys.exit(0)
