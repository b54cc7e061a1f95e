"""loop.set_stall_handler(): the stall watchdog (minloop/stall.pyx,
src/stall.h, docs/telemetry.md "Stalls").

asyncio's loop has no stall detector, so these run on minloop only; the
last test shows what asyncio offers instead (debug mode's
slow_callback_duration warning, after the fact and only in debug mode).
"""

import asyncio
import gc
import logging
import math
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from conftest import DAEMON_THREADS, import_minloop


def telemetry_built():
    return import_minloop().loop._build_flags()["telemetry"]


needs_telemetry = pytest.mark.skipif("not telemetry_built()",
                                     reason="built with MINLOOP_NO_TELEMETRY=1")

WATCHDOG = "minloop-stall-watchdog"


def line_of(marker):
    """The line number in this file of the line that ends with `# marker`."""
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return n
    raise LookupError(marker)


def watchdogs():
    return [t for t in threading.enumerate() if t.name == WATCHDOG and t.is_alive()]


@pytest.fixture
def mloop():
    if not telemetry_built():
        pytest.skip("built with MINLOOP_NO_TELEMETRY=1")
    loop = import_minloop().new_event_loop()
    loop.set_debug(False)
    yield loop
    loop.close()
    assert not watchdogs()


def frames(report):
    return [(f.filename, f.lineno, f.name) for f in report.stack]


# ----------------------------------------------------------------------
# What is reported


async def endpoint():
    time.sleep(0.2)  # stall: sleep
    await asyncio.sleep(0)
    return "done"


@needs_telemetry
def test_blocking_sleep_in_a_coroutine_is_reported_with_its_line(mloop):
    reports = []
    mloop.set_stall_handler(reports.append, 0.05)

    async def main():
        result = await mloop.create_task(endpoint())
        await asyncio.sleep(0.01)   # the report is delivered by now
        return result

    assert mloop.run_until_complete(main()) == "done"
    assert len(reports) == 1
    report = reports[0]
    assert 0.2 <= report.duration < 0.2 + 0.05 + 0.1
    assert "endpoint" in report.callback and report.callback.startswith("<Task")
    # Described while it stalls, not after it returned (the task pending,
    # running at the line that blocks), as docs/telemetry.md shows it.
    assert report.callback.startswith("<Task pending"), report.callback
    assert f"running at {__file__}:{line_of('stall: sleep')}>" in report.callback
    # Sampled while blocked: the innermost frame is the sleep's line of
    # the coroutine, not the loop's.
    assert frames(report)[-1] == (__file__, line_of("stall: sleep"), "endpoint")
    assert report.gc_time == 0.0
    assert "endpoint" in repr(report)


def busy(seconds):
    deadline = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < deadline: n += 1  # stall: busy
    return n


@needs_telemetry
def test_pure_python_busy_loop_is_reported_with_its_line(mloop):
    reports = []
    mloop.set_stall_handler(reports.append, 0.05)
    mloop.call_soon(busy, 0.2)
    mloop.run_until_complete(asyncio.sleep(0.01))
    assert len(reports) == 1
    report = reports[0]
    assert report.duration >= 0.2
    assert "busy" in report.callback
    assert frames(report)[-1] == (__file__, line_of("stall: busy"), "busy")


def slow_regex_size(at_least):
    """An input on which the pattern below backtracks for `at_least` s."""
    pattern = re.compile(r"(a+)+b")
    for n in range(16, 32):
        t0 = time.perf_counter()
        pattern.fullmatch("a" * n)
        if time.perf_counter() - t0 >= at_least:
            return pattern, "a" * n
    pytest.skip("the regex engine is too fast here")


@needs_telemetry
def test_call_holding_the_gil_is_reported_by_the_time_it_ends(mloop):
    # The regex engine holds the GIL throughout: the watchdog notices the
    # stall without it, and samples once the call returns to Python.
    pattern, text = slow_regex_size(0.15)
    reports, took = [], []
    ticks = []
    stop = threading.Event()

    def ticker():   # runs only when it has the GIL
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    def block():
        t0 = time.perf_counter()
        pattern.fullmatch(text)  # stall: regex
        took.append((t0, time.perf_counter()))

    t = threading.Thread(target=ticker)
    t.start()
    try:
        mloop.set_stall_handler(reports.append, 0.05)
        mloop.call_soon(block)
        mloop.run_until_complete(asyncio.sleep(0.01))
    finally:
        stop.set()
        t.join()
    (t0, t1), = took
    # The GIL was held: the ticker stood still during the call.
    inside = [x for x in ticks if t0 + 0.02 < x < t1 - 0.02]
    assert not inside
    assert len(reports) == 1
    report = reports[0]
    assert report.duration >= t1 - t0
    assert "block" in report.callback
    # Sampled as the call returned (the callback still ran): its line.
    assert not report.stack or frames(report)[-1] == (
        __file__, line_of("stall: regex"), "block")


