"""Processes for the benchmarks: fresh interpreters, CPUs, CPU time, the machine.

Every measurement runs in a child interpreter started by ``module_command``,
which makes the child import the very minloop its parent imported (an
installed wheel, an editable install or an in-place build in a checkout)
rather than whatever its own sys.path would find first.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import signal
import subprocess
import sys
import time

# The directory holding the minloop package this code belongs to.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Put _ROOT first unless it is already on the path (then its place is kept: a
# site-packages directory must not move ahead of the standard library).
# The child's argv is ['-c', root, module, args...]: both are popped before
# the module runs, so its argument parser sees only args (and argv[0] is the
# module's file, as under -m).
_BOOT = ("import runpy, sys; root = sys.argv.pop(1); "
         "root in sys.path or sys.path.insert(0, root); "
         "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")


def module_command(module: str, *args: str, root: str | None = None) -> list[str]:
    """argv running ``python -m module args...`` with this package's minloop,
    or with the one in root (a source tree built in place: loops.root_of)."""
    return [sys.executable, "-c", _BOOT, root or _ROOT, module, *args]


def run_json(argv: list[str], timeout: float) -> dict:
    """Run argv; return the JSON object on the last line of its stdout, or
    {"error": ...} if it crashed, said nothing readable or timed out."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return communicate_json(proc, None, timeout)


def communicate_json(proc: subprocess.Popen, stdin: str | None, timeout: float) -> dict:
    """run_json for a started process (with pipes), given its stdin."""
    try:
        stdout, stderr = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"error": f"timed out after {timeout:g} s"}
    except BaseException:  # KeyboardInterrupt: no run outlives the bench
        proc.kill()
        proc.communicate()
        raise
    if proc.returncode == -signal.SIGINT:
        # Ctrl-C reached the child's process group first: the run was
        # interrupted, not failed.
        raise KeyboardInterrupt
    lines = stdout.strip().splitlines()
    if lines:
        try:
            answer = json.loads(lines[-1])
        except ValueError:
            answer = None
        if isinstance(answer, dict) and (proc.returncode == 0 or "error" in answer):
            return answer
    # A crash (segfault, uncaught exception): keep the end of what it said.
    tail = (stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"error": f"exit status {proc.returncode}: {tail}"}


def probe_loops(names: list[str], timeout: float = 120.0) -> dict[str, dict]:
    """{name: {"available": True, "version": ...} | {"available": False, "reason": ...}},
    each asked in a fresh interpreter (a loop that crashes on import crashes that one)."""
    from .loops import root_of

    found = {}
    for name in names:
        answer = run_json(module_command("minloop.bench.child", "--probe", name,
                                         root=root_of(name)), timeout)
        if "error" in answer:
            answer = {"available": False, "reason": answer["error"]}
        found[name] = answer
    return found


_tick_hz: list = []


def tick_hz() -> tuple[int, bool]:
    """(the kernel's scheduler tick in Hz, whether it was read): CONFIG_HZ
    from the kernel's config where it is readable, else 100, the coarsest
    Linux tick (a bound, not a guess).  The kernel splits a process's CPU
    time between user and system by what each tick interrupts, so the split
    is a sample of this rate."""
    if _tick_hz:
        return _tick_hz[0]
    import glob
    import gzip
    import re

    found = (100, False)
    candidates = ["/proc/config.gz", f"/boot/config-{platform.release()}"]
    for path in candidates + glob.glob("/lib/modules/*/build/.config")[:1]:
        try:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rt") as f:
                m = re.search(r"^CONFIG_HZ=(\d+)$", f.read(), re.M)
        except OSError:
            continue
        if m:
            found = (int(m.group(1)), True)
            break
    _tick_hz.append(found)
    return found


