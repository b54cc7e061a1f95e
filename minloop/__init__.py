"""minloop: a compiled drop-in replacement for asyncio's event loop.

    import minloop
    minloop.run(main())                                        # like asyncio.run
    asyncio.run(main(), loop_factory=minloop.new_event_loop)  # Python 3.12+
    uvicorn app:app --loop minloop:new_event_loop
"""

import sys

if sys.platform == "win32":  # pragma: no cover
    raise ImportError(
        "minloop supports Linux, macOS and the BSDs (it is built on epoll and "
        "kqueue); on Windows use asyncio's default event loop")

# Before any compiled module is imported: a sub-interpreter runs copies of
# its own (_subinterpreters.py says why).
from . import _subinterpreters
_subinterpreters.install()

from . import _asyncio_compat
from .base_events import Loop, new_event_loop
from .loop import poller_backend_name
from .runners import run

__version__ = "0.1.0"

__all__ = ("Loop", "new_event_loop", "run", "install", "EventLoopPolicy",
           "poller_backend_name")
if _asyncio_compat.POLICIES_DEPRECATED:
    # As asyncio's __all__ leaves out DefaultEventLoopPolicy there: a star
    # import must not warn.
    __all__ = tuple(name for name in __all__ if name != "EventLoopPolicy")


def __getattr__(name):
    # The policy API is deprecated from Python 3.14 on: touching it only
    # when asked keeps `import minloop` free of DeprecationWarnings.
    if name in ("EventLoopPolicy", "install"):
        from . import policy
        if name == "EventLoopPolicy":
            # Each access warns, as asyncio.DefaultEventLoopPolicy's does.
            policy.warn_deprecated("minloop.EventLoopPolicy", stacklevel=2)
        return getattr(policy, name)
    raise AttributeError(f"module 'minloop' has no attribute {name!r}")
