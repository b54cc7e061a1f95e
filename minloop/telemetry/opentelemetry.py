"""OpenTelemetry metrics for a minloop loop.

    from opentelemetry.sdk.metrics import MeterProvider
    from minloop.telemetry.opentelemetry import MinloopMetrics

    provider = MeterProvider(metric_readers=[reader])   # OTLP, Prometheus ...
    MinloopMetrics(asyncio.get_running_loop(), provider)

Needs opentelemetry-api and opentelemetry-sdk (`pip install
"minloop[opentelemetry]"`); importing minloop does not import them.  Each
collection (the reader's thread) reads the loop's telemetry (loop.stats(),
loop.utilization(), loop.lag, loop.busy_time, loop.stalls) while the loop runs
(docs/threading.md, item 18); nothing is recorded in between, so the loop
pays nothing for an exporter.

The names are Node's (`nodejs.eventloop.*`, OpenTelemetry's semantic
conventions for Node.js) with `nodejs.` replaced by `minloop.`; times in
seconds.  Each instrument carries the attributes given (attributes=, e.g.
{"loop": "main"} for several loops).

  Node's, for minloop's loop
    minloop.eventloop.utilization       gauge, 1: active / (idle + active)
                                        since the previous collection
    minloop.eventloop.time              counter, s, {minloop.eventloop.state:
                                        active | idle}: time blocked in the
                                        poller (idle) and the rest (active)
    minloop.eventloop.delay             histogram, s: how late each timer
                                        fired (loop.lag), the loop's own
                                        buckets
    minloop.eventloop.delay.{min,max,mean,p50,p90,p99}
                                        gauges, s: the same histogram's
                                        figures over the timers fired since
                                        the previous collection (as Node's
                                        are over its histogram's window;
                                        none when no timer fired; stddev has
                                        no counterpart: the loop keeps
                                        buckets, not squares)
  minloop's own
    minloop.eventloop.busy_time         histogram, s: busy stretches, from a
                                        poll's return to the next poll that
                                        may block (many iterations; the mean
                                        iteration: time{active} / iterations)
    minloop.eventloop.stalls            counter: callbacks that ran for the
                                        stall threshold or more (counted
                                        while the watchdog is armed:
                                        loop.set_stall_handler() or
                                        set_stall_threshold())
    minloop.eventloop.stall.duration    histogram, s: how long each ran
    minloop.eventloop.iterations        counter: loop iterations
    minloop.eventloop.callbacks         counter: callbacks run
    minloop.eventloop.polls             counter, {minloop.eventloop.poll.kind:
                                        blocked | immediate | skipped}
    minloop.eventloop.fd_events         counter: fd events the poller reported
    minloop.eventloop.timers.scheduled  counter
    minloop.eventloop.timers.fired      counter
    minloop.eventloop.timers.cancelled  counter
    minloop.eventloop.exceptions        counter: reports to the exception handler
    minloop.eventloop.ready             gauge: callbacks ready now (.max: the
                                        largest batch an iteration ran)
    minloop.eventloop.timers            gauge: timers pending now (.max)
    minloop.eventloop.fds               gauge: fds watched now (.max)

How the histograms reach a reader.  OpenTelemetry's API has no observable
histogram, and a Histogram instrument counts one record() per value: feeding
it the loop's counts would cost a Python call per timer fired (or per
iteration), which the loop never makes (no Python per record, by design).
The specification's answer for an aggregate kept elsewhere is a
MetricProducer whose data a reader adds to each collection; the Python SDK
does not have it yet (1.45).  So MinloopMetrics plays that part itself: it
wraps each reader's collection (the callback the MeterProvider hands the
reader) and appends the two histograms, each built at that moment from one
snapshot of the loop's buckets: explicit bounds = the loop's bounds (four
per power of two, 1.024e-06 to 68.7 s; the last bucket is +Inf), cumulative
since the loop started or since `hist.reset()` (which starts a new series:
a new start time).  Views do not apply to them, as the specification says
of a MetricProducer's data.
"""

from __future__ import annotations

import threading
import time
import weakref

try:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (AggregationTemporality, Histogram,
                                                  HistogramDataPoint, Metric, MetricsData,
                                                  ResourceMetrics, ScopeMetrics)
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
except ImportError as exc:
    raise ImportError(
        f"minloop.telemetry.opentelemetry needs opentelemetry-api and opentelemetry-sdk "
        f"({exc}): pip install \"minloop[opentelemetry]\"", name=exc.name) from exc

