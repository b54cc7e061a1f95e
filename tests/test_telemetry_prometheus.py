"""minloop.telemetry.prometheus: a real scrape of a loop made to lag.

prometheus_client's own HTTP server serves the registry from its thread
while the loop runs; the test fetches /metrics over HTTP, parses it with
prometheus_client's parser and checks the values against the loop's own
telemetry.  The collector needs minloop's telemetry, so the scrape runs on
minloop; on asyncio's loop the collector must refuse clearly.
"""

import asyncio
import subprocess
import sys
import urllib.request

import pytest

from conftest import import_minloop, run_lagging

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402


def telemetry_built():
    return import_minloop().loop._build_flags()["telemetry"]


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(family, name=None):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for s in family.samples if name is None or s.name == name}


@pytest.fixture
def server():
    registry = prometheus_client.CollectorRegistry()
    httpd, thread = prometheus_client.start_http_server(0, addr="127.0.0.1",
                                                         registry=registry)
    try:
        yield registry, httpd.server_port
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def test_nothing_is_imported_until_asked():
    code = ("import sys, minloop, minloop.telemetry; "
            "assert 'prometheus_client' not in sys.modules; "
            "assert 'minloop.telemetry.prometheus' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_collector_refuses_a_loop_without_telemetry(loop):
    from minloop.telemetry.prometheus import MinloopCollector
    registry = prometheus_client.CollectorRegistry()
    if not isinstance(loop, import_minloop().Loop):
        # asyncio's loop has no telemetry to export.
        with pytest.raises(TypeError, match="minloop loop"):
            MinloopCollector(loop, registry)
    elif not telemetry_built():
        with pytest.raises(NotImplementedError, match="MINLOOP_NO_TELEMETRY"):
            MinloopCollector(loop, registry)
    else:
        MinloopCollector(loop, registry, labels={"loop": "a"})
        # Several loops: one collector each, told apart by their labels
        # (no describe(): the registry does not refuse the shared names).
        MinloopCollector(loop, registry, labels={"loop": "b"})
        text = prometheus_client.generate_latest(registry).decode()
        assert 'minloop_callbacks_total{loop="a"} 0.0' in text
        assert 'minloop_callbacks_total{loop="b"} 0.0' in text


@pytest.mark.main_interpreter("daemon threads")
def test_scrape_of_a_lagging_loop(server):
    if not telemetry_built():
        pytest.skip("built with MINLOOP_NO_TELEMETRY=1")
    from minloop.telemetry.prometheus import MinloopCollector
    registry, port = server
    loop = import_minloop().new_event_loop()
    try:
        MinloopCollector(loop, registry, labels={"loop": "main"})

        # Scraped from another thread while the loop runs (and sleeps in
        # the poller, waiting for this executor job).
        during = run_lagging(loop, lambda: scrape(port))
        loop.run_until_complete(asyncio.sleep(0.01))
        after = scrape(port)
        stats, lag = loop.stats(), loop.lag.snapshot()
        # No thread left behind (a later test may fork).
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()

    label = (("loop", "main"),)
    # Counters, as the loop counts them (the loop was stopped for `after`).
    for name, field in (("minloop_callbacks", "callbacks"),
                        ("minloop_iterations", "iterations"),
                        ("minloop_timers_fired", "timers_fired"),
                        ("minloop_timers_scheduled", "timers_scheduled")):
        assert after[name].type == "counter"
        assert samples(after[name]) == {(name + "_total", label): getattr(stats, field)}
    polls = samples(after["minloop_polls"])
    assert sum(polls.values()) == stats.iterations
    assert polls[("minloop_polls_total", (("kind", "blocked"), ("loop", "main")))] \
        == stats.polls_blocked
    assert after["minloop_timers"].type == "gauge"
    assert samples(after["minloop_timers_max"]) == {("minloop_timers_max", label):
                                                    stats.timers_max}
    # The lag histogram, bucket for bucket.
    family = after["minloop_lag_seconds"]
    assert family.type == "histogram"
    buckets = [(s.labels["le"], s.value) for s in family.samples
               if s.name == "minloop_lag_seconds_bucket"]
    assert len(buckets) == len(lag.buckets())
    assert buckets[-1] == ("+Inf", lag.count)
    cumulative = 0
    for (le, value), (bound, count) in zip(buckets, lag.buckets()):
        cumulative += count
        assert value == cumulative
        assert float(le) == bound
    assert samples(family, "minloop_lag_seconds_count") == {
        ("minloop_lag_seconds_count", label): lag.count}
    assert samples(family, "minloop_lag_seconds_sum")[
        ("minloop_lag_seconds_sum", label)] == pytest.approx(lag.sum)
    # The loop was made to lag: a timer >= 49 ms late, in the buckets.
    assert lag.max >= 0.049
    below = max(v for le, v in buckets if float(le) < 0.049)
    assert below < lag.count
    # During the run: the same shape, read from the server's thread.
    assert during["minloop_lag_seconds"].type == "histogram"
    busy = [s for s in during["minloop_busy_time_seconds"].samples
            if s.name == "minloop_busy_time_seconds_sum"]
    assert busy[0].value >= 0.05   # the block is a busy stretch
    util = samples(during["minloop_utilization"])[("minloop_utilization", label)]
    assert 0.0 < util <= 1.0
    assert samples(during["minloop_active_seconds"])[
        ("minloop_active_seconds_total", label)] >= 0.05


def test_duplicate_series_refused_and_closed_loops_leave(loop):
    if not isinstance(loop, import_minloop().Loop) or not telemetry_built():
        pytest.skip("minloop's telemetry")
    import gc
    import warnings
    from minloop.telemetry.prometheus import MinloopCollector
    from prometheus_client.registry import DuplicateTimeseries
    minloop = import_minloop()
    registry = prometheus_client.CollectorRegistry()
    second = minloop.new_event_loop()
    MinloopCollector(second, registry, labels={"loop": "main"})
    # The same series twice, as prometheus_client's own metrics refuse: for
    # the same loop or another (successive loops under one label).
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        MinloopCollector(second, registry, labels={"loop": "main"})
    with pytest.raises(DuplicateTimeseries):
        MinloopCollector(loop, registry, labels={"loop": "main"})
    # The loop closed: its series leave the scrape, and a new loop may take
    # its labels.
    try:
        for _ in range(3):
            previous = second
            second = minloop.new_event_loop()
            previous.close()
            MinloopCollector(second, registry, labels={"loop": "main"})
        text = prometheus_client.generate_latest(registry).decode()
        assert text.count('minloop_iterations_total{loop="main"}') == 1, text
        assert len(registry._collector_to_names) == 1
    finally:
        second.close()
    # Closed, the last one leaves at the next scrape.
    text = prometheus_client.generate_latest(registry).decode()
    assert "minloop_iterations_total" not in text
    assert registry._collector_to_names == {}
    # A loop collected without close() leaves too.
    third = minloop.new_event_loop()
    MinloopCollector(third, registry, labels={"loop": "gone"})
    assert 'loop="gone"' in prometheus_client.generate_latest(registry).decode()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)   # unclosed, on purpose
        del third
        gc.collect()
    assert 'loop="gone"' not in prometheus_client.generate_latest(registry).decode()
    assert registry._collector_to_names == {}
