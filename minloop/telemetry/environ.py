"""Telemetry switched on from the environment, with no line of the program
changed (docs/telemetry.md, "Switched on without touching code").

    MINLOOP_STALL=SECONDS         every loop logs each callback that blocks it
                                  for SECONDS or more (the asyncio logger,
                                  WARNING: the task and the line), and counts
                                  it (loop.stalls, minloop_stalls_total)
    MINLOOP_METRICS=[HOST:]PORT   the first loop starts prometheus_client's
                                  HTTP endpoint on HOST:PORT (HOST default:
                                  all interfaces, as prometheus_client's), and
                                  every loop is exported there, labelled
                                  loop="N" (the process's loops numbered from 1)

`python -m minloop run --stall SECONDS --metrics [HOST:]PORT ...` sets them
(so a server's worker processes, which inherit the environment, have them
too).  Loop() calls `arm(loop)` when either is set; nothing is imported or
read otherwise.  A value that cannot be used is an error at the first loop
made (ValueError, or ImportError without prometheus_client), not a silent
no-op.  A port already taken (a second worker process on the same port) is
logged once, as a warning, and that process's loops are not exported.
"""

import logging
import os
import threading

__all__ = ("STALL", "METRICS", "arm", "parse_stall", "parse_metrics")

STALL = "MINLOOP_STALL"
METRICS = "MINLOOP_METRICS"

_logger = logging.getLogger("asyncio")
_lock = threading.Lock()
# (host, port) -> the registry served there, or None if it could not listen.
_served = {}


def parse_stall(text):
    """Seconds from MINLOOP_STALL / --stall (ValueError if not > 0)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = None
    if seconds is None or not 0 < seconds < float("inf"):
        raise ValueError(f"{STALL}: expected the stall threshold in seconds "
                         f"(a positive number, e.g. 0.1), got {text!r}")
    return seconds


def parse_metrics(text):
    """(host, port) from MINLOOP_METRICS / --metrics: PORT, :PORT or
    HOST:PORT ([v6-address]:PORT); host "" is every interface."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise ValueError(f"{METRICS}: expected [HOST:]PORT (e.g. :9000 or "
                         f"127.0.0.1:9000), got {text!r}")
    return host, number


def log_stall(report):
    """The MINLOOP_STALL handler: one WARNING line on the asyncio logger,
    naming the task (or callback) and the line it blocked on."""
    where = ""
    if report.stack:
        frame = report.stack[-1]
        where = f" at {frame.filename}:{frame.lineno} in {frame.name}"
    _logger.warning("Stall: the loop was blocked for %.3f seconds%s by %s",
                    report.duration, where, report.callback)


def arm(loop):
    """What the environment asks of a new loop (Loop.__init__)."""
    stall = os.environ.get(STALL)
    metrics = os.environ.get(METRICS)
    if stall:
        loop.set_stall_handler(log_stall, parse_stall(stall))
    if metrics:
        _export(loop, *parse_metrics(metrics))


def _export(loop, host, port):
    try:
        import prometheus_client
    except ImportError:
        raise ImportError(f"{METRICS} needs prometheus_client: pip install "
                          f"\"minloop[prometheus]\"") from None
    from .prometheus import MinloopCollector
    with _lock:
        if (host, port) not in _served:
            registry = prometheus_client.REGISTRY
            try:
                prometheus_client.start_http_server(port, addr=host or "0.0.0.0",
                                                    registry=registry)
            except OSError as exc:
                _logger.warning("%s=%s: cannot listen (%s): the loops of process %d are "
                                "not exported", METRICS, os.environ.get(METRICS), exc,
                                os.getpid())
                registry = None
            _served[(host, port)] = registry
        registry = _served[(host, port)]
    if registry is not None:
        _fd, number = loop._telemetry_page
        MinloopCollector(loop, registry, labels={"loop": str(number)})