__all__ = ("MinloopMetrics",)

SCOPE = "minloop"
PREFIX = "minloop.eventloop."
DELAY_FIGURES = (("min", "min"), ("max", "max"), ("mean", "mean"),
                 ("p50", 50), ("p90", 90), ("p99", 99))


def _window(pairs, base, snap):
    """The delay figures (DELAY_FIGURES' fields) of the values recorded since
    `base` ((counts, sum) of an earlier snapshot; None: since the start),
    from bucket counts `pairs` ((bound, count), the last bound inf) of
    `snap`, or None if there are none.  Mean exact; min, max and percentiles
    within their bucket (a quarter of a power of two), min and max tightened
    by the histogram's own (its min is at most, its max at least, the
    window's)."""
    base_counts, base_sum = base if base is not None else ([0] * len(pairs), 0.0)
    deltas = [count - b for (_, count), b in zip(pairs, base_counts)]
    if any(d < 0 for d in deltas):   # reset() since: a new start
        deltas, base_sum = [count for _, count in pairs], 0.0
    n = sum(deltas)
    if n == 0:
        return None
    bounds = [bound for bound, _ in pairs]
    first = next(i for i, d in enumerate(deltas) if d)
    last = max(i for i, d in enumerate(deltas) if d)
    low = max(bounds[first - 1] if first else 0.0, snap.min)
    high = min(bounds[last], snap.max)
    figures = {"min": low, "max": high, "mean": max(snap.sum - base_sum, 0.0) / n}
    for p in (50, 90, 99):
        rank, seen = p / 100 * n, 0
        for i, d in enumerate(deltas):
            if d and seen + d >= rank:
                lo = max(bounds[i - 1] if i else 0.0, low)
                hi = min(bounds[i], high)
                figures[p] = min(max(lo + (hi - lo) * (rank - seen) / d, low), high)
                break
            seen += d
    return figures


def _version():
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("minloop")
    except PackageNotFoundError:
        return None


class MinloopMetrics:
    """One loop's telemetry as OpenTelemetry metrics of `meter_provider`.

    `loop` is a minloop loop (asyncio's has no telemetry: TypeError).
    `meter_provider` is opentelemetry-sdk's MeterProvider (None: the global
    one, which must then be an SDK MeterProvider).  Several loops on one
    provider share its instruments, told apart by their `attributes`.
    The histograms go to `readers` (default: every reader the provider was
    made with; one added later with add_metric_reader() needs readers=).
    close() stops exporting this loop.
    """

    def __init__(self, loop, meter_provider=None, *, attributes=None, readers=None):
        if not callable(getattr(loop, "stats", None)) or not hasattr(loop, "lag"):
            raise TypeError(
                f"MinloopMetrics needs a minloop loop (one with stats() and lag), "
                f"got {type(loop).__module__}.{type(loop).__qualname__}")
        loop.stats()   # NotImplementedError in a build without telemetry
        if meter_provider is None:
            from opentelemetry import metrics
            meter_provider = metrics.get_meter_provider()
        if not isinstance(meter_provider, MeterProvider):
            raise TypeError(
                f"MinloopMetrics needs opentelemetry-sdk's MeterProvider (the histograms "
                f"are added to its readers' collections), got "
                f"{type(meter_provider).__module__}.{type(meter_provider).__qualname__}")
        if readers is None:
            # The readers the provider was made with (MeterProvider keeps
            # them here, in its configuration before 1.2x; there is no
            # public accessor).
            readers = getattr(meter_provider, "_metric_readers", None)
            if readers is None:
                readers = getattr(getattr(meter_provider, "_sdk_config", None),
                                  "metric_readers", None)
            if readers is None:
                raise TypeError("this opentelemetry-sdk's MeterProvider does not say "
                                "which readers it has: pass readers=")
        self.loop = loop
        self.attributes = dict(attributes or {})
        self._previous = None   # utilization at the previous collection
        self._delay_base = None     # loop.lag's (counts, sum) then
        self._delay_window = None   # the delay figures since then (None: no timer fired)
        self._series = {}       # histogram name -> (start time in ns, count seen)
        with _exporters_lock:
            exporter = _exporters.get(meter_provider)
            if exporter is None:
                exporter = _exporters[meter_provider] = _Exporter(meter_provider)
        self._exporter = exporter
        exporter.add(self, readers)

    def close(self):
        """Stop exporting this loop (its series end)."""
        self._exporter.remove(self)

    def __repr__(self):
        return f"<MinloopMetrics {self.attributes or ''} of {self.loop!r}>"


