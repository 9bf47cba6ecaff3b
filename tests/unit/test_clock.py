"""The fixed cadence of the daemon's periodic steps (clock.next_tick and Daemon._loop)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from sloguard import daemon
from sloguard.clock import next_tick


@pytest.mark.parametrize(("origin", "interval", "now", "expected"), [
    (100.0, 15.0, 100.0, 115.0),  # right after the first run: one interval on
    (100.0, 15.0, 101.1, 115.0),  # a 1.1 s step does not push the next tick back
    (100.0, 15.0, 114.999, 115.0),
    (100.0, 15.0, 115.0, 130.0),  # exactly on a tick: the next one, never now again
    (100.0, 15.0, 131.2, 145.0),  # the step overran a tick: resume on the grid, no burst of late ticks
    (100.0, 15.0, 99.0, 115.0),  # a clock read before the origin still waits for the first tick
    (0.0, 0.5, 10.26, 10.5),
])
def test_next_tick(origin: float, interval: float, now: float, expected: float) -> None:
    assert next_tick(origin, interval, now) == pytest.approx(expected)


class _Loop:
    """What Daemon._loop reads of its daemon, and a monotonic clock that moves only when the loop sleeps or works."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.mono = 1000.0


@pytest.mark.parametrize(("durations", "starts"), [
    ([1.1, 1.1, 1.1, 1.1], [1000.5, 1015.5, 1030.5, 1045.5]),  # slow steps: still every 15 s, not every 16.1 s
    ([0.0, 20.0, 0.0, 0.0], [1000.5, 1015.5, 1045.5, 1060.5]),  # an overrun skips the tick it ran over
])
def test_loop_keeps_its_cadence(monkeypatch: pytest.MonkeyPatch, durations: list[float],
                                starts: list[float]) -> None:
    fake = _Loop()
    seen: list[float] = []

    def step() -> None:
        seen.append(fake.mono)
        fake.mono += durations[len(seen) - 1]
        if len(seen) == len(durations):
            fake.stopping.set()

    async def sleep(seconds: float) -> None:
        assert seconds >= 0
        fake.mono += seconds

    monkeypatch.setattr(daemon.time, "monotonic", lambda: fake.mono)
    monkeypatch.setattr(daemon.asyncio, "sleep", sleep)
    loop: Any = daemon.Daemon._loop
    asyncio.run(loop(fake, 15.0, step, first=0.5))
    assert seen == pytest.approx(starts)
