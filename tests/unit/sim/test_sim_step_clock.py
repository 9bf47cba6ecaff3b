"""Steps follow model time: the next step starts at the previous step's planned end (bounded carry)."""

from __future__ import annotations

import pytest

from sloguard.sim.scheduler import MAX_CARRY_S, step_start


@pytest.mark.parametrize(("planned_end", "now", "expected"), [
    (None, 5.0, 5.0),  # idle engine: the step starts now
    (5.0, 5.0, 5.0),  # on time
    (5.0, 5.004, 5.0),  # the loop woke 4 ms late: the next step starts at the planned end, so it sleeps 4 ms less
    (5.0, 5.0 + MAX_CARRY_S + 1.0, 6.0),  # a long stall: only MAX_CARRY_S is made up
    (5.0, 4.9, 5.0),  # never earlier than planned
])
def test_step_start(planned_end: float | None, now: float, expected: float) -> None:
    assert step_start(planned_end, now) == pytest.approx(expected)


def test_throughput_over_steps_follows_the_model_despite_a_late_loop() -> None:
    """100 steps of 10 ms with the loop waking 3 ms late each time still end at 1.0 s (+ the last delay)."""
    planned_end: float | None = None
    now = 0.0
    for _ in range(100):
        planned_end = step_start(planned_end, now) + 0.010
        now = max(now, planned_end) + 0.003  # the loop wakes late, then does its work
    assert planned_end == pytest.approx(1.0)
