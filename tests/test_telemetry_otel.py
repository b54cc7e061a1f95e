"""minloop.telemetry.opentelemetry: what an OpenTelemetry reader sees of a loop.

The SDK's InMemoryMetricReader collects from another thread while the loop
runs, as a PeriodicExportingMetricReader would; the values are checked
against a loop made to lag (a callback blocks it for 50 ms).  The exporter
needs minloop's telemetry; on asyncio's loop it must refuse clearly.
"""

import asyncio
import subprocess
import sys
import time

import pytest

from conftest import import_minloop, run_lagging

pytest.importorskip("opentelemetry.sdk.metrics",
                    reason="opentelemetry-sdk not installed (the test extra has it)")
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402


def telemetry_built():
    return import_minloop().loop._build_flags()["telemetry"]


def metrics_of(data):
    """{name: Metric} of a collection (None: nothing to report)."""
    if data is None:
        return {}
    return {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics
            for m in sm.metrics}


def points(metric):
    return {tuple(sorted(p.attributes.items())): p for p in metric.data.data_points}


@pytest.fixture
def exported():
    """exported(**kwargs) -> (loop, reader): a new minloop loop exported with
    MinloopMetrics(loop, provider, **kwargs) to an in-memory reader; the
    loop is closed and the provider shut down after the test."""
    if not telemetry_built():
        pytest.skip("built with MINLOOP_NO_TELEMETRY=1")
    from minloop.telemetry.opentelemetry import MinloopMetrics
    made = []

    def export(**kwargs):
        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
        loop = import_minloop().new_event_loop()
        made.append((loop, provider))
        MinloopMetrics(loop, provider, **kwargs)
        return loop, reader

    yield export
    for loop, provider in made:
        loop.close()
        provider.shutdown()


