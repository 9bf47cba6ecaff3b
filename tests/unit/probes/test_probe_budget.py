"""A request's CPU budget: a stream that keeps the probe loop parsing fails as an event flood, a real one never does."""

from __future__ import annotations

import asyncio
import re

import pytest

from sloguard.model import ProbeResult
from sloguard.outcome import outcome
from sloguard.probes import PROBES
from sloguard.probes.budget import CpuBudget
from sloguard.probes.events import Events
from sloguard.probes.job import ProbeJob
from sloguard.probes.openai import decode_chat
from sloguard.probes.stream import make_session
from sloguard.probes.workload import Prompt
from tests.support import hostile_streams

MS = 1_000_000
CPU_FLOOD = re.compile(r"event flood: \d+ ms of CPU for 0 events in \d+\.\d\d s \(allowed 20 ms \+ 1 ms per event\)")


@pytest.mark.parametrize(("events", "used_ms", "over"), [
    (0, 0, False),
    (0, 20, False),  # BURST_S, however few events (the head, pings while queued)
    (0, 21, True),  # SSE comments or data-less events only: a flood the event cap never sees
    (100, 120, False),  # EVENT_S for each event delivered
    (100, 121, True),  # events that cost more than that to parse
])
def test_a_request_may_use_a_burst_and_a_share_per_event(events: int, used_ms: int, over: bool) -> None:
    budget = CpuBudget(start_ns=10 * MS)
    budget.charge(used_ms * MS)
    budget.charge(-5 * MS)  # a clock that went backwards charges nothing
    got = budget.over(2010 * MS, events)
    assert (got is not None) == over
    if got is not None:
        assert got == f"{used_ms} ms of CPU for {events} events in 2.00 s (allowed 20 ms + 1 ms per event)"


def test_events_stop_at_the_budget_however_few_events_they_count() -> None:
    """SSE comments count as no event: only the CPU they cost ends the stream (a 1 ms budget)."""
    events = Events(decode_chat, max_events=100, budget=CpuBudget(burst_s=0.001))
    error = asyncio.run(events.feed(1, b":\n\n" * 200_000))
    assert error is not None and error.startswith("event flood: ") and "of CPU" in error
    assert events.tally.events == 0 and events.error == error
    assert asyncio.run(events.feed(2, b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n')) == error  # stays failed


def test_a_real_answer_is_charged_and_never_over() -> None:
    budget = CpuBudget()
    events = Events(decode_chat, 320, budget)
    body = b'data: {"choices":[{"delta":{"content":"tok"}}]}\n\n'

    async def stream() -> list[str | None]:
        return [await events.feed(i, body) for i in range(256)]  # one read per token, as engines stream them

    assert asyncio.run(stream()) == [None] * 256
    assert events.tally.events == 256 and budget.used_ns > 0  # charged, and never over (no error above)


async def _flood(kind: str, max_events: int) -> ProbeResult:
    server = await hostile_streams.serve()
    port = server.sockets[0].getsockname()[1]
    job = ProbeJob(name="p", target="t", api="chat", url=f"http://127.0.0.1:{port}/{kind}", model="m",
                   timeout=30.0, max_events=max_events)
    async with server, make_session() as session:
        return await PROBES["chat"](session, job, Prompt("hello", 64, "short"))


def test_a_flood_the_event_cap_lets_through_fails_on_its_cpu_budget() -> None:
    r = asyncio.run(_flood("pings", 320))  # SSE comments: no event to count
    assert outcome(r) == "event_flood" and r.status_code == 200, r.error
    assert CPU_FLOOD.fullmatch(str(r.error)), r.error
