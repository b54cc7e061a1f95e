"""What a run was asked for, in one object the measuring functions, the runner
and the report read.

Its own module so that options.py (which makes it), runner.py and measure.py
(which read it) import it without importing each other: options.py imports
runner.py to start a run, and runner.py imports measure.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import procs

CHILD_TIMEOUT = 120.0


@dataclass
class Settings:
    """What a run was asked for: the measuring functions' and the report's view."""
    quick: bool
    rounds: int
    duration: float   # net: timed seconds per run
    warmup: float     # net: untimed seconds before it
    pin: procs.Pinning
    timeout: float = CHILD_TIMEOUT  # seconds before a measuring child is abandoned
