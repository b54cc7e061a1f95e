"""CPython's test.test_asyncio.test_runners, on the loop under test.

CPython's BaseTest.setUp installs a TestPolicy whose loops come from
BaseTest.new_loop(): an asyncio.BaseEventLoop with its selector and self-pipe
mocked out, so asyncio.run() and asyncio.Runner are tested without I/O.  Here
every test class is subclassed with new_loop() returning a real loop of the
implementation under test instead, so asyncio.run()/Runner drive our loop.

new_loop() keeps the contract BaseTest.tearDown checks: the loop carries a
``shutdown_ag_run`` flag that its shutdown_asyncgens() sets.  Unlike CPython's
mock, the wrapper then runs the loop's real shutdown_asyncgens().
"""
from ._harness import bind, new_event_loop

_module = bind("test_runners", {})


def new_loop(self):
    loop = new_event_loop()
    loop.shutdown_ag_run = False
    real_shutdown_asyncgens = loop.shutdown_asyncgens

    async def shutdown_asyncgens():
        loop.shutdown_ag_run = True
        await real_shutdown_asyncgens()

    loop.shutdown_asyncgens = shutdown_asyncgens
    return loop


def _on_tested_loop(cls):
    return type(cls.__name__, (cls,), {
        "new_loop": new_loop,
        "__module__": __name__,
        "__qualname__": cls.__name__,
        "__doc__": cls.__doc__,
    })


for _name, _cls in vars(_module).items():
    if (isinstance(_cls, type) and issubclass(_cls, _module.BaseTest)
            and _cls is not _module.BaseTest and _cls.__name__ == _name):
        globals()[_name] = _on_tested_loop(_cls)
CPYTHON_MODULE = "test_runners"
del _name, _cls
