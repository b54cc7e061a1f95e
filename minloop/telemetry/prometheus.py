"""A prometheus_client collector for a minloop loop.

    from minloop.telemetry.prometheus import MinloopCollector
    MinloopCollector(asyncio.get_running_loop())   # registers with REGISTRY
    prometheus_client.start_http_server(9000)

Each scrape reads the loop's telemetry (loop.stats(), loop.utilization(),
loop.lag, loop.busy_time, loop.stalls) from the scraping thread while the loop runs
(docs/threading.md, item 18); nothing is recorded in between, so an unscraped
collector costs nothing.  Times are in seconds.  The metrics, all under the
`minloop_` prefix (another with namespace=), each with the collector's
constant labels (labels=, e.g. {"loop": "main"} for several loops):

  counters
    minloop_iterations_total            loop iterations
    minloop_callbacks_total             callbacks run
    minloop_polls_total{kind}           polls by kind: blocked (had a timeout,
                                        may sleep), immediate (zero timeout),
                                        skipped (no syscall needed)
    minloop_fd_events_total             fd events the poller reported
    minloop_timers_scheduled_total      timers scheduled (call_later/call_at)
    minloop_timers_fired_total          timers that came due and were queued
    minloop_timers_cancelled_total      timers cancelled before they came due
    minloop_exceptions_total            reports to the exception handler
    minloop_stalls_total                callbacks that ran for the stall
                                        threshold or more (counted while the
                                        watchdog is armed: set_stall_handler()
                                        or set_stall_threshold())
    minloop_idle_seconds_total          time blocked in the poller
    minloop_active_seconds_total        the rest of the time spent running
  gauges
    minloop_utilization                 active / (idle + active) since the
                                        previous scrape of this collector
                                        (rate() of the two counters above
                                        gives the same over any window)
    minloop_ready_callbacks             callbacks ready now
    minloop_ready_callbacks_max         the largest batch an iteration ran
    minloop_timers                      timers pending now
    minloop_timers_max                  the most pending as an iteration
                                        popped the due ones
    minloop_fds                         fds watched now
    minloop_fds_max                     the most watched at once
  histograms (the loop's own buckets, one to one: four per power of two
  from 1.024e-06 to 68.7 s, then +Inf)
    minloop_lag_seconds                 how late each timer fired
    minloop_busy_time_seconds           busy stretches: from a poll's return
                                        to the next poll that may block (many
                                        iterations: the mean iteration is
                                        rate(active) / rate(iterations))
    minloop_stall_seconds               how long each stalled callback ran
"""

import threading
import weakref

