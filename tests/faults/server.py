"""The process under test: one scenario's server on one loop, with faults
on during each round and off for the harness's own I/O between rounds.

Driven over stdin/stdout by run.py, one JSON line each way:
  -> {"address": ...}                  (listening; faults still off)
  <- {"round": n}                      faults on; the clients run
  (SIGUSR1: the clients are done)      faults off; connections settle
  -> {"records": ..., "fds": ..., ...} the round's records and resources
  <- {"quit": true}
SIGUSR2 dumps every thread's stack (a hang).
"""
import asyncio
import faulthandler
import gc
import json
import os
import signal
import sys
import tempfile

from injector import Injector, clean_env
from serve import SCENARIOS, Book

SETTLE_SECONDS = 10.0


def make_loop(kind):
    if kind == "minloop":
        import minloop
        return minloop.new_event_loop()
    if kind == "uvloop":
        import uvloop
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def fds_watched(loop):
    if hasattr(loop, "stats"):
        return loop.stats().fds_watched
    selector = getattr(loop, "_selector", None)
    return None if selector is None else len(selector.get_map())


def resources(loop):
    gc.collect()
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return {"fds": len(os.listdir("/proc/self/fd")), "watched": fds_watched(loop), "rss": rss}


def accept_paused(book):
    """How many times this round's faults paused a server's accepting."""
    return sum(r["message"] == "socket.accept() out of system resource" for r in book.reports)


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    cfg = json.loads(sys.argv[1])
    faulthandler.enable()
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    done = False

    def clients_done(signum, frame):
        nonlocal done
        done = True

    signal.signal(signal.SIGUSR1, clients_done)
    loop = make_loop(cfg["loop"])
    asyncio.set_event_loop(loop)
    book = Book()
    loop.set_exception_handler(book.exception_handler)
    tmpdir = tempfile.mkdtemp(prefix="minloop-faults-")
    scenario = SCENARIOS[cfg["scenario"]](loop, book, tmpdir)
    injector = Injector(cfg["seed"], cfg["probability"], transient=cfg["transient"],
                        epoll_ctl=cfg.get("epoll_ctl", False))
    send({"address": loop.run_until_complete(scenario.start())})
    child_env = clean_env()

    async def until_done():
        while not done:
            await asyncio.sleep(0.01)

    async def settle():
        # Faults off: every connection the clients closed ends soon.
        for _ in range(int(SETTLE_SECONDS / 0.01)):
            if book.open == 0:
                return
            await asyncio.sleep(0.01)

    for line in sys.stdin:
        cmd = json.loads(line)
        if "quit" in cmd:
            break
        done = False
        injector.on(cmd["round"])
        if scenario.self_driven:
            loop.run_until_complete(scenario.drive(cfg, cmd["round"], child_env))
        else:
            loop.run_until_complete(until_done())
        injector.off()
        loop.run_until_complete(settle())
        paused = accept_paused(book)
        if paused:
            # A server whose accept() ran out of resources stops listening for
            # ACCEPT_RETRY_DELAY (asyncio's rule, kept by every loop here): its
            # socket is unwatched meanwhile, so counting now would read the
            # next round's listening socket as a leaked watched fd.
            loop.run_until_complete(asyncio.sleep(asyncio.constants.ACCEPT_RETRY_DELAY + 0.2))
        out = book.take()
        out["accept_paused"] = paused
        out.update(resources(loop), calls=injector.calls, injected=injector.injected, still_open=book.open)
        send(out)
    loop.run_until_complete(scenario.stop())
    loop.close()
    send({"closed": True, **resources(loop)})


if __name__ == "__main__":
    main()
