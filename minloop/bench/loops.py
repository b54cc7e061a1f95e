"""The event loop implementations the benchmarks compare, by name.

A loop that cannot be imported (or whose factory fails) is *unavailable*, with a
reason, rather than an error: the benchmarks skip it and say why.  The imports
happen on first use, not at module import, so a broken extension only affects
the runs that ask for it.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
from typing import Callable

LoopFactory = Callable[[], asyncio.AbstractEventLoop]

# Display order, also the order loops run in within each benchmark round.
NAMES = ("asyncio", "minloop", "uvloop", "rloop")


class Unavailable(Exception):
    """The loop implementation cannot be used in this interpreter."""


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


def _asyncio_factory() -> LoopFactory:
    # SelectorEventLoop by name, not asyncio.new_event_loop(): an installed
    # policy (uvloop.install(), say) must not silently change the baseline.
    return asyncio.SelectorEventLoop


def _module_factory(module: str) -> Callable[[], LoopFactory]:
    def resolve() -> LoopFactory:
        return importlib.import_module(module).new_event_loop

    return resolve


_RESOLVERS = {
    "asyncio": _asyncio_factory,
    "minloop": _module_factory("minloop"),
    "uvloop": _module_factory("uvloop"),
    "rloop": _module_factory("rloop"),
}


def factory(name: str) -> LoopFactory:
    """Return a zero-argument callable making a new, not running loop.

    Raises Unavailable if the implementation cannot be imported or cannot make
    a loop (the check creates and closes one).
    """
    try:
        resolve = _RESOLVERS[name]
    except KeyError:
        raise ValueError(f"unknown loop {name!r}; known: {', '.join(NAMES)}") from None
    try:
        make = resolve()
        make().close()
    except Exception as exc:
        raise Unavailable(f"{type(exc).__name__}: {exc}") from exc
    return make


def version(name: str) -> str:
    """The implementation's version string, for report headers."""
    if name == "asyncio":
        import platform

        return "stdlib " + platform.python_version()
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        # An in-tree build (minloop during development) has no dist metadata.
        module = importlib.import_module(name)
        return str(getattr(module, "__version__", "unknown"))
