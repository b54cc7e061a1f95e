"""Telemetry end to end: a real server (uvicorn) on minloop, a block and a
busy loop in an endpoint, and what an operator sees.

The server runs on its own thread; a plain HTTP client (http.client) hits
two endpoints, one that blocks the loop (time.sleep(0.2)) and one that
busy-loops in pure Python for 0.2 s.  A Prometheus scrape (prometheus_client's
own HTTP server, parsed with prometheus_client.parser) taken during the
block shows the loop's utilization near 1, and one after it shows the timer
lag's p99 above 0.1 s (uvicorn's own 0.1 s tick fell due during the block).
For comparison, the sleep-drift probe one would write on asyncio's loop
sees the same block, on both loops; on minloop no probe is needed.

README's "Watching a loop" points here as the example of an operator's view.
"""

import asyncio
import http.client
import inspect
import threading
import time
import urllib.request

import pytest

from conftest import DAEMON_THREADS, import_minloop

uvicorn = pytest.importorskip("uvicorn", reason="uvicorn not installed (the test extra has it)")
prometheus_client = pytest.importorskip(
    "prometheus_client", reason="prometheus_client not installed (the test extra has it)")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

BLOCK = 0.2
# Set as an endpoint starts stalling the loop (the test's thread waits for it).
stalling = threading.Event()
# The sleep-drift probe's period: a timer pending at any moment, as a
# server's periodic jobs keep one.
PROBE = 0.05


def telemetry_built():
    return import_minloop().loop._build_flags()["telemetry"]


def blocking_endpoint():
    time.sleep(BLOCK)   # the line a stall report must point at


def busy_endpoint():
    deadline = time.perf_counter() + BLOCK
    n = 0
    while time.perf_counter() < deadline:
        n += 1
    return n


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    assert scope["type"] == "http"
    await receive()
    if scope["path"] == "/block":
        stalling.set()
        blocking_endpoint()
    elif scope["path"] == "/busy":
        stalling.set()
        busy_endpoint()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": scope["path"].encode()})


class ServerThread:
    """uvicorn on `loop`, run on a thread of its own (as a server's loop
    runs while an exporter's thread reads it)."""

    def __init__(self, loop, probe=False):
        self.loop = loop
        self.drift = []   # the sleep-drift probe's readings (seconds late)
        self._probe = probe
        self._started = threading.Event()
        self._error = None
        self.thread = threading.Thread(target=self._run, daemon=DAEMON_THREADS)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported to the test's thread
            self._error = exc
            self._started.set()

    async def _probe_drift(self):
        # The probe an operator writes without loop telemetry: sleep a
        # little, see how late the wake-up was.
        while True:
            before = time.monotonic()
            await asyncio.sleep(PROBE)
            self.drift.append(time.monotonic() - before - PROBE)

    async def _serve(self):
        config = uvicorn.Config(app, host="127.0.0.1", port=0, loop="none", http="h11",
                                ws="none", lifespan="on", log_level="warning")
        self.server = uvicorn.Server(config)
        task = asyncio.ensure_future(self.server.serve())
        while not self.server.started:
            if task.done():
                task.result()
                raise AssertionError("uvicorn stopped before it started")
            await asyncio.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        probe = asyncio.ensure_future(self._probe_drift()) if self._probe else None
        self._started.set()
        await task
        if probe is not None:
            probe.cancel()
            try:
                await probe
            except asyncio.CancelledError:
                pass

    def __enter__(self):
        self.thread.start()
        assert self._started.wait(30), "uvicorn did not start in 30 s"
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(30)
        assert not self.thread.is_alive(), "uvicorn did not stop"
        if self._error is not None and exc[0] is None:
            raise self._error

    def get(self, path):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            assert resp.status == 200
            return resp.read()
        finally:
            conn.close()

    def get_in_background(self, path):
        thread = threading.Thread(target=self.get, args=(path,), daemon=DAEMON_THREADS)
        thread.start()
        return thread


@pytest.fixture
def scraped():
    """(registry, scrape()): prometheus_client's HTTP server on a registry
    of its own; scrape() fetches /metrics and parses it."""
    registry = prometheus_client.CollectorRegistry()
    httpd, thread = prometheus_client.start_http_server(0, addr="127.0.0.1",
                                                         registry=registry)

    def scrape():
        url = f"http://127.0.0.1:{httpd.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        return {f.name: f for f in text_string_to_metric_families(text)}

    try:
        yield registry, scrape
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def value(families, name, sample_name=None):
    (sample,) = [s for s in families[name].samples if s.name == (sample_name or name)]
    return sample.value


def buckets(families, name):
    """[(upper bound, cumulative count)] of a histogram family."""
    return [(float(s.labels["le"]), s.value) for s in families[name].samples
            if s.name == name + "_bucket"]


