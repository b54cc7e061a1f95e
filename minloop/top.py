"""``python -m minloop top PID``: a live view of a running process's loops.

Each minloop loop keeps its telemetry in a memfd page of its own
(src/telemetry_page.h); top finds a process's pages in /proc/PID/fd (links
named "/memfd:minloop-loop"), maps each read-only (minloop/page_reader.pyx)
and shows, per loop, over each refresh interval: utilization, timer lag
p50/p99/max, the longest busy stretch, callbacks/s, the ready batch, timers
and fds held, and a stall -- the loop inside one callback for longer than
--stall -- while it lasts.  The target does nothing for it: no syscall, no
signal, no thread; a loop wedged in a callback is seen as it is.  With the
loop's stall watchdog armed (loop.set_stall_handler), the stalled task and
the line it is on come from the watchdog's note in the page.

    python -m minloop top PID [--interval 1.0] [--stall 0.1] [--once]
    python -m minloop top PID --tasks      (Python 3.14+: minloop/top_tasks.py)

--once prints one plain snapshot (the figures over one interval) and exits:
for scripts and tests.  Linux only; the target must be the same user's (or
top run as root).  docs/telemetry.md, "Watching another process: top".
"""

import argparse
import os
import sys
import time

from . import page_reader
from .page_reader import PAGE_LINK, Page, PageError

# How often pages are read between redraws: a stall is timed to this.
SAMPLE_PERIOD = 0.1

_BOUNDS = page_reader.bucket_bounds()


class TopError(Exception):
    """What top tells the user and exits with status 1 on."""


class TargetGone(Exception):
    """The process watched exited, or closed its loops: top says so and
    ends (status 0)."""


def _check_build():
    if not page_reader.TELEMETRY:
        raise NotImplementedError(
            "minloop top is not available: this minloop was built with "
            "MINLOOP_NO_TELEMETRY=1, which compiles the loop's telemetry out")
    if not page_reader.SHAREABLE:
        raise NotImplementedError(
            "minloop top is not available here: it reads loops' telemetry "
            "pages, which are Linux memfds")


def find_pages(pid):
    """{fd: path} of the loops' pages process `pid` has open."""
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except FileNotFoundError:
        raise TopError(f"no process with pid {pid}") from None
    except PermissionError:
        raise TopError(f"permission denied reading {fd_dir}: run top as the "
                       f"process's user (or as root)") from None
    found = {}
    for name in fds:
        path = os.path.join(fd_dir, name)
        try:
            link = os.readlink(path)
        except OSError:
            continue   # closed since
        if link.startswith(PAGE_LINK):
            found[int(name)] = path
    return found


