"""`python -m minloop top PID` and the telemetry page it reads
(src/telemetry_page.h, minloop/page_reader.pyx, minloop/top.py).

asyncio's loop publishes nothing (a process on it shows "no minloop loops"):
the behaviour here is minloop's own, checked against minloop's own
figures (loop.stats()) and a real server in another process, in a real
terminal (tmux) too.
"""

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import minloop
from minloop import page_reader, top

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd pages: Linux"),
    pytest.mark.skipif(not page_reader.TELEMETRY, reason="telemetry compiled out"),
]

SERVER = textwrap.dedent("""
    import asyncio, sys, time
    import minloop

    async def handle(reader, writer):
        line = await reader.readline()
        cmd, _, arg = line.decode().partition(" ")
        if cmd == "sleep":
            time.sleep(float(arg))          # blocks the loop, GIL released
        elif cmd == "spin":
            end = time.monotonic() + float(arg)
            while time.monotonic() < end:   # blocks the loop, pure Python
                pass
        writer.write(b"ok\\n")
        await writer.drain()
        writer.close()

    async def tick():
        while True:
            await asyncio.sleep(0.01)

    async def main():
        if "--watchdog" in sys.argv:
            asyncio.get_running_loop().set_stall_handler(lambda report: None, 0.1)
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        asyncio.get_running_loop().create_task(tick())
        # Always one timer pending: the ticker's own is out of the heap for
        # the moment between its firing and the task's next sleep.
        asyncio.get_running_loop().call_later(3600, print)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    if "--asyncio" in sys.argv:
        asyncio.run(main())
    else:
        minloop.run(main())
""")


