"""Watching a minloop loop: its telemetry's types, and the exporters.

The loop measures itself (src/telemetry.h says where and at what cost):

    loop.stats()            LoopStats: counters and gauges, an immutable snapshot
    loop.utilization(prev)  Utilization: idle, active, utilization (Node's ELU)
    loop.lag                Histogram: how late timers fire (seconds)
    loop.busy_time          Histogram: busy stretches between two polls that may block
    loop.stalls             Histogram: stalled callbacks by duration (watchdog armed)

Any thread may read them while the loop runs (docs/threading.md, item 18).
Exporters are imported only when asked for:

    from minloop.telemetry.prometheus import MinloopCollector
"""

from ..loop_metrics import BOUNDS, Histogram, HistogramSnapshot, LoopStats, Utilization

__all__ = ("BOUNDS", "Histogram", "HistogramSnapshot", "LoopStats", "Utilization")
