"""The event loop policy API: minloop.install() and minloop.EventLoopPolicy.

Policies are deprecated from Python 3.14 on; prefer minloop.run() or
asyncio.run(..., loop_factory=minloop.new_event_loop).  This module is
imported only when one of its names is used (see minloop.__getattr__).
"""

import asyncio
import warnings

from .base_events import new_event_loop

# The platform's own default policy, so that what it offers besides loops
# (the child watcher API on Python < 3.14) keeps working after install().
_BasePolicy = getattr(asyncio.unix_events, '_UnixDefaultEventLoopPolicy', None)
if _BasePolicy is None:  # not a Unix build of asyncio
    _BasePolicy = getattr(asyncio.events, 'BaseDefaultEventLoopPolicy', None) \
        or asyncio.events._BaseDefaultEventLoopPolicy


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