@needs_telemetry
def test_gc_time_counts_collections_during_the_stall(mloop):
    reports = []

    def collect_a_lot():
        junk = []
        for _ in range(200_000):
            a = []
            a.append(a)
            junk.append(a)
        del junk, a
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.1:
            gc.collect()

    mloop.set_stall_handler(reports.append, 0.05)
    mloop.call_soon(collect_a_lot)
    mloop.run_until_complete(asyncio.sleep(0.01))
    assert len(reports) == 1
    report = reports[0]
    assert 0.05 < report.gc_time <= report.duration


@needs_telemetry
def test_no_report_under_the_threshold(mloop):
    reports = []
    mloop.set_stall_handler(reports.append, 0.25)

    async def main():
        for _ in range(5):
            time.sleep(0.02)
            await asyncio.sleep(0)
        busy(0.05)
        await asyncio.sleep(0.3)   # idle in the poller: not a stall

    mloop.run_until_complete(main())
    assert reports == []


@needs_telemetry
def test_an_iteration_of_short_callbacks_is_not_a_stall(mloop):
    # A decision (docs/telemetry.md): a stall is one callback; a busy
    # iteration of many short ones shows in loop.busy_time instead.
    reports = []
    mloop.set_stall_handler(reports.append, 0.05)
    for _ in range(40):
        mloop.call_soon(time.sleep, 0.005)
    mloop.run_until_complete(asyncio.sleep(0.01))
    assert reports == []
    assert mloop.busy_time.max >= 0.2


@needs_telemetry
def test_each_stalled_callback_is_reported_once(mloop):
    reports = []
    mloop.set_stall_handler(reports.append, 0.05)
    for _ in range(3):
        mloop.call_soon(time.sleep, 0.12)
    mloop.run_until_complete(asyncio.sleep(0.01))
    assert len(reports) == 3
    assert all(r.duration >= 0.12 for r in reports)


# ----------------------------------------------------------------------
# The handler


@needs_telemetry
def test_handler_exceptions_go_to_the_exception_handler(mloop):
    seen = []
    mloop.set_exception_handler(lambda loop, context: seen.append(context))

    def handler(report):
        raise ValueError(report.duration)

    mloop.set_stall_handler(handler, 0.05)
    mloop.call_soon(time.sleep, 0.15)
    mloop.run_until_complete(asyncio.sleep(0.01))
    assert len(seen) == 1
    assert isinstance(seen[0]["exception"], ValueError)
    assert seen[0]["message"].startswith("Exception in callback")


@needs_telemetry
def test_handler_runs_on_the_loop_thread(mloop):
    where = []
    mloop.set_stall_handler(lambda r: where.append(threading.get_ident()), 0.05)
    mloop.call_soon(time.sleep, 0.12)
    mloop.run_until_complete(asyncio.sleep(0.01))
    assert where == [threading.get_ident()]


@needs_telemetry
def test_armed_from_the_next_callback_on(mloop):
    # Arming inside a callback watches the callbacks after it, not the one
    # running (the loop decided how to run it before it was armed).
    reports = []

    def arm_then_block():
        mloop.set_stall_handler(reports.append, 0.05)
        time.sleep(0.12)
        mloop.call_soon(time.sleep, 0.12)

    mloop.call_soon(arm_then_block)
    mloop.run_until_complete(asyncio.sleep(0.2))
    assert len(reports) == 1
    assert "sleep" in reports[0].callback


# ----------------------------------------------------------------------
# The watchdog thread's life


