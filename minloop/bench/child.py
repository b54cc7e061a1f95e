"""Child process of the micro benchmarks: one measurement, one JSON line.

    python -m minloop.bench.child WORKLOAD LOOP N [CPU]
        -> {"seconds": ..., "gc": [gen0, gen1, gen2], "problem": ..., <figures>}
    python -m minloop.bench.child --probe LOOP      -> {"available": ..., "version": ...}

Each measurement gets a fresh interpreter so that no loop inherits another's
heap, freelists or imported state.  The JSON line is the last line of stdout;
anything a workload prints comes before it.  Started through
``procs.module_command`` so that it imports the same minloop as its parent.
"""

from __future__ import annotations

import json
import os
import sys

from . import loops, workloads


def probe(name: str) -> dict:
    try:
        loops.factory(name)
    except loops.Unavailable as exc:
        return {"available": False, "reason": str(exc)}
    return {"available": True, "version": loops.version(name)}


def measure(workload_name: str, loop_name: str, n: int) -> dict:
    workload = workloads.WORKLOADS[workload_name]
    try:
        factory = loops.factory(loop_name)
    except loops.Unavailable as exc:
        return {"error": f"unavailable: {exc}"}
    # A small throwaway run first, so that lazy imports and first-call set-up
    # in any loop (or in asyncio's Task machinery) stay out of the timing.
    try:
        workloads.run(workload, factory, min(n, workload.smoke_n))
    except workloads.Misbehaved:
        pass  # the measured run below reports it
    try:
        result = workloads.measure(workload, factory, n)
    except workloads.Misbehaved as exc:
        return dict(exc.figures, problem=str(exc))
    return dict(result, problem=None)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--probe":
        result = probe(argv[1])
    elif len(argv) in (3, 4):
        if len(argv) == 4 and hasattr(os, "sched_setaffinity"):
            # One CPU for the whole run: no migrations in the timed part.
            os.sched_setaffinity(0, {int(argv[3])})
        result = measure(argv[0], argv[1], int(argv[2]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    # Flush stdout before the JSON line: a workload's own output must not
    # interleave with it.
    sys.stdout.flush()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