@pytest.fixture
def server(tmp_path):
    """Start SERVER with the given flags: (process, port); killed after."""
    procs = []

    def start(*flags):
        script = tmp_path / "server.py"
        script.write_text(SERVER)
        proc = subprocess.Popen([sys.executable, str(script), *flags],
                                stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        port = int(proc.stdout.readline())
        return proc, port

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def request(port, line):
    """Send `line` in a thread; the thread (join it)."""
    def run():
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(line.encode() + b"\n")
            s.recv(16)
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def run_top(pid, *args, user=None):
    return subprocess.run([sys.executable, "-m", "minloop", "top", str(pid), *args],
                          capture_output=True, text=True, timeout=60, user=user)


def page_path(loop):
    fd, _ = loop._telemetry_page
    assert fd >= 0
    return f"/proc/self/fd/{fd}"


# ---------------------------------------------------------------------------
# The page of a loop in this process

def test_live_loop_page_read_by_reader():
    loop = minloop.new_event_loop()
    try:
        fd, loop_id = loop._telemetry_page
        assert os.readlink(f"/proc/self/fd/{fd}").startswith(page_reader.PAGE_LINK)
        assert fd in top.find_pages(os.getpid())

        async def work():
            for _ in range(50):
                await asyncio.sleep(0)
            await asyncio.sleep(0.005)
            loop.call_exception_handler({"message": "counted"})

        loop.set_exception_handler(lambda loop, ctx: None)
        loop.run_until_complete(work())
        with page_reader.Page(page_path(loop)) as page:
            snap = page.read()
        stats = loop.stats()
        assert snap["pid"] == os.getpid()
        assert snap["loop_id"] == loop_id
        assert snap["tid"] == threading.get_native_id()
        assert not snap["closed"] and not snap["running"] and not snap["sleeping"]
        for key in ("callbacks", "iterations", "timers_fired", "exceptions", "fd_events"):
            assert snap[key] == getattr(stats, key), key
        assert snap["exceptions"] == 1
        lag = loop.lag.snapshot()
        assert snap["lag"][1] == lag.count == 1
        assert snap["lag"][4] == pytest.approx(lag.max)
        util = loop.utilization()
        assert snap["elapsed"] == pytest.approx(util.idle + util.active, abs=1e-6)
        assert snap["idle"] == pytest.approx(util.idle, abs=1e-6)
    finally:
        loop.close()


def test_page_while_running_from_another_thread():
    # The loop's thread writes, this one reads: running, then asleep.
    loop = minloop.new_event_loop()
    seen = []

    async def main():
        page = page_reader.Page(page_path(loop))
        def read_later():
            time.sleep(0.1)   # the loop is asleep in the poller by now
            return page.read()
        seen.append(await loop.run_in_executor(None, read_later))
        seen.append(page.read())                                   # busy
        page.close()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert seen[0]["running"] and seen[0]["sleeping"]
    assert seen[1]["running"] and not seen[1]["sleeping"]


def test_closed_loop_page_is_gone():
    loop = minloop.new_event_loop()
    fd, _ = loop._telemetry_page
    page = page_reader.Page(page_path(loop))
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    assert loop._telemetry_page[0] == -1
    assert fd not in top.find_pages(os.getpid()) or not os.path.exists(f"/proc/self/fd/{fd}") \
        or not os.readlink(f"/proc/self/fd/{fd}").startswith(page_reader.PAGE_LINK)
    assert page.read()["closed"]          # a mapping made before close() stays good
    assert loop.stats().callbacks >= 1    # and so does the loop's own
    page.close()


def test_page_is_sealed_against_readers():
    loop = minloop.new_event_loop()
    try:
        path = page_path(loop)
        with pytest.raises(OSError):
            os.truncate(path, 0)   # F_SEAL_SHRINK: no reader can make it fault
    finally:
        loop.close()


def test_reader_refuses_what_is_not_a_page():
    fd = os.memfd_create("not-a-page")
    try:
        os.write(fd, b"\0" * 8192)
        with pytest.raises(page_reader.PageError, match="not a minloop telemetry page"):
            page_reader.Page(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
@pytest.mark.main_interpreter("fork")
def test_forked_child_gets_its_own_page():
    loop = minloop.new_event_loop()
    try:
        loop.run_until_complete(asyncio.sleep(0))
        before = loop.stats().callbacks
        fd, _ = loop._telemetry_page
        parent_ino = os.fstat(fd).st_ino
        parent_page = page_reader.Page(page_path(loop))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:   # the child
            code = 1
            try:
                os.close(r)

                async def work():
                    for _ in range(100):
                        await asyncio.sleep(0)
                loop.run_until_complete(work())
                cfd, _ = loop._telemetry_page
                with page_reader.Page(f"/proc/self/fd/{cfd}") as page:
                    snap = page.read()
                os.write(w, repr((os.fstat(cfd).st_ino, snap["pid"],
                                  snap["callbacks"], loop.stats().callbacks)).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r) as f:
            child_ino, child_pid, page_callbacks, child_callbacks = eval(f.read())
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert child_ino != parent_ino
        assert child_pid == pid
        assert page_callbacks == child_callbacks >= before + 100   # the counts came along
        assert parent_page.read()["callbacks"] == loop.stats().callbacks == before
        assert parent_page.read()["pid"] == os.getpid()
        parent_page.close()
    finally:
        loop.close()


# ---------------------------------------------------------------------------
# top against a server in another process

def _loop_line(out):
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("LOOP"))
    return lines[header + 1].split()


def test_top_once_on_an_idle_server(server):
    proc, port = server()
    result = run_top(proc.pid, "--once", "--interval", "0.5")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"pid {proc.pid}" in out
    fields = _loop_line(out)
    # LOOP TID THREAD STATE UTIL CB/s p50 p99 max BUSY READY TIMERS FDS
    assert fields[1] == str(proc.pid)
    assert fields[3] in ("idle", "busy")
    assert float(fields[4].rstrip("%")) < 50           # a ticking server is mostly idle
    assert 20 < float(fields[5]) < 1000               # the 10 ms ticker: ~100/s
    assert fields[6] != "-"                            # timers fired: a lag figure
    assert int(fields[-2]) >= 1                        # the hour-long timer
    assert int(fields[-1]) >= 1                        # the listening socket
    assert "STALL" not in out


@pytest.mark.parametrize("watchdog", [False, True], ids=["plain", "watchdog"])
@pytest.mark.parametrize("block", ["sleep", "spin"])
def test_top_once_shows_a_stall_while_it_lasts(server, block, watchdog):
    proc, port = server(*(["--watchdog"] if watchdog else []))
    thread = request(port, f"{block} 3")
    try:
        time.sleep(0.3)
        result = run_top(proc.pid, "--once", "--interval", "0.5")
    finally:
        thread.join()
    assert result.returncode == 0, result.stderr
    out = result.stdout
    fields = _loop_line(out)
    assert fields[3] == "busy"
    assert float(fields[4].rstrip("%")) > 95
    assert "STALL" in out, out
    if watchdog:
        # The watchdog's note: the task and the line it blocks on.
        assert "callback: <Task pending name=" in out and "handle()" in out
        lines = (9,) if block == "sleep" else (12, 13)
        assert any(f"server.py:{n} in handle" in out for n in lines), out
    else:
        assert "loop.set_stall_handler() armed" in out
    # Once the handler returns, the stall is gone.
    result = run_top(proc.pid, "--once", "--interval", "0.3")
    assert "STALL" not in result.stdout, result.stdout


def test_top_errors(server):
    result = run_top(2 ** 22 + 12345, "--once")
    assert result.returncode == 1
    assert "no process with pid" in result.stderr
    # A process with no loop, and one on asyncio's loop: nothing to show.
    proc, _ = server("--asyncio")
    result = run_top(proc.pid, "--once", "--interval", "0.1")
    assert result.returncode == 1
    assert f"no minloop loops in pid {proc.pid}" in result.stderr


def test_top_permission_denied(server, monkeypatch, capsys):
    if os.geteuid() != 0:
        result = run_top(1, "--once", "--interval", "0.1")   # init: root's
        assert result.returncode == 1
        assert "permission denied" in result.stderr
        return
    # Root may read every process's fds: the kernel's refusal, as another
    # user would meet it.
    proc, _ = server()

    def refuse(path):
        raise PermissionError(13, "Permission denied", path)
    monkeypatch.setattr(top.os, "listdir", refuse)
    assert top.main([str(proc.pid), "--once", "--interval", "0.1"]) == 1
    err = capsys.readouterr().err
    assert f"permission denied reading /proc/{proc.pid}/fd" in err


# ---------------------------------------------------------------------------
# A real terminal

@pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux")
def test_top_in_tmux_shows_a_stall(server, tmp_path):
    proc, port = server("--watchdog")
    session = f"minloop-top-test-{os.getpid()}"
    env_python = sys.executable
    subprocess.run(["tmux", "-L", session, "new-session", "-d", "-s", session,
                    "-x", "150", "-y", "30",
                    f"{env_python} -m minloop top {proc.pid} --interval 0.3"],
                   check=True, cwd=os.getcwd())

    def capture():
        return subprocess.run(["tmux", "-L", session, "capture-pane", "-p", "-t", session],
                              capture_output=True, text=True).stdout

    try:
        deadline = time.monotonic() + 20
        while "LOOP" not in capture() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "idle" in capture() or "busy" in capture()
        thread = request(port, "sleep 3")
        try:
            deadline = time.monotonic() + 2.5
            screen = ""
            while time.monotonic() < deadline:
                screen = capture()
                if "server.py:9 in handle" in screen:
                    break
                time.sleep(0.1)
            (tmp_path / "capture.txt").write_text(screen)
            assert "STALL" in screen, screen
            assert "callback: <Task pending" in screen, screen
            assert "server.py:9 in handle" in screen, screen
        finally:
            thread.join()
        deadline = time.monotonic() + 5
        while "STALL" in capture() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "STALL" not in capture()
    finally:
        subprocess.run(["tmux", "-L", session, "kill-server"], capture_output=True)


def test_a_build_without_telemetry_says_so(monkeypatch, capsys):
    # As loop.stats() does in a MINLOOP_NO_TELEMETRY build: NotImplementedError,
    # and the command line says why.
    monkeypatch.setattr(page_reader, "TELEMETRY", False)
    with pytest.raises(NotImplementedError, match="MINLOOP_NO_TELEMETRY=1"):
        top.Top(os.getpid())
    assert top.main([str(os.getpid()), "--once"]) == 1
    assert "minloop top is not available" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# Rendering, from made-up reads of a page

_BUCKETS = len(page_reader.bucket_bounds())
_EMPTY_HIST = ((0,) * _BUCKETS, 0, 0.0, 0.0, 0.0)


def fake_read(t, elapsed, idle, **over):
    """A page read as Page.read() gives it (only what top uses)."""
    snap = {"time": t, "loop_id": 1, "interp": 0, "pid": os.getpid(),
            "tid": threading.get_native_id(), "closed": False, "running": True,
            "sleeping": True, "woke": t, "clock_seq": 2, "callbacks": 10,
            "iterations": 10, "fd_events": 0, "exceptions": 0, "timers_fired": 0,
            "ready": 0, "timers": 1, "fds": 1, "elapsed": elapsed, "idle": idle,
            "lag": _EMPTY_HIST, "busy": _EMPTY_HIST, "stall_threshold": 0.0,
            "note": None, "thread_name": "", "stalls": 0, "stall": _EMPTY_HIST}
    snap.update(over)
    return snap


class FakeTop:
    """What render() needs of a Top, over given LoopViews."""

    def __init__(self, *views, pid=None):
        self.pid = os.getpid() if pid is None else pid
        self.stall_threshold = 0.1
        self.errors = []
        self._views = views

    def rows(self):
        return [view.row(self.stall_threshold) for view in self._views]


def test_idle_loop_never_shows_negative_utilization():
    # Idle read a nanosecond above elapsed (the two words are read apart):
    # 0.0%, never -0.0%.
    view = top.LoopView(None, fake_read(100.0, 10.0, 9.0))
    view.sample(fake_read(100.3, 10.3, 9.300000001))
    row = view.row(0.1)
    assert row["util"] == 0.0
    lines = top.render(FakeTop(view), 0.3)
    assert "-0.0%" not in "\n".join(lines)
    assert "  0.0%" in _row_text(lines)


def _row_text(lines):
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("LOOP"))
    return lines[header + 1]


