"""The event loop implementations the benchmarks compare, by name.

A loop is named by one of the known names below (``uvloop``, ``talyn`` ...)
or given as ``module:factory`` (or ``label=module:factory``, to name its
column), where ``factory`` is a zero-argument callable in ``module`` that
makes a new loop: a function such as ``new_event_loop`` or a class.
``label=module:factory@DIR`` runs that loop's children with DIR, a source
tree built in place, in place of this package's root: two builds of minloop
side by side (benchmarks/telemetry_overhead.py compares a build without
telemetry with one with it).

A loop that cannot be imported (or whose factory fails) is *unavailable*, with a
reason, rather than an error: the benchmarks skip it and say why.  The imports
happen on first use, not at module import, so a broken extension only affects
the runs that ask for it.

Every measurement runs in a child interpreter that is told the loop's name
only.  A loop given as ``module:factory`` is therefore registered (register())
in this process's environment, MINLOOP_BENCH_LOOPS, which the children inherit:
a child resolves the name from there as its parent did.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import os
import re
from dataclasses import dataclass
from typing import Callable

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


@dataclass(frozen=True)
class Known:
    """A loop the benchmarks know by name: where its factory is, which
    distribution installs it, and the Pythons that distribution supports
    (for the line that says why it is skipped)."""
    factory: str          # "module:attribute"
    dist: str = ""        # the name pip installs it by ("" for the standard library)
    python: str = ""      # e.g. "3.14+", where it ships for some Pythons only


# Display order, also the order loops run in within each benchmark round.
# zuvloop and rsloop ship wheels for CPython 3.14+ only (rsloop's sdist needs
# a nightly Rust), talyn for 3.13 and 3.14; pyproject.toml's bench extra
# names them with the same bounds.
KNOWN = {
    # SelectorEventLoop by name, not asyncio.new_event_loop(): an installed
    # policy (uvloop.install(), say) must not silently change the baseline.
    "asyncio": Known("asyncio:SelectorEventLoop"),
    "minloop": Known("minloop:new_event_loop", "minloop"),
    "uvloop": Known("uvloop:new_event_loop", "uvloop"),
    "rloop": Known("rloop:new_event_loop", "rloop"),
    "zuvloop": Known("zuvloop:new_event_loop", "zuvloop", "3.14+"),
    "rsloop": Known("rsloop:new_event_loop", "rsloop", "3.14+"),
    "talyn": Known("talyn:Loop", "talyn", "3.13 and 3.14"),
}
NAMES = tuple(KNOWN)

# label -> "module:factory" of the loops given that way; shared with the
# measuring children through the environment (see the module docstring).
ENV = "MINLOOP_BENCH_LOOPS"
_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_LABEL = re.compile(r"^[A-Za-z0-9_][\w.+-]*$")


class Unavailable(Exception):
    """The loop implementation cannot be used in this interpreter."""


def _registered() -> dict[str, str]:
    text = os.environ.get(ENV, "")
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


def register(label: str, spec: str) -> None:
    """Make label name the loop spec ("module:factory", or
    "module:factory@DIR") here and in every child process started from now
    on."""
    found = _registered()
    found[label] = spec
    os.environ[ENV] = ",".join(f"{k}={v}" for k, v in found.items())


def parse(text: str) -> str:
    """One item of --loops: a known name, module:factory or
    label=module:factory; returns the name its column goes by (registering
    a spec's label).  Raises ValueError saying what is wrong."""
    text = text.strip()
    if text in KNOWN or text in _registered():
        return text
    label, sep, spec = text.partition("=")
    if not sep:
        label, spec = text, text
    spec, at, root = spec.partition("@")
    if at:
        if not sep:
            raise ValueError(f"{text!r}: a loop from another tree needs a label: "
                             f"label=module:factory@DIR")
        if not root or any(c in root for c in ",=@"):
            raise ValueError(f"{text!r}: DIR after @ is a directory without , = or @")
        root = os.path.abspath(root)
        if not os.path.isdir(root):
            raise ValueError(f"{text!r}: no such directory: {root}")
    if ":" not in spec:
        raise ValueError(f"unknown loop {text!r}: not one of {', '.join(NAMES)}, nor "
                         f"module:factory or label=module:factory")
    if not _SPEC.match(spec):
        raise ValueError(f"{text!r}: a loop is given as module:factory (a dotted module "
                         f"and a callable in it that makes a loop)")
    if sep and not _LABEL.match(label):
        raise ValueError(f"{text!r}: a label is letters, digits and . _ + -")
    if label in KNOWN and KNOWN[label].factory != spec:
        raise ValueError(f"{text!r}: {label} is a known loop's name; give this one "
                         f"another label")
    if at and label in KNOWN:
        raise ValueError(f"{text!r}: {label} is a known loop's name; give this one "
                         f"another label")
    if label not in KNOWN:
        register(label, spec + (f"@{root}" if at else ""))
    return label


def is_loop(name: str) -> bool:
    """Whether a column is a loop (not a script's baseline such as a C server)."""
    return name in KNOWN or name in _registered()


def spec_of(name: str) -> str:
    """The module:factory a loop name stands for (ValueError if unknown)."""
    if name in KNOWN:
        return KNOWN[name].factory
    found = _registered().get(name)
    if found is None:
        raise ValueError(f"unknown loop {name!r}; known: {', '.join(NAMES)}")
    return found.partition("@")[0]


def root_of(name: str) -> str | None:
    """The source tree a loop's children import from (given as
    label=module:factory@DIR), or None: this package's own."""
    if name in KNOWN:
        return None
    return _registered().get(name, "").partition("@")[2] or None


def answer_of(measure: Callable[[], dict], missing: str) -> dict:
    """What a measuring child prints: measure()'s result, or why the loop
    cannot run it ("unsupported"; `missing` names the API when the loop's
    exception says nothing) or what failed ("error")."""
    try:
        return measure()
    except (Unavailable, NotImplementedError) as exc:
        return {"unsupported": f"{type(exc).__name__}: {exc or missing}"}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def _why_missing(name: str, exc: ImportError) -> str:
    """The one line a loop that is not installed is skipped with."""
    known = KNOWN.get(name)
    if known is None or not known.dist or exc.name != known.factory.split(":")[0]:
        return f"{type(exc).__name__}: {exc}"
    where = f"; Python {known.python} only" if known.python else ""
    return f"not installed (pip install {known.dist}{where})"


def factory(name: str) -> LoopFactory:
    """Return a zero-argument callable making a new, not running loop.

    Raises Unavailable if the implementation cannot be imported or cannot make
    a loop (the check creates and closes one).
    """
    module_name, _, attribute = spec_of(name).partition(":")
    try:
        make = importlib.import_module(module_name)
        for part in attribute.split("."):
            make = getattr(make, part)
        make().close()
    except ImportError as exc:
        raise Unavailable(_why_missing(name, exc)) from exc
    except Exception as exc:
        raise Unavailable(f"{type(exc).__name__}: {exc}") from exc
    return make


def version(name: str) -> str:
    """The implementation's version string, for report headers."""
    if name == "asyncio":
        import platform

        return "stdlib " + platform.python_version()
    module_name = spec_of(name).partition(":")[0]
    if root_of(name):
        # This process's metadata describes its own install, not that tree.
        module = importlib.import_module(module_name)
        return f"{getattr(module, '__version__', 'unknown')} from {root_of(name)}"
    dist = KNOWN[name].dist if name in KNOWN else module_name.split(".")[0]
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        # An in-tree build (minloop during development) has no dist metadata.
        module = importlib.import_module(module_name)
        return str(getattr(module, "__version__", "unknown"))