from prometheus_client.core import (REGISTRY, CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
from prometheus_client.registry import DuplicateTimeseries
from prometheus_client.utils import floatToGoString

__all__ = ("MinloopCollector",)

# registry -> {(prefix, labels): collector}: the series each registry's
# collectors expose.  prometheus_client's registry finds duplicates through
# describe(), by name only; these collectors share names (several loops,
# told apart by their labels), so the check on names and labels is ours.
_exposed = weakref.WeakKeyDictionary()
_exposed_lock = threading.Lock()


class MinloopCollector:
    """Exposes one loop's telemetry to prometheus_client.

    `loop` is a minloop loop (asyncio's has no telemetry: TypeError).
    Registered with `registry` at once, as prometheus_client's own
    collectors are (None: not registered).  A second collector with the same
    namespace and labels in one registry raises DuplicateTimeseries (a
    ValueError, as prometheus_client's own metrics do) while the first one's
    loop is open.  The collector holds its loop weakly: once the loop is
    closed or collected, it leaves the registry (at the next scrape, or as
    another collector takes its labels), so a program that makes a loop per
    test or per worker does not grow its scrape.
    """

    def __init__(self, loop, registry=REGISTRY, *, namespace="minloop", labels=None):
        if not callable(getattr(loop, "stats", None)) or not hasattr(loop, "lag"):
            raise TypeError(
                f"MinloopCollector needs a minloop loop (one with stats() and lag), "
                f"got {type(loop).__module__}.{type(loop).__qualname__}")
        loop.stats()   # NotImplementedError in a build without telemetry
        self._loop = weakref.ref(loop)
        self._prefix = f"{namespace}_" if namespace else ""
        self._labels = dict(labels or {})
        # Scrapes may come from several threads at once.
        self._lock = threading.Lock()
        self._previous = None
        self._registry = None
        if registry is not None:
            self._register(registry)

    def _register(self, registry):
        key = (self._prefix, tuple(sorted(self._labels.items())))
        with _exposed_lock:
            series = _exposed.setdefault(registry, {})
            other = series.get(key)
            if other is not None and other._live() is not None:
                labels = ",".join(f'{k}="{v}"' for k, v in key[1])
                raise DuplicateTimeseries({f"{self._prefix}iterations_total{{{labels}}}"})
            if other is not None:
                other._leave()
            registry.register(self)
            series[key] = self
            self._registry = registry

    def _live(self):
        """The loop, or None once it is closed or collected."""
        loop = self._loop()
        if loop is None or loop.is_closed():
            return None
        return loop

    def _leave(self):
        """Unregister (idempotent)."""
        registry, self._registry = self._registry, None
        if registry is None:
            return
        try:
            registry.unregister(self)
        except KeyError:
            pass   # unregistered by the program
        series = _exposed.get(registry)
        key = (self._prefix, tuple(sorted(self._labels.items())))
        if series is not None and series.get(key) is self:
            del series[key]

    def _family(self, kind, name, doc, value=None, **kwargs):
        names = list(self._labels) + list(kwargs.pop("labels", ()))
        family = kind(self._prefix + name, doc, labels=names, **kwargs)
        if value is not None:
            family.add_metric(list(self._labels.values()), value)
        return family

    def _histogram(self, name, doc, histogram):
        snap = histogram.snapshot()
        buckets, cumulative = [], 0
        for bound, count in snap.buckets():
            cumulative += count
            buckets.append((floatToGoString(bound), cumulative))
        family = self._family(HistogramMetricFamily, name, doc, unit="seconds")
        family.add_metric(list(self._labels.values()), buckets, snap.sum)
        return family

    def collect(self):
        loop = self._live()
        if loop is None:
            # Closed or collected: no series, and out of the registry.  (The
            # registry calls collect() outside its lock.)
            with _exposed_lock:
                self._leave()
            return
        s = loop.stats()
        u = loop.utilization()
        with self._lock:
            since = loop.utilization(self._previous) if self._previous is not None else u
            self._previous = u
        counter, gauge = CounterMetricFamily, GaugeMetricFamily
        yield self._family(counter, "iterations", "Loop iterations.", s.iterations)
        yield self._family(counter, "callbacks", "Callbacks run.", s.callbacks)
        polls = self._family(counter, "polls", "Polls by kind: blocked (had a timeout, "
                             "may sleep), immediate (zero timeout), skipped (no syscall).",
                             labels=["kind"])
        for kind in ("blocked", "immediate", "skipped"):
            polls.add_metric(list(self._labels.values()) + [kind], getattr(s, "polls_" + kind))
        yield polls
        yield self._family(counter, "fd_events", "fd events the poller reported.", s.fd_events)
        yield self._family(counter, "timers_scheduled", "Timers scheduled.", s.timers_scheduled)
        yield self._family(counter, "timers_fired", "Timers that came due.", s.timers_fired)
        yield self._family(counter, "timers_cancelled", "Timers cancelled before they "
                           "came due.", s.timers_cancelled)
        yield self._family(counter, "exceptions", "Reports to the loop's exception handler.",
                           s.exceptions)
        yield self._family(counter, "idle_seconds", "Time blocked in the poller.", u.idle)
        yield self._family(counter, "active_seconds", "Time running, not blocked in the "
                           "poller.", u.active)
        yield self._family(gauge, "utilization", "Event-loop utilization (Node's "
                           "definition) since the previous scrape.", since.utilization)
        yield self._family(gauge, "ready_callbacks", "Callbacks ready now.", s.ready)
        yield self._family(gauge, "ready_callbacks_max", "The largest batch of ready "
                           "callbacks an iteration ran.", s.ready_max)
        yield self._family(gauge, "timers", "Timers pending now.", s.timers_live)
        yield self._family(gauge, "timers_max", "The most timers pending as an "
                           "iteration popped the due ones.", s.timers_max)
        yield self._family(gauge, "fds", "fds watched now.", s.fds_watched)
        yield self._family(gauge, "fds_max", "The most fds watched at once.", s.fds_max)
        yield self._histogram("lag", "How late timers fired (now - when()).", loop.lag)
        yield self._histogram("busy_time", "Busy stretches: from a poll's return to "
                              "the next poll that may block.", loop.busy_time)
        stalls = loop.stalls
        yield self._family(counter, "stalls", "Callbacks that ran for the stall "
                           "threshold or more.", stalls.count)
        yield self._histogram("stall", "How long each stalled callback ran.", stalls)
