"""The event loop policy API: minloop.install() and minloop.EventLoopPolicy.

Policies are deprecated from Python 3.14 on, to be removed in 3.16 with
asyncio's whole policy system (gh-127949); prefer minloop.run() or
asyncio.run(..., loop_factory=minloop.new_event_loop).  Where asyncio warns,
so does minloop, for the same use: accessing minloop.EventLoopPolicy as
accessing asyncio.DefaultEventLoopPolicy, calling install() as calling
asyncio.set_event_loop_policy() (each pointing at the caller's line).
minloop's own launcher (python -m minloop run) warns no more than
asyncio.run() does.  This module is imported only when one of its names is
used (see minloop.__getattr__).
"""

import warnings

from . import _asyncio_compat
from ._asyncio_compat import DEFAULT_POLICY_BASE as _BasePolicy
from .base_events import new_event_loop


class EventLoopPolicy(_BasePolicy):
    """An asyncio policy whose new_event_loop() returns minloop loops."""

    def new_event_loop(self):
        return new_event_loop()

    def __repr__(self):
        return f'<{type(self).__name__}>'


def warn_deprecated(name, stacklevel):
    """The DeprecationWarning asyncio gives for its policy API, for `name`
    (warnings._deprecated()'s wording), where asyncio gives it."""
    if _asyncio_compat.POLICIES_DEPRECATED:
        warnings.warn(f"{name!r} is deprecated and slated for removal in Python 3.16",
                      DeprecationWarning, stacklevel=stacklevel + 1)


def install():
    """Make asyncio.new_event_loop() (and asyncio.run) use minloop."""
    warn_deprecated('minloop.install', stacklevel=2)
    _install()


def _install():
    # asyncio's private setter where the public one warns: the warning, if
    # any, is install()'s, at its caller.
    _asyncio_compat.set_event_loop_policy(EventLoopPolicy())
