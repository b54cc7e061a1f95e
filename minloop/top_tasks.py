"""``python -m minloop top PID --tasks``: the tasks of a running process's
loops, each with its name, its state and where it awaits -- aiomonitor's
``ps``/``where`` with nothing installed in the program.

It reads what ``python -m asyncio ps PID`` reads: Python 3.14's remote
debugging (``_remote_debugging.RemoteUnwinder``), which walks the target's
asyncio tasks (every thread's, whatever loop runs them: minloop's tasks are
asyncio's own C tasks) from outside, through the kernel's process-memory
reads.  The target does nothing for it.  It needs the same Python version as
the target, 3.14 or later, and the right to read its memory (its user, or
root; Yama's ptrace_scope may ask for more).  Each task's thread is matched
to the loop that thread runs (its telemetry page, minloop/page_reader.pyx).

Below 3.14 no interpreter offers this: a task's frames can be read only by
code running in the target.  There, top shows the task of a stall in
progress (the watchdog's note, when loop.set_stall_handler() or
MINLOOP_STALL arms it), and --tasks says so.
"""

import asyncio
import os

try:
    from _remote_debugging import RemoteUnwinder
except ImportError:   # before 3.14
    RemoteUnwinder = None

AVAILABLE = RemoteUnwinder is not None and hasattr(RemoteUnwinder, "get_all_awaited_by")

UNAVAILABLE = (
    "minloop top --tasks needs Python 3.14 or later (the remote debugging that "
    "`python -m asyncio ps` uses), in top and in the process it reads. Below 3.14, "
    "top shows the task and line of a stall in progress when the process's "
    "stall watchdog is armed (loop.set_stall_handler(), MINLOOP_STALL or "
    "`python -m minloop run --stall`).")


# asyncio's own frames (asyncio.sleep's, Event.wait's ...): the program's
# await point is the innermost frame outside them.
_ASYNCIO_DIR = os.path.dirname(asyncio.__file__) + os.sep


def _lineno(frame):
    # 3.14's FrameInfo has lineno; 3.15's a location (lineno, columns), or None.
    if hasattr(frame, "lineno"):
        return frame.lineno
    location = getattr(frame, "location", None)
    return location.lineno if location is not None else None


def _where(frames):
    """'function file:line' of the innermost frame of the program's (not
    asyncio's), innermost first in `frames`."""
    if not frames:
        return "-"
    f = next((f for f in frames if not str(f.filename).startswith(_ASYNCIO_DIR)), frames[0])
    lineno = _lineno(f)
    if lineno:
        return f"{f.funcname} {f.filename}:{lineno}"
    return f.funcname


def tasks(pid):
    """[(thread id, task id, name, where it awaits, its coroutine chain,
    the task awaiting it or "")] of process `pid`'s pending tasks."""
    if not AVAILABLE:
        raise NotImplementedError(UNAVAILABLE)
    awaited = RemoteUnwinder(pid).get_all_awaited_by()
    names = {t.task_id: t.task_name for info in awaited for t in info.awaited_by}
    found = []
    for info in awaited:
        for task in info.awaited_by:
            # coroutine_stack: the task's coroutine chain, innermost first.
            frames = [f for coro in task.coroutine_stack for f in coro.call_stack]
            chain = " <- ".join(f.funcname for f in frames)
            parents = ", ".join(str(names.get(c.task_name, c.task_name))
                                for c in task.awaited_by)
            found.append((info.thread_id, task.task_id, task.task_name, _where(frames),
                          chain, parents))
    return found


def render(pid, rows, loops):
    """The table's lines; `loops`: {thread id: loop label}."""
    lines = [f"minloop top  pid {pid}  {len(rows)} task{'s' if len(rows) != 1 else ''} "
             f"pending", "",
             f"{'LOOP':>6} {'TID':>7}  {'TASK':<20} {'STATE':<8} AWAITING AT"]
    for tid, _task_id, name, where, chain, parents in sorted(
            rows, key=lambda r: (str(loops.get(r[0], "")), r[0], str(r[2]))):
        lines.append(f"{loops.get(tid, '-'):>6} {tid:>7}  {str(name)[:20]:<20} "
                     f"{'pending':<8} {where}")
        if chain and " <- " in chain:
            lines.append(f"{'':>6} {'':>7}  {'':<20} {'':<8}   via {chain}")
        if parents:
            lines.append(f"{'':>6} {'':>7}  {'':<20} {'':<8}   awaited by {parents}")
    return lines


class TasksError(Exception):
    """Why a process's tasks cannot be shown (top.py prints it, as its own)."""


def run(pid, out, loop_labels):
    """Print the table once (status 0), or say why not (TasksError).
    loop_labels(pid): {thread id: loop label} of the process's minloop
    loops, which top.py finds (this module stays below top.py, which
    imports it); asked once the process is known to be there."""
    if not AVAILABLE:
        raise NotImplementedError(UNAVAILABLE)
    if not os.path.exists(f"/proc/{pid}"):
        raise TasksError(f"no process with pid {pid}")
    loops = loop_labels(pid)
    try:
        rows = tasks(pid)
    except PermissionError:
        raise TasksError(f"permission denied reading the memory of process {pid}: run "
                         f"top as its user (or as root)") from None
    except (OSError, RuntimeError) as exc:
        raise TasksError(f"cannot read the tasks of process {pid}: {exc}") from None
    out.write("\n".join(render(pid, rows, loops)) + "\n")
    return 0
