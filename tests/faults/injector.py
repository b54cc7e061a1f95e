"""libfiu's faults in the process under test, switched from Python.

The process is started with `preload_env()`: libfiu's posix wrappers and
`fiu_shim.c` (the seeded decider, plus accept4 and epoll_ctl, which libfiu
does not wrap).  Inside it, `Injector` binds each failure point to the
shim's decider once, then turns faults on for a round and off for the
harness's own I/O between rounds.
"""
import ctypes
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIU_LIBDIR = "/usr/lib/fiu"

# The calls a loop makes on a connection, a pipe and a wake-up fd.  The
# `/reduce` points shorten a read or write (a partial write) instead of
# failing it.
NET = ["recv", "recvfrom", "recvmsg", "send", "sendto", "sendmsg", "accept", "shutdown"]
RW = ["read", "write", "readv", "writev"]
POINTS = (
    [f"posix/io/net/{n}" for n in NET]
    + [f"posix/io/rw/{n}" for n in RW]
    + [f"posix/io/rw/{n}/reduce" for n in RW]
)


def shim_path():
    """Build the shim once per source version; its path."""
    src = os.path.join(HERE, "fiu_shim.c")
    cache = os.environ.get("MINLOOP_FAULTS_CACHE", os.path.join(HERE, ".build"))
    os.makedirs(cache, exist_ok=True)
    out = os.path.join(cache, f"fiu_shim-{int(os.stat(src).st_mtime)}.so")
    if not os.path.exists(out):
        tmp = f"{out}.{os.getpid()}.tmp"   # two test workers may build it at once
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-Wall", "-o", tmp, src, "-ldl"], check=True)
        os.replace(tmp, out)
    return out


def check_installed():
    """None when libfiu is here, else what is missing."""
    for f in ("fiu_run_preload.so", "fiu_posix_preload.so"):
        if not os.path.exists(os.path.join(FIU_LIBDIR, f)):
            return f"{FIU_LIBDIR}/{f} (apt-get install fiu-utils libfiu-dev)"
    return None


def preload_env(base=None):
    env = dict(os.environ if base is None else base)
    libs = [shim_path(), f"{FIU_LIBDIR}/fiu_run_preload.so", f"{FIU_LIBDIR}/fiu_posix_preload.so"]
    env["LD_PRELOAD"] = " ".join(libs)
    env.pop("FIU_ENABLE", None)
    env.pop("FIU_CTRL_FIFO", None)
    return env


def clean_env():
    """The environment for a peer process: no faults."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return env


class Injector:
    def __init__(self, seed, probability, transient=False, accept4=True, epoll_ctl=False):
        self.seed, self.probability = seed, probability
        self.transient, self.accept4, self.epoll_ctl = transient, accept4, epoll_ctl
        preloaded = os.environ.get("LD_PRELOAD", "").split()
        if not preloaded or "fiu_shim" not in preloaded[0]:
            raise RuntimeError("not started with injector.preload_env()")
        self.shim = ctypes.CDLL(preloaded[0])
        self.shim.shim_configure.argtypes = [ctypes.c_uint64, ctypes.c_double] + [ctypes.c_int] * 4
        self.shim.shim_calls.restype = self.shim.shim_injected.restype = ctypes.c_uint64
        fiu = ctypes.CDLL("libfiu.so.0")
        fiu.fiu_enable_external.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p]
        decide = ctypes.cast(self.shim.shim_decide, ctypes.c_void_p)
        self.shim.shim_off()
        for name in POINTS:
            if fiu.fiu_enable_external(name.encode(), 1, None, 0, decide) != 0:
                raise RuntimeError(f"libfiu refused {name}")
        # libfiu picks a failing call's errno with random(): seed it too.
        ctypes.CDLL(None).srandom(seed & 0xFFFFFFFF)
        self.calls = self.injected = 0

    def on(self, round_no):
        self.shim.shim_configure(self.seed * 1_000_003 + round_no, self.probability,
                                 int(self.transient), int(self.accept4), int(self.epoll_ctl and not self.transient), 1)

    def off(self):
        self.shim.shim_off()
        self.calls += self.shim.shim_calls()
        self.injected += self.shim.shim_injected()
        self.shim.shim_configure(0, 0.0, 0, 0, 0, 0)   # zero the counters


if __name__ == "__main__":
    print(check_installed() or shim_path())
    sys.exit(0)
