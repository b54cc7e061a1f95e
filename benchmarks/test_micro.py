"""pytest-benchmark view of the micro workloads, one group per workload.

    pytest benchmarks/ --benchmark-only --benchmark-group-by=group   # measure
    pytest benchmarks/ --benchmark-disable                           # smoke check

In-process and repeated, so faster to iterate on than compare.py but less
isolated: every loop shares this interpreter's heap.  With benchmarks disabled
each workload runs once at its tiny smoke size, still checked for correctness.
"""

from __future__ import annotations

import gc
import os
import sys
import warnings

import pytest

# An in-place build lives in the repository root; an installed minloop wins.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minloop.bench import loops, workloads  # noqa: E402

ROUNDS = 5
BENCH_DIVISOR = 4  # a quarter of compare.py's sizes keeps the whole run to about a minute

# A misbehaving asyncio means a wrong workload, a misbehaving minloop is our bug:
# both fail.  Other loops are measured, not tested, so theirs only warn.
STRICT = {"asyncio", "minloop"}


@pytest.fixture(params=loops.NAMES)
def loop_name(request):
    return request.param


@pytest.fixture
def loop_factory(loop_name):
    try:
        return loops.factory(loop_name)
    except loops.Unavailable as exc:
        pytest.skip(f"{loop_name} unavailable: {exc}")


@pytest.mark.parametrize("workload", workloads.WORKLOADS.values(),
                         ids=list(workloads.WORKLOADS))
def test_workload(benchmark, workload, loop_name, loop_factory):
    benchmark.group = workload.name
    n = workload.smoke_n if benchmark.disabled else max(workload.n // BENCH_DIVISOR,
                                                         workload.smoke_n)
    benchmark.extra_info["n"] = n
    open_runs = []  # (loop, verify) of rounds not yet finished

    def setup():
        loop = loop_factory()
        go, verify = workload.setup(loop, n)[:2]  # a third part: figures, unused here
        open_runs.append((loop, verify))
        gc.collect()  # as workloads.run does: no previous round's garbage in this one
        return (go,), {}

    def finish(*_):
        loop, verify = open_runs.pop()
        try:
            verify()
        except workloads.Misbehaved as exc:
            if loop_name in STRICT:
                raise
            warnings.warn(f"{loop_name} misbehaved on {workload.name}: {exc}", stacklevel=1)
        finally:
            loop.close()

    try:
        benchmark.pedantic(lambda go: go(), setup=setup, teardown=finish,
                           rounds=ROUNDS, warmup_rounds=1)
    finally:
        # pytest-benchmark skips teardown when disabled; finish those runs here.
        while open_runs:
            finish()