CHILD = textwrap.dedent("""
    import asyncio, os, sys
    import minloop

    async def main():
        loop = asyncio.get_running_loop()
        print("ready", flush=True)
        # "close": end this loop and live on, loopless; "exit": end.
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if line.strip() == "exit":
            print("closed", flush=True)
            os._exit(0)   # the loop still open: its page goes with the process
        return line.strip()

    what = minloop.run(main())
    print("closed", flush=True)
    if what == "close":
        sys.stdin.readline()
""")


@pytest.mark.parametrize("how", ["exit", "close"])
def test_top_ends_cleanly_when_the_process_exits_or_closes_its_loops(tmp_path, how):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        watcher = subprocess.Popen(
            [sys.executable, "-m", "minloop", "top", str(child.pid), "--interval", "0.1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Its first frame: it has seen the loop.
        for line in watcher.stdout:
            if line.lstrip().startswith("LOOP"):
                break
        child.stdin.write(how + "\n")
        child.stdin.flush()
        assert child.stdout.readline() == "closed\n"
        out, err = watcher.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
        for f in (child.stdin, child.stdout):
            if not f.closed:
                f.close()
    assert watcher.returncode == 0, err
    assert "no minloop loops" not in out + err
    expected = (f"process {child.pid} exited" if how == "exit"
                else f"process {child.pid}: its loops closed")
    assert out.rstrip().splitlines()[-1] == f"minloop top: {expected}", out


def _a_loop_run_in_a_thread(name):
    """A closed-over loop, run once in a thread named `name`; (loop, page)."""
    loop = minloop.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(asyncio.sleep(0),),
                              name=name)
    thread.start()
    thread.join()
    return loop, page_reader.Page(page_path(loop))


def test_top_fits_the_terminal_and_names_the_python_thread():
    loop, page = _a_loop_run_in_a_thread("worker-loop")
    try:
        view = top.LoopView(page, page.read())
        view.sample(page.read())
        fake = FakeTop(view)
        # 80 columns: every figure's column is there, nothing is cut.
        lines = top.render(fake, 1.0, width=80)
        header = next(line for line in lines if line.lstrip().startswith("LOOP"))
        for title in ("UTIL", "CB/s", "LAG p50", "p99", "max", "BUSY max", "READY",
                      "TIMERS", "FDS"):
            assert title in header
        assert all(len(line) <= 80 for line in lines), lines
        assert header.rstrip().endswith("FDS")
        # 120 columns: the thread column, with Python's name for the thread
        # (the OS's is "python" below 3.14).
        lines = top.render(fake, 1.0, width=120)
        assert all(len(line) <= 120 for line in lines), lines
        assert "THREAD" in lines[3]
        assert _row_text(lines).split()[2] == "worker-loop"
        # A long command line is cut at the terminal's width, and says so.
        fake.pid = os.getpid()
        long = top._cmdline(os.getpid())
        lines = top.render(fake, 1.0, width=40)
        if len(f"minloop top  pid {fake.pid}  {long}") > 40:
            assert len(lines[0]) == 40 and lines[0].endswith("...")
        lines = top.render(fake, 1.0, width=1000)
        assert lines[0].endswith(long)
    finally:
        page.close()
        loop.close()


@pytest.mark.parametrize("interp, loop_id", [(0, 1), (0, 9999), (2, 1546), (9, 9999)])
def test_a_sub_interpreters_loop_label_widens_its_column(interp, loop_id):
    # INTERPRETER:NUMBER is wider than a main interpreter's number: the LOOP
    # column widens, and at 80 columns every figure still fits (the suite
    # run in a sub-interpreter had made loop 1546: its row was 81 wide).
    # Labels of up to 6 characters fit; a wider one widens the table.
    view = top.LoopView(None, fake_read(100.0, 10.0, 5.0, interp=interp, loop_id=loop_id))
    view.sample(fake_read(101.0, 11.0, 5.5, interp=interp, loop_id=loop_id))
    label = str(loop_id) if interp == 0 else f"{interp}:{loop_id}"
    lines = top.render(FakeTop(view, pid=0), 1.0, width=80)
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("LOOP"))
    header, row = lines[at], lines[at + 1]
    assert row.split()[0] == label
    assert len(row) <= 80 and len(header) <= 80, (row, header)
    assert header.rstrip().endswith("FDS") and row.split()[-1] == "1"   # fds


