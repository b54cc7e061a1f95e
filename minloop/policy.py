"""The event loop policy API: minloop.install() and minloop.EventLoopPolicy.

Policies are deprecated from Python 3.14 on; prefer minloop.run() or
asyncio.run(..., loop_factory=minloop.new_event_loop).  This module is
imported only when one of its names is used (see minloop.__getattr__).
"""

import asyncio
import warnings

from ._asyncio_compat import DEFAULT_POLICY_BASE as _BasePolicy
from .base_events import new_event_loop


class EventLoopPolicy(_BasePolicy):
    """An asyncio policy whose new_event_loop() returns minloop loops."""

    def new_event_loop(self):
        return new_event_loop()

    def __repr__(self):
        return f'<{type(self).__name__}>'


def install():
    """Make asyncio.new_event_loop() (and asyncio.run) use minloop."""
    with warnings.catch_warnings():
        # Python 3.14 deprecates set_event_loop_policy(); install() is the
        # user's explicit request for it, so the warning would be noise.
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_event_loop_policy(EventLoopPolicy())