@needs_telemetry
def test_handler_none_stops_the_thread(mloop):
    before = threading.active_count()
    mloop.set_stall_handler(print, 0.05)
    assert len(watchdogs()) == 1
    # A daemon, but where the interpreter refuses them (minloop/_subinterpreters.py).
    assert watchdogs()[0].daemon is DAEMON_THREADS
    assert threading.active_count() == before + 1
    mloop.set_stall_handler(print, 0.1)   # replaced: still one
    assert len(watchdogs()) == 1
    mloop.set_stall_handler(None)
    assert threading.active_count() == before
    assert not watchdogs()
    mloop.set_stall_handler(None)   # off already: fine
    # Off: nothing is reported.
    mloop.call_soon(time.sleep, 0.1)
    mloop.run_until_complete(asyncio.sleep(0))


@needs_telemetry
def test_closing_the_loop_stops_the_watchdog():
    loop = import_minloop().new_event_loop()
    loop.set_stall_handler(print, 0.05)
    assert len(watchdogs()) == 1
    loop.run_until_complete(asyncio.sleep(0.01))
    loop.close()
    assert not watchdogs()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.set_stall_handler(print, 0.05)
    loop.set_stall_handler(None)


@needs_telemetry
def test_an_armed_loop_does_not_keep_the_process_alive():
    # Neither left armed and unclosed, nor in the middle of a stall.
    code = (
        "import asyncio, time, minloop\n"
        "loop = minloop.new_event_loop()\n"
        "loop.set_stall_handler(print, 0.01)\n"
        "loop.call_soon(time.sleep, 0.05)\n"
        "loop.run_until_complete(asyncio.sleep(0))\n"
        "print('end')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.endswith("end\n")


@needs_telemetry
def test_set_from_another_thread_while_running(mloop):
    reports = []
    armed, disarm = threading.Event(), threading.Event()

    def other():
        mloop.set_stall_handler(reports.append, 0.05)
        armed.set()
        disarm.wait(5)
        mloop.set_stall_handler(None)

    async def main():
        t = threading.Thread(target=other)
        t.start()
        while not armed.is_set():
            await asyncio.sleep(0.001)
        await asyncio.sleep(0)   # a callback begun after arming
        time.sleep(0.15)
        await asyncio.sleep(0.01)
        disarm.set()
        while t.is_alive():
            await asyncio.sleep(0.001)

    mloop.run_until_complete(main())
    assert len(reports) == 1
    assert not watchdogs()


@needs_telemetry
@pytest.mark.parametrize("threshold", [0, -1, math.nan, math.inf])
def test_threshold_must_be_positive(mloop, threshold):
    with pytest.raises(ValueError, match="threshold should be a positive number"):
        mloop.set_stall_handler(print, threshold)
    assert not watchdogs()


@needs_telemetry
def test_huge_threshold_is_fine(mloop):
    reports = []
    mloop.set_stall_handler(reports.append, 1e300)
    mloop.call_soon(time.sleep, 0.05)
    mloop.run_until_complete(asyncio.sleep(0))
    assert reports == []
    assert len(watchdogs()) == 1


@needs_telemetry
@pytest.mark.parametrize("threshold", ["1", None, True, 1j])
def test_threshold_must_be_a_number(mloop, threshold):
    with pytest.raises(TypeError, match="threshold should be a positive number"):
        mloop.set_stall_handler(print, threshold)


@needs_telemetry
def test_handler_must_be_callable(mloop):
    # asyncio's wording for set_exception_handler.
    with pytest.raises(TypeError, match="A callable object or None is expected"):
        mloop.set_stall_handler(42, 0.1)


@pytest.mark.skipif("telemetry_built()", reason="telemetry is built")
def test_no_telemetry_build_says_so():
    loop = import_minloop().new_event_loop()
    try:
        with pytest.raises(NotImplementedError, match="MINLOOP_NO_TELEMETRY"):
            loop.set_stall_handler(print, 0.1)
    finally:
        loop.close()


# ----------------------------------------------------------------------
# Runners and fork


@needs_telemetry
def test_with_minloop_run():
    minloop = import_minloop()
    reports = []

    async def main():
        asyncio.get_running_loop().set_stall_handler(reports.append, 0.05)
        await asyncio.sleep(0)   # armed from the next callback on
        await endpoint()
        await asyncio.sleep(0.01)

    minloop.run(main())
    assert len(reports) == 1 and reports[0].duration >= 0.2
    assert not watchdogs()


@needs_telemetry
@pytest.mark.skipif("'loop_factory' not in __import__('inspect').signature(asyncio.run).parameters")
def test_with_asyncio_run_loop_factory():
    minloop = import_minloop()
    reports = []

    async def main():
        asyncio.get_running_loop().set_stall_handler(reports.append, 0.05)
        await asyncio.create_task(endpoint())
        await asyncio.sleep(0.01)

    asyncio.run(main(), loop_factory=minloop.new_event_loop)
    assert len(reports) == 1
    assert frames(reports[0])[-1][1] == line_of("stall: sleep")
    assert not watchdogs()


@needs_telemetry
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork()")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
@pytest.mark.main_interpreter("fork")
def test_forked_child_has_no_handler(mloop):
    # The watchdog thread does not follow fork(): the child's loop is
    # disarmed and may arm its own.
    reports = []
    mloop.set_stall_handler(reports.append, 0.05)
    pid = os.fork()
    if pid == 0:   # the child
        code = 1
        try:
            if not watchdogs():
                mloop.call_soon(time.sleep, 0.12)
                mloop.run_until_complete(asyncio.sleep(0.01))
                if not reports:
                    mloop.set_stall_handler(reports.append, 0.05)
                    mloop.call_soon(time.sleep, 0.12)
                    mloop.run_until_complete(asyncio.sleep(0.01))
                    code = 0 if len(reports) == 1 else 3
                    mloop.set_stall_handler(None)
            else:
                code = 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(watchdogs()) == 1   # the parent's is untouched


# ----------------------------------------------------------------------
# asyncio's loop: only debug mode's after-the-fact warning


def test_asyncio_slow_callback_warning_needs_debug_mode(caplog):
    for debug in (False, True):
        loop = asyncio.new_event_loop()
        try:
            loop.set_debug(debug)
            loop.slow_callback_duration = 0.05
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="asyncio"):
                loop.call_soon(time.sleep, 0.08)
                loop.run_until_complete(asyncio.sleep(0))
            warned = any("Executing" in r.getMessage() for r in caplog.records)
            assert warned == debug
        finally:
            loop.close()


