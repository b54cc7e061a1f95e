from contextvars import Context

from ._handle_bases import HandleBase, TimerHandleBase

# Siblings: TimerHandle extends asyncio.TimerHandle (hence asyncio.Handle),
# not minloop's Handle (see src/handle_bases.c).  The rest of their surface
# is asyncio's; get_context() is there on every Python (asyncio's from 3.12).
class Handle(HandleBase):
    def get_context(self) -> Context: ...

class TimerHandle(TimerHandleBase):
    def get_context(self) -> Context: ...