def quantile(before, after, q):
    """histogram_quantile(q) of the observations between two scrapes: the
    upper bound of the bucket the q-th of them falls in."""
    delta = [(le, b - a) for (le, b), (_, a) in zip(after, before)]
    total = delta[-1][1]
    assert total > 0, "no timer fired between the two scrapes"
    for le, cumulative in delta:
        if cumulative >= q * total:
            return le
    return float("inf")


@pytest.fixture
def prompt_threads():
    """The busy endpoint holds the GIL; the scraping threads get it at each
    switch interval (5 ms), and a scrape takes many switches.  Shorter
    switches keep the mid-stall scrape inside the stall."""
    import sys
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    yield
    sys.setswitchinterval(interval)


@pytest.mark.parametrize("path", ["/block", "/busy"])
@pytest.mark.main_interpreter("daemon threads")
def test_prometheus_sees_a_stalled_endpoint(path, scraped, prompt_threads):
    if not telemetry_built():
        pytest.skip("built with MINLOOP_NO_TELEMETRY=1")
    from minloop.telemetry.prometheus import MinloopCollector
    registry, scrape = scraped
    loop = import_minloop().new_event_loop()
    try:
        MinloopCollector(loop, registry)
        # The probe keeps a timer pending: whichever falls due during the
        # stall fires late (uvicorn's own 0.1 s tick may not: its next
        # sleep starts only when the tick's task resumes).
        with ServerThread(loop, probe=True) as server:
            assert server.get("/") == b"/"
            time.sleep(0.15)   # a quiet stretch: uvicorn ticks, the loop idles
            before = scrape()
            stalling.clear()
            client = server.get_in_background(path)
            assert stalling.wait(30)
            scrape()   # utilization is since the previous scrape: start now
            # During the stall, from the scraping thread: the loop has been
            # busy all the time since.
            time.sleep(BLOCK / 4)
            during = scrape()
            client.join(30)
            assert not client.is_alive()
            server.get("/")   # the loop answers again
            after = scrape()
    finally:
        loop.close()

    # Utilization since the previous scrape (taken as the stall began), read
    # mid-stall: Node's definition, active / (idle + active).
    assert value(during, "minloop_utilization") > 0.9
    # The stall is one busy stretch of at least BLOCK.
    spans = buckets(after, "minloop_busy_time_seconds")
    assert quantile(buckets(before, "minloop_busy_time_seconds"), spans, 1.0) >= BLOCK
    # A timer fell due during the stall and fired late: the lag's p99 over
    # the window is above 0.1 s.
    assert quantile(buckets(before, "minloop_lag_seconds"),
                    buckets(after, "minloop_lag_seconds"), 0.99) > 0.1
    active = "minloop_active_seconds", "minloop_active_seconds_total"
    assert value(after, *active) - value(before, *active) >= BLOCK * 0.9


def test_sleep_drift_probe_for_comparison(loop):
    # The probe one writes where the loop keeps no figures (asyncio's) sees
    # the stall as a late wake-up.  On minloop the same stall is in the
    # loop's own figures without a probe: busy_time holds the busy
    # stretch itself; lag holds it too when a timer fell due during it (a
    # timer popped in the stall's own iteration is on time, though the task
    # it wakes resumes only after the stall: the probe's reading, not lag's).
    minloop = import_minloop()
    with ServerThread(loop, probe=True) as server:
        time.sleep(PROBE)
        server.get("/block")
        time.sleep(PROBE * 2)
    assert max(server.drift) >= BLOCK * 0.75
    if isinstance(loop, minloop.Loop) and telemetry_built():
        assert loop.busy_time.max >= BLOCK
    loop.close()


# --- the stall report's source line ------------------------------------------
# loop.set_stall_handler(handler, threshold): the report's stack, sampled by
# the watchdog while the endpoint blocked, holds the endpoint's own line.

def test_stall_report_names_the_blocking_line():
    loop = import_minloop().new_event_loop()
    reports = []
    loop.set_stall_handler(reports.append, 0.1)
    try:
        with ServerThread(loop) as server:
            server.get("/block")
            deadline = time.monotonic() + 5
            while not reports and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        loop.close()
    assert reports, "no stall reported for a 0.2 s block"
    report = reports[0]
    assert report.duration >= 0.1
    assert report.gc_time >= 0.0
    sleep_line = next(i for i, text in enumerate(
        inspect.getsourcelines(blocking_endpoint)[0]) if "time.sleep" in text)
    lineno = blocking_endpoint.__code__.co_firstlineno + sleep_line
    assert any(frame.filename == __file__ and frame.lineno == lineno
               for frame in report.stack), report.stack
