"""What the loop's telemetry costs in wall-clock time: minloop built without
it against minloop built with it, the same source, taking turns.

    python benchmarks/telemetry_overhead.py                  # builds both itself
    python benchmarks/telemetry_overhead.py --off DIR --on DIR
        [--stall] [--only ROWS] [--quick] [--rounds N] [--duration S] ...

Without --off/--on the script copies this source tree twice into a
temporary directory (--build-dir DIR to keep them) and builds each in place
(`setup.py build_ext --inplace`, which needs Cython), the first with
MINLOOP_NO_TELEMETRY=1; given, each DIR is such a tree already built, and
the script checks that OFF has no telemetry and ON has it.  Every run is a
fresh process importing minloop from its build (the bench engine's
`label=module:factory@DIR` loops, minloop/bench/loops.py); within each round
the builds take turns, so a drift of the machine falls on both alike.

Rows (the bench's, minloop/bench/rows.py): call_soon_chain,
call_later_cancel, timers-200k-fire, tasks-100k-sleep2 (operations per
second), tcp-protocol-1k-c16, tcp-streams-1k-c16 (round trips per second,
and the server's CPU per round trip) and http-c16 (the HTTP server's CPU per
request; needs httptools).  --quick runs the two scale rows at a tenth.

--stall adds a third column, ON with the stall detector armed
(loop.set_stall_handler with a threshold no run reaches): what arming costs.
It refuses to run until the ON build has set_stall_handler.

The report: per row and figure, each build's median over the rounds with
its spread (min-max), and ON over OFF: the median of the rounds' own ratios
(a round's runs are neighbours in time) with their min-max.  For rates a
ratio below 1 is a slowdown; for CPU per operation above 1 is a cost.
Timing claims need a quiet machine; instruction counts are
benchmarks/telemetry_instructions.py's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, SOURCE)

from minloop.bench import loops, options, procs, report, rows as rows_module  # noqa: E402
from minloop.bench import runner  # noqa: E402

ROW_IDS = ("call_soon_chain", "call_later_cancel", "timers-200k-fire", "tasks-100k-sleep2",
           "tcp-protocol-1k-c16", "tcp-streams-1k-c16", "http-c16")
FULL = options.Profile(rounds=5, duration=1.0, warmup=0.25)
# A threshold no benchmark callback reaches: the detector watches, never reports.
STALL_THRESHOLD = 1.0
# The copy of the tree each build is made from: what build_ext compiles
# (pyproject.toml's metadata would only ask for a newer setuptools).
COPY = ("minloop", "src", "setup.py")
def IGNORE(directory, names):
    """What not to copy: built modules, caches, and Cython's generated C
    (minloop/*.c; src/*.c are sources)."""
    generated = os.path.basename(directory) == "minloop"
    return {n for n in names if n.endswith((".so", ".html")) or n in ("__pycache__", "build")
            or (generated and n.endswith(".c"))}
STALL_MODULE = '''"""Factories for benchmarks/telemetry_overhead.py --stall (written by it)."""
import minloop

__version__ = minloop.__version__


def stall_armed():
    loop = minloop.new_event_loop()
    loop.set_stall_handler(lambda report: None, {threshold!r})
    return loop
'''


def the_rows(quick: bool) -> list[rows_module.Row]:
    found = []
    for rid in ROW_IDS:
        # Every row is in this script's --quick set, at its quick size.
        row = dataclasses.replace(rows_module.ROWS[rid], quick=True)
        if quick and row.group == "scale":
            row = dataclasses.replace(row, n=row.n // rows_module.QUICK_DIVISOR)
        found.append(row)
    return found


def build(tree: str, telemetry: bool, log) -> None:
    """Copy this source tree to tree and build it in place."""
    import importlib.util
    if importlib.util.find_spec("Cython") is None:
        raise SystemExit("telemetry_overhead: building needs Cython in this interpreter "
                         "(pip install Cython==3.3.1), or give two built trees: --off --on")
    os.makedirs(tree, exist_ok=True)
    for name in COPY:
        src = os.path.join(SOURCE, name)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(tree, name), ignore=IGNORE, dirs_exist_ok=True)
        elif os.path.exists(src):
            shutil.copy2(src, tree)
    env = dict(os.environ)
    env.pop("MINLOOP_NO_TELEMETRY", None)
    if not telemetry:
        env["MINLOOP_NO_TELEMETRY"] = "1"
    print(f"building {tree} ({'with' if telemetry else 'without'} telemetry) ...",
          file=log, flush=True)
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                          cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise SystemExit(f"telemetry_overhead: building {tree} failed:\n{tail}")


def _probe(tree: str, code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {tree!r}); "
                           + code], capture_output=True, text=True, timeout=120, cwd=tree)
    if proc.returncode:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"telemetry_overhead: {tree} does not import as a built minloop: "
                         f"{tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_build(tree: str, telemetry: bool, parser) -> dict:
    flags = _probe(tree, "import json, minloop, minloop.loop as l; print(json.dumps(dict("
                   "l._build_flags(), file=minloop.__file__, stall=hasattr("
                   "minloop.new_event_loop(), 'set_stall_handler'))))")
    where = os.path.dirname(os.path.dirname(os.path.abspath(flags["file"])))
    if os.path.realpath(where) != os.path.realpath(tree):
        parser.error(f"{tree}: minloop imported from {where}, not from the tree")
    if bool(flags.get("telemetry")) != telemetry:
        parser.error(f"{tree}: built {'without' if telemetry else 'with'} telemetry; "
                     f"{'ON' if telemetry else 'OFF'} must be built "
                     f"{'without MINLOOP_NO_TELEMETRY' if telemetry else 'with MINLOOP_NO_TELEMETRY=1'}")
    return flags


# --- the report -------------------------------------------------------------

FIGURES = (("rate", "ops/s", False), ("server_us", "server CPU us/op", True))


def _fmt(value: float, cpu: bool) -> str:
    return f"{value:.2f}" if cpu else report.si(value)


def _spread(values: list[float], cpu: bool) -> str:
    return f"{_fmt(min(values), cpu)}-{_fmt(max(values), cpu)}"


def table(results: dict, names: list[str]) -> str:
    base = names[0]
    head = ["row", "figure"]
    for name in names:
        head += [f"{name} median", f"{name} min-max"]
    for name in names[1:]:
        head += [f"{name}/{base}", "min-max"]
    lines = [head]
    for rid, entry in results.items():
        cells = entry["cells"]
        if all(cells[n]["na"] for n in names):
            lines.append([rid, f"n/a: {cells[base]['na']}"])
            continue
        for key, label, cpu in FIGURES:
            per = {n: {s["round"]: s[key] for s in cells[n]["samples"]
                       if s.get(key) is not None} for n in names}
            if not any(per.values()):
                continue
            if key == "rate" and rid.startswith("http"):
                label = "requests/s"
            elif key == "rate" and entry["row"]["group"] == "net":
                label = "round trips/s"
            line = [rid, label]
            for n in names:
                values = list(per[n].values())
                if values:
                    line += [_fmt(statistics.median(values), cpu), _spread(values, cpu)]
                else:
                    why = cells[n]["na"] or "; ".join(cells[n]["errors"][:1]) or "-"
                    line += [why[:40], ""]
            for n in names[1:]:
                ratios = [per[n][r] / per[base][r] for r in per[n]
                          if r in per[base] and per[base][r]]
                line += ([f"{statistics.median(ratios):.3f}",
                          f"{min(ratios):.3f}-{max(ratios):.3f}"] if ratios else ["-", ""])
            lines.append(line)
    widths = [max(len(r[i]) for r in lines if i < len(r) and len(r) > 2)
              for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip()
                     for r in lines)


# --- the run ------------------------------------------------------------------

def main(argv=None) -> int:
    parser = options.Parser(description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--off", metavar="DIR",
                        help="a source tree built in place with MINLOOP_NO_TELEMETRY=1")
    parser.add_argument("--on", metavar="DIR", help="the same source built in place with it")
    parser.add_argument("--build-dir", metavar="DIR",
                        help="without --off/--on: build the two trees here and keep them "
                             "(default: a temporary directory, removed afterwards)")
    parser.add_argument("--stall", action="store_true",
                        help="a third column: ON with the stall detector armed "
                             "(needs loop.set_stall_handler)")
    command = options.Command(parser, FULL, default_only=None, only_help="row ids")
    args = parser.parse_args(argv)
    if args.loops != ",".join(loops.NAMES):
        parser.error("--loops: this script compares two builds of minloop (--off, --on)")
    if bool(args.off) != bool(args.on):
        parser.error("--off and --on go together (or neither: the script builds both)")
    rows = command.select(args, the_rows(args.quick))
    if args.list:
        return options.list_rows(rows)
    settings = command.settings(args)
    command.check_outputs(args)

    temporary = None
    try:
        if args.off:
            off, on = os.path.abspath(args.off), os.path.abspath(args.on)
        else:
            where = args.build_dir or tempfile.mkdtemp(prefix="minloop-overhead-")
            temporary = None if args.build_dir else where
            off, on = os.path.join(where, "off"), os.path.join(where, "on")
            build(off, False, sys.stderr)
            build(on, True, sys.stderr)
        check_build(off, False, parser)
        on_flags = check_build(on, True, parser)
        names = [loops.parse(f"off=minloop:new_event_loop@{off}"),
                 loops.parse(f"on=minloop:new_event_loop@{on}")]
        if args.stall:
            if not on_flags.get("stall"):
                parser.error("--stall: the ON build has no loop.set_stall_handler (the stall "
                             "detector is not in this source yet)")
            factories = temporary or args.build_dir
            if factories is None:
                factories = temporary = tempfile.mkdtemp(prefix="minloop-overhead-")
            with open(os.path.join(factories, "overhead_factories.py"), "w") as f:
                f.write(STALL_MODULE.format(threshold=STALL_THRESHOLD))
            # The children find it on PYTHONPATH, after the build's own root.
            os.environ["PYTHONPATH"] = os.pathsep.join(
                p for p in (factories, os.environ.get("PYTHONPATH")) if p)
            names.append(loops.parse(f"stall=overhead_factories:stall_armed@{on}"))

        probes = procs.probe_loops(names, settings.timeout)
        for name in names:
            if not probes[name]["available"]:
                raise SystemExit(f"telemetry_overhead: {name}: {probes[name]['reason']}")
        machine = procs.machine_info()
        print(f"telemetry overhead: median of {settings.rounds} rounds, builds taking turns"
              f"{' (--quick)' if settings.quick else ''}")
        print(f"python: {machine['python']} on {machine['platform']}; cpu: {machine['cpu']}, "
              f"{machine['cpu_count']} CPUs"
              + (f"; load average {machine['loadavg']:.2f}" if "loadavg" in machine else ""))
        for name in names:
            print(f"{name}: minloop {probes[name]['version']}")
        if any(r.group == "net" for r in rows):
            print(f"network rows: {settings.duration:g} s timed after {settings.warmup:g} s "
                  f"warm-up; {settings.pin.describe}")
        print(flush=True)
        progress = report.Progress(runner.runs(rows, names, settings.rounds))
        results: dict = {}
        try:
            runner.run_rows(rows, names, settings, progress, results)
        except KeyboardInterrupt:
            progress.interrupted(len(results))
            status = 130
        else:
            progress.finish()
            status = 0
        if results:
            print(table(results, names))
        for rid, entry in results.items():
            for name, cell in entry["cells"].items():
                for line in cell["errors"] + cell["problems"]:
                    print(f"{rid} {name}: {line}")
                    status = status or 1
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"machine": machine, "off": off, "on": on, "rounds": settings.rounds,
                           "quick": settings.quick, "rows": results}, f, indent=2)
            print(f"\nwrote {args.json}")
        return status
    finally:
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(options.quiet_on_broken_pipe(main))
