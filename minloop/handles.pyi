from contextvars import Context

from ._handle_bases import HandleBase, ThreadSafeHandleBase, TimerHandleBase

# Siblings: TimerHandle extends asyncio.TimerHandle (hence asyncio.Handle),
# not minloop's Handle (see src/handle_bases.c).  The rest of their surface
# is asyncio's; get_context() is there on every Python (asyncio's from 3.12).
class Handle(HandleBase):
    def get_context(self) -> Context: ...

class TimerHandle(TimerHandleBase):
    def get_context(self) -> Context: ...

# What call_soon_threadsafe() returns from 3.14 (asyncio's class of that
# name is in its MRO there).
class _ThreadSafeHandle(ThreadSafeHandleBase):
    def get_context(self) -> Context: ...