def test_nothing_is_imported_until_asked():
    code = ("import sys, minloop, minloop.telemetry; "
            "assert not [m for m in sys.modules if m.startswith('opentelemetry')]; "
            "assert 'minloop.telemetry.opentelemetry' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_missing_sdk_names_the_extra():
    # opentelemetry made unimportable: the error says what to install.
    code = ("import sys; sys.modules['opentelemetry'] = None\n"
            "try:\n"
            "    import minloop.telemetry.opentelemetry\n"
            "except ImportError as exc:\n"
            "    assert 'minloop[opentelemetry]' in str(exc), exc\n"
            "else:\n"
            "    raise SystemExit('imported without opentelemetry')\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_refuses_a_loop_without_telemetry(loop):
    from minloop.telemetry.opentelemetry import MinloopMetrics
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    try:
        if not isinstance(loop, import_minloop().Loop):
            # asyncio's loop has no telemetry to export (a probe timer would
            # be a different, costlier figure: not made up here).
            with pytest.raises(TypeError, match="minloop loop"):
                MinloopMetrics(loop, provider)
        elif not telemetry_built():
            with pytest.raises(NotImplementedError, match="MINLOOP_NO_TELEMETRY"):
                MinloopMetrics(loop, provider)
        else:
            MinloopMetrics(loop, provider, attributes={"loop": "a"})
            MinloopMetrics(loop, provider, attributes={"loop": "b"})
            got = metrics_of(reader.get_metrics_data())
            assert set(points(got["minloop.eventloop.callbacks"])) == {
                (("loop", "a"),), (("loop", "b"),)}
            assert set(points(got["minloop.eventloop.delay"])) == {
                (("loop", "a"),), (("loop", "b"),)}
    finally:
        provider.shutdown()


def test_refuses_a_provider_that_is_not_the_sdks():
    from opentelemetry.metrics import NoOpMeterProvider
    from minloop.telemetry.opentelemetry import MinloopMetrics
    if not telemetry_built():
        pytest.skip("built with MINLOOP_NO_TELEMETRY=1")
    loop = import_minloop().new_event_loop()
    try:
        with pytest.raises(TypeError, match="opentelemetry-sdk's MeterProvider"):
            MinloopMetrics(loop, NoOpMeterProvider())
    finally:
        loop.close()


def test_a_lagging_loop_as_a_reader_sees_it(exported):
    loop, reader = exported(attributes={"loop": "main"})
    # Collected from another thread while the loop runs.
    during = metrics_of(run_lagging(loop, reader.get_metrics_data))
    loop.run_until_complete(asyncio.sleep(0.01))
    after = metrics_of(reader.get_metrics_data())
    stats, lag = loop.stats(), loop.lag.snapshot()
    busy = loop.busy_time.snapshot()
    loop.run_until_complete(loop.shutdown_default_executor())

    label = (("loop", "main"),)
    # Counters, as the loop counts them (the loop was stopped for `after`).
    for name, field in (("callbacks", "callbacks"), ("iterations", "iterations"),
                        ("timers.fired", "timers_fired"),
                        ("timers.scheduled", "timers_scheduled")):
        metric = after["minloop.eventloop." + name]
        assert metric.data.is_monotonic
        assert points(metric)[label].value == getattr(stats, field)
    polls = points(after["minloop.eventloop.polls"])
    assert sum(p.value for p in polls.values()) == stats.iterations
    assert polls[label + (("minloop.eventloop.poll.kind", "blocked"),)].value \
        == stats.polls_blocked
    assert points(after["minloop.eventloop.timers.max"])[label].value == stats.timers_max

    # The delay histogram: the loop's bounds and counts, bucket for bucket.
    delay = after["minloop.eventloop.delay"]
    assert delay.unit == "s"
    point = points(delay)[label]
    pairs = lag.buckets()
    assert list(point.explicit_bounds) == [b for b, _ in pairs[:-1]]
    assert list(point.bucket_counts) == [c for _, c in pairs]
    assert point.count == lag.count == sum(point.bucket_counts)
    assert point.sum == pytest.approx(lag.sum)
    assert point.max == lag.max
    # The loop was made to lag: a timer >= 49 ms late, in a bucket above 49 ms.
    assert lag.max >= 0.049
    late = sum(c for b, c in zip(list(point.explicit_bounds) + [float("inf")],
                                 point.bucket_counts) if b >= 0.049)
    assert late >= 1
    # The delay gauges are over each collection's window: the late timer is
    # in `during`'s or in `after`'s.
    window_max = max(points(c["minloop.eventloop.delay.max"])[label].value
                     for c in (during, after) if "minloop.eventloop.delay.max" in c
                     and label in points(c["minloop.eventloop.delay.max"]))
    assert 0.049 <= window_max <= lag.max
    assert points(after["minloop.eventloop.delay.p99"])[label].value \
        <= points(after["minloop.eventloop.delay.max"])[label].value
    it = points(after["minloop.eventloop.busy_time"])[label]
    assert it.count == busy.count and it.max >= 0.05

    # During the run, collected from the executor's thread: the block is in
    # the active time and the histograms; utilization is in (0, 1].
    time_ = points(during["minloop.eventloop.time"])
    assert time_[label + (("minloop.eventloop.state", "active"),)].value >= 0.05
    assert time_[label + (("minloop.eventloop.state", "idle"),)].value >= 0.0
    util = points(during["minloop.eventloop.utilization"])[label].value
    assert 0.0 < util <= 1.0
    assert points(during["minloop.eventloop.delay"])[label].max >= 0.049
    # A second collection's utilization covers only the time since the first.
    assert 0.0 <= points(after["minloop.eventloop.utilization"])[label].value <= 1.0


def test_reset_starts_a_new_series(exported):
    loop, reader = exported()
    loop.run_until_complete(asyncio.sleep(0.002))
    first = points(metrics_of(reader.get_metrics_data())["minloop.eventloop.delay"])[()]
    assert first.count >= 1
    time.sleep(0.001)
    loop.lag.reset()
    second = points(metrics_of(reader.get_metrics_data())["minloop.eventloop.delay"])[()]
    assert second.count == 0
    # A cumulative series that went down is a new series: a later start.
    assert second.start_time_unix_nano > first.start_time_unix_nano


def test_readers_given_and_close():
    if not telemetry_built():
        pytest.skip("built with MINLOOP_NO_TELEMETRY=1")
    from minloop.telemetry.opentelemetry import MinloopMetrics
    provider = MeterProvider(shutdown_on_exit=False)
    reader = InMemoryMetricReader()
    provider.add_metric_reader(reader)   # not among the provider's own readers
    loop = import_minloop().new_event_loop()
    try:
        exported = MinloopMetrics(loop, provider, readers=[reader])
        got = metrics_of(reader.get_metrics_data())
        assert (("minloop.eventloop.delay" in got)
                and ("minloop.eventloop.busy_time" in got))
        exported.close()
        got = metrics_of(reader.get_metrics_data())
        assert "minloop.eventloop.delay" not in got
        assert not got.get("minloop.eventloop.callbacks") or not points(
            got["minloop.eventloop.callbacks"])
    finally:
        loop.close()
        provider.shutdown()


def test_delay_gauges_are_per_collection(exported):
    # Node's delay figures are over its histogram's window; ours over the
    # timers fired since the previous collection: a stall long ago does not
    # stay in them, and a window with no timer fired reports none.
    loop, reader = exported()

    async def late_timer():
        loop.call_later(0.001, lambda: None)
        time.sleep(0.05)          # the timer fires >= 49 ms late
        await asyncio.sleep(0)

    loop.run_until_complete(late_timer())
    first = metrics_of(reader.get_metrics_data())
    assert points(first["minloop.eventloop.delay.max"])[()].value >= 0.049
    # No timer since: no figure (the histogram still holds the old one).
    second = metrics_of(reader.get_metrics_data())
    assert "minloop.eventloop.delay.max" not in second \
        or not points(second["minloop.eventloop.delay.max"])
    assert points(second["minloop.eventloop.delay"])[()].max >= 0.049
    # One timer: the window's mean is its lateness, to the nanosecond.
    before = loop.lag.snapshot()
    loop.run_until_complete(asyncio.sleep(0.001))
    after = loop.lag.snapshot()
    assert after.count == before.count + 1
    third = metrics_of(reader.get_metrics_data())
    mean = points(third["minloop.eventloop.delay.mean"])[()].value
    assert mean == pytest.approx(after.sum - before.sum)
    assert points(third["minloop.eventloop.delay.max"])[()].value <= after.max