def _exited(pid):
    """Whether `pid` is gone or a zombie (exited, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # "pid (comm) state ...": comm may hold spaces and parentheses.
            return f.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _percentile(deltas, count, p, high):
    """p-th percentile (seconds) of bucket counts `deltas`, interpolated
    in the bucket, capped by `high` (the histogram's max)."""
    if count <= 0:
        return 0.0
    rank = p / 100.0 * count
    cum = 0
    for i, c in enumerate(deltas):
        if c and cum + c >= rank:
            lo = _BOUNDS[i - 1] if i else 0.0
            hi = min(_BOUNDS[i], high) if high > 0 else _BOUNDS[i]
            lo = min(lo, hi)
            return lo + (hi - lo) * ((rank - cum) / c)
        cum += c
    return high


def _interval_hist(new, old):
    """(count, p50, p99, max) of the values recorded between two reads of
    a histogram ((counts, count, sum, min, max)).  The max is the top of
    the highest bucket reached (exact when it holds the histogram's max)."""
    counts = new[0]
    base = old[0] if old is not None else (0,) * len(counts)
    deltas = [max(a - b, 0) for a, b in zip(counts, base)]
    n = sum(deltas)
    if n == 0:
        return 0, 0.0, 0.0, 0.0
    top = max(i for i, c in enumerate(deltas) if c)
    hi = _BOUNDS[top]
    lo = _BOUNDS[top - 1] if top else 0.0
    high = new[4] if lo < new[4] <= hi else hi
    return n, _percentile(deltas, n, 50, high), _percentile(deltas, n, 99, high), high


class LoopView:
    """One loop's page and what top remembers of it."""

    def __init__(self, page, first, threshold=0.1):
        self.page = page
        self.first = first          # the read the interval starts from
        self.last = first
        self.threshold = threshold
        self.key = None             # (callbacks, iterations, clock seq) while busy
        self.stuck_since = None     # first read that saw `key`
        # Stalls top saw end in the interval (sampled: at least this long).
        self.ended = []

    def sample(self, snap):
        key = (snap["callbacks"], snap["iterations"], snap["clock_seq"])
        busy = snap["running"] and not snap["sleeping"]
        if busy and key == self.key:
            pass
        else:
            if self.stuck_since is not None:
                seen = self.last["time"] - self.stuck_since
                if seen >= self.threshold:
                    self.ended.append(seen)
            if busy:
                self.key, self.stuck_since = key, snap["time"]
            else:
                self.key = self.stuck_since = None
        self.last = snap

    def start_interval(self):
        self.first = self.last
        self.ended = []

    def stall(self, threshold):
        """(seconds at least, exact?, callback, where) of the callback the
        loop is stuck in now, or None."""
        snap = self.last
        if self.stuck_since is None:
            return None
        seen = snap["time"] - self.stuck_since
        note = snap["note"]
        if note and note[0] == snap["callbacks"] and note[0]:
            # The watchdog flagged this very callback: its start and lines.
            return snap["time"] - note[1], True, note[2], note[3]
        if seen < threshold:
            return None
        return seen, False, "", ""

    def row(self, threshold):
        """The figures over the interval (first read to last)."""
        a, b = self.first, self.last
        dt = b["time"] - a["time"]
        elapsed = b["elapsed"] - a["elapsed"]
        # The idle and elapsed words are read a few instructions apart: on an
        # idle loop idle may come out a hair above elapsed, which would print
        # as -0.0%.
        active = min(max(elapsed - (b["idle"] - a["idle"]), 0.0), elapsed)
        if not b["running"] and elapsed <= 0:
            util = None
        else:
            util = active / elapsed if elapsed > 0 else 0.0
        lag = _interval_hist(b["lag"], a["lag"])
        busy = _interval_hist(b["busy"], a["busy"])
        if b["running"] and not b["sleeping"]:
            state, busy_now = "busy", b["time"] - b["woke"]
        elif b["running"]:
            state, busy_now = "idle", 0.0
        else:
            state, busy_now = "stopped", 0.0
        if b["closed"]:
            state = "closed"
        if b["stall_threshold"]:
            # The watchdog counts each stall as it ends, timed exactly.
            stalls = _interval_hist(b["stall"], a["stall"])
            stalls = (stalls[0], stalls[3], True)
        else:
            stalls = (len(self.ended), max(self.ended, default=0.0), False)
        return {
            "loop": _loop_label(b["interp"], b["loop_id"]), "tid": b["tid"], "state": state,
            "thread": b.get("thread_name") or "",
            "stalls": stalls,
            "util": util,
            "cbs": (b["callbacks"] - a["callbacks"]) / dt if dt > 0 else 0.0,
            "lag": lag, "busy": busy, "busy_now": busy_now,
            "busy_max": max(busy[3], busy_now),
            "ready": b["ready"], "timers": b["timers"], "fds": b["fds"],
            "watchdog": b["stall_threshold"],
            "stall": self.stall(threshold),
        }


class Top:
    """The loops of one process, sampled."""

    def __init__(self, pid, stall=0.1):
        _check_build()
        self.pid = pid
        self.stall_threshold = stall
        self.views = {}   # fd -> LoopView
        self.errors = []
        self.seen = False   # a loop was shown: its going is an end, not an error

    def scan(self):
        """Map pages that appeared, forget those gone; sample them all."""
        try:
            found = find_pages(self.pid)
        except TopError:
            if self.seen and _exited(self.pid):
                raise TargetGone(f"process {self.pid} exited") from None
            raise
        for fd in list(self.views):
            if fd not in found:
                self.views.pop(fd).page.close()
        self.errors = []
        for fd, path in found.items():
            view = self.views.get(fd)
            if view is None:
                try:
                    page = Page(path)
                    view = LoopView(page, page.read(), self.stall_threshold)
                except FileNotFoundError:
                    continue   # closed since the scan
                except PageError as exc:
                    self.errors.append(str(exc))
                    continue
                except PermissionError:
                    raise TopError(f"permission denied opening {path}: run top as the "
                                   f"process's user (or as root)") from None
                self.views[fd] = view
            snap = view.page.read()
            if snap["closed"]:
                self.views.pop(fd).page.close()
                continue
            view.sample(snap)
        if self.views:
            self.seen = True
        elif self.seen and not self.errors:
            if _exited(self.pid):
                raise TargetGone(f"process {self.pid} exited")
            raise TargetGone(f"process {self.pid}: its loops closed")
        if not self.views and not self.errors:
            raise TopError(
                f"no minloop loops in pid {self.pid} (none made yet, or its minloop "
                f"publishes none: built with MINLOOP_NO_TELEMETRY=1, or not on Linux)")

    def start_interval(self):
        for view in self.views.values():
            view.start_interval()

    def rows(self):
        return [self.views[fd].row(self.stall_threshold)
                for fd in sorted(self.views, key=lambda fd: (self.views[fd].last["interp"],
                                                             self.views[fd].last["loop_id"]))]

    def close(self):
        for view in self.views.values():
            view.page.close()
        self.views.clear()


def _ms(seconds):
    if seconds >= 10:
        return f"{seconds:.1f}s"
    if seconds >= 1:
        return f"{seconds:.2f}s"
    if seconds >= 0.001:
        return f"{seconds * 1e3:.1f}ms"
    return f"{seconds * 1e6:.0f}us"


def _loop_label(interp, loop_id):
    """A loop of the main interpreter by its number; a sub-interpreter's,
    which numbers its own loops, as INTERPRETER:NUMBER."""
    return str(loop_id) if interp == 0 else f"{interp}:{loop_id}"


def _thread_name(pid, tid):
    try:
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "-"


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


# The columns: (title, width, left-aligned), full and compact; render()
# takes the widest layout that fits the terminal, dropping THREAD, then TID.
_FULL = (("LOOP", 6, 0), ("TID", 7, 0), ("THREAD", 15, 1), ("STATE", 7, 1),
         ("UTIL", 6, 0), ("CB/s", 9, 0), ("LAG p50", 8, 0), ("p99", 8, 0), ("max", 8, 0),
         ("BUSY max", 9, 0), ("READY", 6, 0), ("TIMERS", 7, 0), ("FDS", 5, 0))
_COMPACT = (("LOOP", 4, 0), ("TID", 7, 0), ("THREAD", 15, 1), ("STATE", 7, 1),
            ("UTIL", 6, 0), ("CB/s", 7, 0), ("LAG p50", 7, 0), ("p99", 7, 0), ("max", 7, 0),
            ("BUSY max", 8, 0), ("READY", 5, 0), ("TIMERS", 6, 0), ("FDS", 4, 0))


def _layouts():
    yield _FULL
    yield _COMPACT
    yield tuple(c for c in _COMPACT if c[0] != "THREAD")
    yield tuple(c for c in _COMPACT if c[0] not in ("THREAD", "TID"))


def _layout(width, loop_width=0):
    """The widest layout that fits `width`, its LOOP column as wide as the
    widest label (a sub-interpreter's INTERPRETER:NUMBER needs more)."""
    columns = _FULL
    for columns in _layouts():
        columns = tuple((t, max(w, loop_width) if t == "LOOP" else w, left)
                        for t, w, left in columns)
        if width is None or sum(w for _, w, _ in columns) + len(columns) - 1 <= width:
            return columns
    return columns


def _line(columns, values):
    return " ".join((f"{values[title][:w]:<{w}}" if left else f"{values[title]:>{w}}")
                    for title, w, left in columns)


def _fit(text, width):
    """text cut to width with an ellipsis (whole where width is None)."""
    if width is None or len(text) <= width:
        return text
    return text[:max(width - 3, 0)] + "..."


def render(top, interval, color=False, width=None):
    """The lines of one frame (`width`: the terminal's columns; None: as
    wide as the figures need, for a pipe)."""
    rows = top.rows()
    now = time.strftime("%H:%M:%S")
    columns = _layout(width, max((len(r["loop"]) for r in rows), default=0))
    lines = [_fit(f"minloop top  pid {top.pid}  {_cmdline(top.pid)}", width),
             f"{len(rows)} loop{'s' if len(rows) != 1 else ''}, over {interval:g}s,"
             f" stall: one callback for {top.stall_threshold:g}s+   {now}",
             "", _line(columns, {title: title for title, _, _ in columns})]
    for r in rows:
        util = "-" if r["util"] is None else f"{r['util'] * 100:5.1f}%"
        lag_n, p50, p99, lmax = r["lag"]
        lag = [_ms(p50), _ms(p99), _ms(lmax)] if lag_n else ["-", "-", "-"]
        lines.append(_line(columns, {
            "LOOP": r["loop"], "TID": str(r["tid"] or "-"),
            "THREAD": r["thread"] or _thread_name(top.pid, r["tid"]),
            "STATE": r["state"], "UTIL": util, "CB/s": f"{r['cbs']:.0f}",
            "LAG p50": lag[0], "p99": lag[1], "max": lag[2],
            "BUSY max": _ms(r["busy_max"]), "READY": str(r["ready"]),
            "TIMERS": str(r["timers"]), "FDS": str(r["fds"])}))
        count, longest, exact = r["stalls"]
        if count:
            lines.append(f"     {count} stall{'s' if count != 1 else ''} ended over the "
                         f"interval, the longest {'' if exact else '>= '}{longest:.2f}s"
                         + ("" if exact else " (as sampled)"))
        stall = r["stall"]
        if stall is not None:
            seconds, exact, callback, where = stall
            text = f"STALL {'' if exact else '>= '}{seconds:.2f}s in one callback"
            if r["busy_now"] > seconds + 0.05:
                text += f" (loop busy {r['busy_now']:.2f}s since its last poll)"
            if color:
                text = f"\x1b[1;41m{text}\x1b[0m"
            lines.append("     " + text)
            if callback:
                lines.append(f"       callback: {callback}")
            if where:
                lines.append(f"       at {where}")
            if not exact and not r["watchdog"]:
                lines.append("       (loop.set_stall_handler() armed in the process would "
                             "name the callback and its line)")
    for err in top.errors:
        lines.append(f"  skipped: {err}")
    return lines


def run(pid, interval=1.0, stall=0.1, once=False, out=sys.stdout):
    top = Top(pid, stall)
    period = min(SAMPLE_PERIOD, interval)
    try:
        top.scan()
        if once:
            deadline = time.monotonic() + interval
            while time.monotonic() < deadline:
                time.sleep(min(period, max(deadline - time.monotonic(), 0)))
                top.scan()
            out.write("\n".join(render(top, interval)) + "\n")
            return 0
        tty = out.isatty()
        if tty:
            out.write("\x1b[?25l")   # no cursor
        try:
            while True:
                deadline = time.monotonic() + interval
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    time.sleep(min(period, left))
                    top.scan()
                width = os.get_terminal_size(out.fileno()).columns if tty else None
                lines = render(top, interval, color=tty, width=width)
                if tty:
                    out.write("\x1b[H" + "".join(line[:width] + "\x1b[K\n" for line in lines)
                              + "\x1b[J")
                else:
                    out.write("\n".join(lines) + "\n\n")
                out.flush()
                top.start_interval()
        finally:
            if tty:
                out.write("\x1b[?25h")
                out.flush()
    except KeyboardInterrupt:
        return 0
    except TargetGone as exc:
        out.write(f"minloop top: {exc}\n")
        out.flush()
        return 0
    finally:
        top.close()


def _loop_labels(pid):
    """{thread id: loop label} of the process's minloop loops, or {}: tasks
    on asyncio's loop (or on none) are still tasks."""
    labels = {}
    try:
        view = Top(pid)
        view.scan()
        for row in view.rows():
            labels[row["tid"]] = row["loop"]
        view.close()
    except (TopError, NotImplementedError):
        pass
    return labels


def _tasks(pid):
    """--tasks: the tasks' table once (minloop/top_tasks.py)."""
    from . import top_tasks
    try:
        return top_tasks.run(pid, sys.stdout, _loop_labels)
    except top_tasks.TasksError as exc:
        raise TopError(str(exc)) from None


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m minloop top",
        description="A live view of a running process's minloop loops "
                    "(read from their telemetry pages; the process does nothing for it).")
    parser.add_argument("pid", type=int, help="the process to watch")
    parser.add_argument("--interval", type=float, default=1.0,
                        help="seconds between refreshes (default 1)")
    parser.add_argument("--stall", type=float, default=0.1,
                        help="show a callback running this long as a stall (default 0.1 s)")
    parser.add_argument("--once", action="store_true",
                        help="print one snapshot (over one interval) and exit")
    parser.add_argument("--tasks", action="store_true",
                        help="print the process's pending tasks, each with where it "
                             "awaits, and exit (Python 3.14+: minloop/top_tasks.py)")
    args = parser.parse_args(argv)
    if not args.interval > 0 or not args.stall > 0:
        parser.error("--interval and --stall must be positive")
    try:
        if args.tasks:
            return _tasks(args.pid)
        return run(args.pid, args.interval, args.stall, args.once)
    except TopError as exc:
        print(f"minloop top: {exc}", file=sys.stderr)
        return 1
    except NotImplementedError as exc:
        print(exc, file=sys.stderr)
        return 1