class _Exporter:
    """The instruments of one MeterProvider, and the loops they read.

    OpenTelemetry keeps one instrument per name and meter (a second with
    the same name is the first one again), so every loop exported to a
    provider goes through one set of callbacks, each loop a series of its
    own attributes."""

    def __init__(self, provider):
        self._lock = threading.Lock()
        self._sources = []
        self._readers = set()   # ids of the readers already carrying the histograms
        self._scope = InstrumentationScope(SCOPE, _version())
        self._resource = getattr(getattr(provider, "_sdk_config", None), "resource", None)
        self._instruments(provider.get_meter(SCOPE, _version()))

    def add(self, source, readers):
        with self._lock:
            self._sources.append(source)
            fresh = [r for r in readers if id(r) not in self._readers]
            self._readers.update(id(r) for r in fresh)
        for reader in fresh:
            self._attach(reader)

    def remove(self, source):
        with self._lock:
            if source in self._sources:
                self._sources.remove(source)

    def _each(self):
        with self._lock:
            return list(self._sources)

    # --- observable instruments (public API) ------------------------------

    def _instruments(self, meter):
        stat = self._stat
        counter, gauge = meter.create_observable_counter, meter.create_observable_gauge
        counter(PREFIX + "time", [self._time], unit="s",
                description="Time blocked in the poller (idle) and the rest (active).")
        gauge(PREFIX + "utilization", [self._utilization], unit="1",
              description="Event-loop utilization (Node's definition) since the previous "
                          "collection.")
        for name, field in DELAY_FIGURES:
            gauge(f"{PREFIX}delay.{name}", [self._delay(field)], unit="s",
                  description=f"How late timers fired: {name} of the delay histogram.")
        counter(PREFIX + "iterations", [stat("iterations")], unit="{iteration}",
                description="Loop iterations.")
        counter(PREFIX + "callbacks", [stat("callbacks")], unit="{callback}",
                description="Callbacks run.")
        counter(PREFIX + "polls", [self._polls], unit="{poll}",
                description="Polls by kind: blocked (had a timeout, may sleep), "
                            "immediate (zero timeout), skipped (no syscall).")
        counter(PREFIX + "fd_events", [stat("fd_events")], unit="{event}",
                description="fd events the poller reported.")
        for what in ("scheduled", "fired", "cancelled"):
            counter(f"{PREFIX}timers.{what}", [stat("timers_" + what)], unit="{timer}",
                    description=f"Timers {what}.")
        counter(PREFIX + "exceptions", [stat("exceptions")], unit="{exception}",
                description="Reports to the loop's exception handler.")
        counter(PREFIX + "stalls", [self._stalls], unit="{stall}",
                description="Callbacks that ran for the stall threshold or more.")
        for name, now, most, unit in (("ready", "ready", "ready_max", "{callback}"),
                                      ("timers", "timers_live", "timers_max", "{timer}"),
                                      ("fds", "fds_watched", "fds_max", "{fd}")):
            gauge(PREFIX + name, [stat(now)], unit=unit, description=f"{name} now.")
            gauge(f"{PREFIX}{name}.max", [stat(most)], unit=unit,
                  description=f"The most {name} at once.")

    def _stat(self, field):
        def read(options: CallbackOptions):
            return [Observation(getattr(s.loop.stats(), field), s.attributes)
                    for s in self._each()]
        return read

    def _stalls(self, options):
        return [Observation(s.loop.stalls.count, s.attributes) for s in self._each()]

    def _polls(self, options):
        found = []
        for s in self._each():
            stats = s.loop.stats()
            found += [Observation(getattr(stats, "polls_" + kind),
                                  {**s.attributes, PREFIX + "poll.kind": kind})
                      for kind in ("blocked", "immediate", "skipped")]
        return found

    def _time(self, options):
        found = []
        for s in self._each():
            u = s.loop.utilization()
            found += [Observation(u.active, {**s.attributes, PREFIX + "state": "active"}),
                      Observation(u.idle, {**s.attributes, PREFIX + "state": "idle"})]
        return found

    def _utilization(self, options):
        found = []
        for s in self._each():
            with self._lock:   # readers may collect from several threads
                now = s.loop.utilization()
                since = s.loop.utilization(s._previous) if s._previous is not None else now
                s._previous = now
            found.append(Observation(since.utilization, s.attributes))
        return found

    def _delay(self, field):
        def read(options):
            found = []
            for s in self._each():
                window = s._delay_window
                if window is not None:   # no timer fired in the window: no figure
                    found.append(Observation(window[field], s.attributes))
            return found
        return read

    def _advance_delay_windows(self):
        # A collection begins: the delay gauges report the timers fired since
        # the previous one (as utilization does), not since the loop began,
        # so that a recent stall shows on a long-lived service.
        for s in self._each():
            snap = s.loop.lag.snapshot()
            pairs = snap.buckets()
            counts = [count for _, count in pairs]
            with self._lock:
                base, s._delay_base = s._delay_base, (counts, snap.sum)
            s._delay_window = _window(pairs, base, snap)

    # --- the histograms, added to each reader's collection -----------------

    def _attach(self, reader):
        """Make `reader`'s every collection carry the loops' histograms.

        The reader's collection is the callback its MeterProvider set with
        reader._set_collect_callback (an SDK-internal hand-off, there since
        the SDK's first stable metrics; a MetricProducer will replace it)."""
        inner = getattr(reader, "_collect", None)
        if inner is None:
            raise TypeError(f"{type(reader).__qualname__} is not registered with a "
                            f"MeterProvider (no collection to add the histograms to)")

        def collect(reader_, timeout_millis=10_000, **kwargs):
            self._advance_delay_windows()
            data = inner(reader_, timeout_millis=timeout_millis, **kwargs)
            return self._with_histograms(data)

        reader._set_collect_callback(collect)

    def _histogram(self, source, name, histogram, now):
        snap = histogram.snapshot()
        pairs = snap.buckets()
        with self._lock:
            start, seen = source._series.get(name, (now, 0))
            if snap.count < seen:   # reset(): a new series starts now
                start = now
            source._series[name] = (start, snap.count)
        return HistogramDataPoint(
            attributes=dict(source.attributes), start_time_unix_nano=start,
            time_unix_nano=now, count=snap.count, sum=snap.sum,
            bucket_counts=[count for _, count in pairs],
            explicit_bounds=[bound for bound, _ in pairs[:-1]],   # the last is +Inf
            min=snap.min if snap.count else 0.0, max=snap.max if snap.count else 0.0)

    def _with_histograms(self, data):
        now = time.time_ns()
        sources = self._each()
        if not sources:
            return data
        ours = []
        for name, attr, description in (
                ("delay", "lag", "How late timers fired (now - when())."),
                ("busy_time", "busy_time", "Busy stretches: from a poll's return to "
                 "the next poll that may block."),
                ("stall.duration", "stalls", "How long each stalled callback ran.")):
            found = [self._histogram(s, name, getattr(s.loop, attr), now)
                     for s in sources]
            ours.append(Metric(name=PREFIX + name, description=description, unit="s",
                               data=Histogram(data_points=found, aggregation_temporality=
                                              AggregationTemporality.CUMULATIVE)))
        if data is None or not data.resource_metrics:
            from opentelemetry.sdk.resources import Resource
            return MetricsData(resource_metrics=[ResourceMetrics(
                resource=self._resource or Resource.create({}),
                scope_metrics=[ScopeMetrics(self._scope, ours, "")], schema_url="")])
        first, *rest = data.resource_metrics
        scopes, added = [], False
        for scope_metrics in first.scope_metrics:
            if not added and scope_metrics.scope.name == SCOPE:
                scope_metrics = ScopeMetrics(scope_metrics.scope,
                                             list(scope_metrics.metrics) + ours,
                                             scope_metrics.schema_url)
                added = True
            scopes.append(scope_metrics)
        if not added:
            scopes.append(ScopeMetrics(self._scope, ours, ""))
        return MetricsData(resource_metrics=[
            ResourceMetrics(first.resource, scopes, first.schema_url), *rest])


# MeterProvider -> its _Exporter; gone with the provider.
_exporters = weakref.WeakKeyDictionary()
_exporters_lock = threading.Lock()
