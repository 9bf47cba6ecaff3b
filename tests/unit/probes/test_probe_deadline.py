"""The deadline timer (sloguard.probes.deadline): it asks whether the answer arrived before it cancels anything."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from sloguard.probes.deadline import Deadline


async def _deadline(arrived: Callable[[int], bool], timeout_s: float, body_s: float) -> Deadline:
    deadline = Deadline(timeout_s, arrived)
    async with deadline:
        await asyncio.sleep(body_s)
    return deadline


def _boom(_deadline_ns: int) -> bool:
    raise ValueError("a peer's bytes broke the check")


@pytest.mark.parametrize(("arrived", "timeout_s", "body_s", "outcome_"), [
    (lambda _: True, 0.1, 0.15, "finished"),  # complete in time: left to finish (its CPU work) within a timeout more
    (lambda _: False, 0.01, 1.0, "timeout"),  # not complete: cancelled at the deadline
    (lambda _: True, 0.01, 1.0, "timeout"),  # complete, but finishing took another whole timeout: cancelled then
    (_boom, 0.01, 1.0, "timeout"),  # a check that fails is a timeout, never a request left hanging
])
def test_the_timer_asks_whether_the_answer_arrived(arrived: Callable[[int], bool], timeout_s: float, body_s: float,
                                                   outcome_: str) -> None:
    try:
        d = asyncio.run(_deadline(arrived, timeout_s, body_s))
    except TimeoutError:
        assert outcome_ == "timeout"
    else:
        assert outcome_ == "finished" and d.extended and not d.expired


def test_a_request_finished_before_the_timer_ran_is_judged_by_its_last_arrival() -> None:
    async def main() -> Deadline:
        async with Deadline(10.0, lambda _: False) as d:
            return d

    d = asyncio.run(main())
    assert not d.missed(d.deadline_ns) and d.missed(d.deadline_ns + 1) and not d.missed(0)


def test_an_outer_cancellation_is_not_turned_into_a_timeout() -> None:
    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().call_later(0.01, task.cancel)
        async with Deadline(10.0, lambda _: False):
            await asyncio.sleep(1.0)

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