# ----------------------------------------------------------------------
# Stalls as metrics: counted by the loop


async def two_stalls():
    for _ in range(2):
        time.sleep(0.12)
        await asyncio.sleep(0)


@needs_telemetry
def test_stalls_are_counted_with_no_handler(mloop):
    # set_stall_threshold() arms the watchdog to count, with no handler.
    assert mloop.stalls.count == 0
    mloop.set_stall_threshold(0.05)
    mloop.run_until_complete(two_stalls())
    assert mloop.stalls.count == 2
    assert mloop.stalls.min >= 0.12
    # A handler armed later: reported and counted alike; the threshold may
    # then change and keep the handler.
    reports = []
    mloop.set_stall_handler(reports.append, 0.05)
    mloop.set_stall_threshold(0.06)

    async def main():
        await two_stalls()
        await asyncio.sleep(0.01)

    mloop.run_until_complete(main())
    assert len(reports) == 2
    assert mloop.stalls.count == 4
    mloop.set_stall_threshold(None)
    assert not watchdogs() or all(not t.is_alive() for t in watchdogs())
    mloop.run_until_complete(two_stalls())
    assert mloop.stalls.count == 4   # disarmed: not counted


@needs_telemetry
def test_stall_metrics_in_both_exporters(mloop):
    prometheus_client = pytest.importorskip("prometheus_client")
    pytest.importorskip("opentelemetry.sdk.metrics")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from minloop.telemetry.opentelemetry import MinloopMetrics
    from minloop.telemetry.prometheus import MinloopCollector
    registry = prometheus_client.CollectorRegistry()
    MinloopCollector(mloop, registry)
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    MinloopMetrics(mloop, provider)
    mloop.set_stall_handler(lambda report: None, 0.05)
    mloop.run_until_complete(two_stalls())
    text = prometheus_client.generate_latest(registry).decode()
    assert "minloop_stalls_total 2.0" in text
    assert "minloop_stall_seconds_count 2.0" in text
    found = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                found[m.name] = m.data.data_points[0]
    assert found["minloop.eventloop.stalls"].value == 2
    assert found["minloop.eventloop.stall.duration"].count == 2
    assert found["minloop.eventloop.stall.duration"].min >= 0.12
    provider.shutdown()