class Pinning:
    """The CPU for the server and the one for the load generator, or None for
    both where pinning is impossible (no sched_setaffinity, one usable CPU)
    or not wanted (enabled false; off says why)."""

    def __init__(self, enabled: bool = True, off: str = "--no-pin"):
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.server = self.client = None
        # One usable CPU: the server and the load generator take turns on it,
        # so the generator's CPU is part of every round trip's cost.
        self.shared = len(cpus) == 1
        if not enabled:
            self.describe = f"not pinned ({off})"
        elif not hasattr(os, "sched_setaffinity"):
            self.describe = "not pinned (no sched_setaffinity on this OS)"
        elif len(cpus) < 2:
            self.describe = "not pinned (fewer than two usable CPUs)"
        else:
            self.server, self.client = cpus[0], cpus[1]
            self.describe = f"server on CPU {self.server}, load generator on CPU {self.client}"

    def args(self, cpu: int | None) -> list[str]:
        return [] if cpu is None else ["--cpu", str(cpu)]


def machine_info() -> dict:
    cpu_model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "cpu": cpu_model,
        "cpu_count": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        # The children's collector runs at the interpreter's defaults.
        "gc_threshold": gc.get_threshold(),
    }
    if hasattr(os, "sched_getaffinity"):
        info["cpus_usable"] = len(os.sched_getaffinity(0))
    if hasattr(os, "getloadavg"):
        info["loadavg"] = os.getloadavg()[0]
    return info


class ServerProcess:
    """A server process for one measurement: started, announced, stopped.

    The protocol (minloop.bench.servers, and the C server of
    benchmarks/net_compare.py): one JSON line on stdout once listening,
    {"ready": true, <address>, "pid"} or {"unsupported": reason}; serve until
    stdin closes (or SIGTERM); then one JSON line {"cpu", "errors"}.
    """

    class Unsupported(Exception):
        """The server cannot run this kind on this loop (n/a, not a failure)."""

    class Failed(Exception):
        """The server did not start."""

    def __init__(self, argv: list[str], start_timeout: float = 30.0):
        import select
        import tempfile

        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True)
        self.exit_report: dict = {}
        line = ""
        try:
            ready, _, _ = select.select([self.proc.stdout], [], [], start_timeout)
            if not ready:
                raise self.Failed(f"server said nothing within {start_timeout:g} s")
            line = self.proc.stdout.readline()
            hello = json.loads(line)
        except ValueError:
            self.stop()
            raise self.Failed(f"server did not start: {self.stderr_tail() or line.strip()}") \
                from None
        except BaseException:
            self.stop()
            raise
        if "unsupported" in hello:
            self.stop()
            raise self.Unsupported(hello["unsupported"])
        self.address = hello
        self.pid = hello["pid"]

    def request(self, line: str, timeout: float = 30.0) -> dict:
        """Send one command line on the server's stdin (servers.py --count),
        return its one JSON line of answer."""
        import select

        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise self.Failed(f"server did not answer {line!r} within {timeout:g} s")
        answer = self.proc.stdout.readline()
        try:
            return json.loads(answer)
        except ValueError:
            raise self.Failed(f"server answered {line!r} with {answer.strip()!r}: "
                              f"{self.stderr_tail()}") from None

    def stderr_tail(self) -> str:
        """The last line the server wrote to stderr (kept once it stopped)."""
        if self.stderr.closed:
            return self._stderr_tail
        self.stderr.seek(0)
        lines = self.stderr.read().strip().splitlines()
        return lines[-1] if lines else ""

    def stop(self) -> None:
        """Close stdin (the polite stop), then SIGTERM, then SIGKILL."""
        import signal

        if self.proc.stdout.closed:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        for sig, wait in ((None, 5.0), (signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
            if sig is not None:
                self.proc.send_signal(sig)
            try:
                self.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        for line in self.proc.stdout.read().splitlines():
            try:
                self.exit_report = json.loads(line)
            except ValueError:
                pass
        self.proc.stdout.close()
        self._stderr_tail = self.stderr_tail()
        self.stderr.close()

    def problems(self) -> list[str]:
        found = [f"server reported: {e}" for e in self.exit_report.get("errors", [])]
        if self.proc.returncode not in (0, None):
            found.append(f"server exit status {self.proc.returncode}: {self.stderr_tail()}")
        return found