def _hist_of(*values):
    bounds = page_reader.bucket_bounds()
    counts = [0] * len(bounds)
    for v in values:
        counts[next(i for i, b in enumerate(bounds) if v <= b)] += 1
    return (tuple(counts), len(values), sum(values), min(values), max(values))


def test_top_shows_the_stalls_of_each_interval():
    # With the watchdog armed: its count, from the page, exact.
    view = top.LoopView(None, fake_read(100.0, 10.0, 5.0, stall_threshold=0.1))
    view.sample(fake_read(101.0, 11.0, 5.5, stall_threshold=0.1,
                          stall=_hist_of(0.2, 0.21)))
    text = "\n".join(top.render(FakeTop(view), 1.0))
    assert "2 stalls ended over the interval, the longest 0.21s" in text
    # The next interval had none.
    view.start_interval()
    view.sample(fake_read(102.0, 12.0, 6.5, stall_threshold=0.1,
                          stall=_hist_of(0.2, 0.21)))
    assert "stall" not in "\n".join(top.render(FakeTop(view), 1.0)).split("LOOP")[1]
    # Without it: the stalls top saw in its own samples (busy in one
    # callback across samples 0.1 s apart), at least as long as seen.
    view = top.LoopView(None, fake_read(100.0, 10.0, 5.0), threshold=0.1)
    for i in range(4):
        view.sample(fake_read(100.1 + i / 10, 10.1 + i / 10, 5.0, sleeping=False,
                              callbacks=11))
    view.sample(fake_read(100.5, 10.5, 5.0))
    text = "\n".join(top.render(FakeTop(view), 0.5))
    assert "1 stall ended over the interval, the longest >= 0.30s (as sampled)" in text
