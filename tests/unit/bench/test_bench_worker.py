"""Coordinated omission: a client that stalls shows the stall in the scheduled-time latencies and send lag."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from virtual_time import VirtualTime

from sloguard.bench.order import StageOrder
from sloguard.bench.record import RequestRecord
from sloguard.bench.worker import OVERDUE_S, Worker, unpack
from sloguard.bench.workload import WorkloadSpec
from sloguard.model import ProbeResult
from sloguard.probes.job import ProbeJob

TTFT, E2E = 0.050, 0.200
JOB = ProbeJob(name="bench", target="sim", api="chat", url="http://127.0.0.1:1", model="m", max_tokens=8)


def _fake(vt: VirtualTime, stall_at: int | None, stall_s: float, sent: list[int]) -> Any:
    """A send that takes TTFT to the first token and E2E in all; request `stall_at` freezes the client first."""
    def factory(api: str) -> Any:
        async def send(_session: Any, job: ProbeJob, prompt: Any) -> ProbeResult:
            sent.append(vt.now)
            if len(sent) - 1 == stall_at:
                vt.advance(stall_s)  # the event loop is blocked: nothing else runs meanwhile
            await vt.sleep(E2E)
            return ProbeResult(ts=0.0, probe=job.name, target=job.target, model=job.model, api=api, ok=True,
                               connect_s=0.0, ttft_s=TTFT, e2e_s=E2E, output_tokens=8)
        return send
    return factory


def _run(order: StageOrder, stall_at: int | None = None, stall_s: float = 0.0) -> list[RequestRecord]:
    vt = VirtualTime(start_ns=1_000_000_000)
    out: list[Any] = []
    sent: list[int] = []
    worker = Worker(WorkloadSpec(JOB, seed=1), 0, out.append, clock=vt.clock, sleep=vt.sleep,
                    behaviours={"normal": _fake(vt, stall_at, stall_s, sent)})
    asyncio.run(vt.run(worker.run(order)))
    assert out[-1][0] == "done"
    return sorted((r for kind, *rest in out if kind == "records" for r in unpack(rest[0])), key=lambda r: r.seq)


def test_open_loop_stall_shows_in_lag_and_scheduled_latencies() -> None:
    """10 req/s; the client freezes 0.5 s while sending request 2: requests due meanwhile go out late."""
    arrivals = tuple((i, i * 0.1) for i in range(10))
    recs = _run(StageOrder(stage=0, kind="rate", start_ns=1_000_000_000, arrivals=arrivals), stall_at=2, stall_s=0.5)
    assert [r.seq for r in recs] == list(range(10))
    lag = {r.seq: r.send_lag_s for r in recs}
    for seq in (0, 1, 2):
        assert lag[seq] == pytest.approx(0.0, abs=1e-4)
    # request 3 was due at 0.3 s but the client was frozen until 0.7 s; 4..6 were due before 0.7 too
    for seq, due in ((3, 0.3), (4, 0.4), (5, 0.5), (6, 0.6)):
        assert lag[seq] == pytest.approx(0.7 - due, abs=1e-3)
        rec = recs[seq]
        assert rec.result.ttft_s == TTFT  # the server-side view of the request is unchanged...
        assert rec.ttft_sched_s == pytest.approx(0.7 - due + TTFT, abs=1e-3)  # ...the user's is not
        assert rec.e2e_sched_s == pytest.approx(0.7 - due + E2E, abs=1e-3)
    for seq in (7, 8, 9):
        assert lag[seq] == pytest.approx(0.0, abs=1e-4)


def test_closed_loop_schedules_each_request_when_its_stream_frees() -> None:
    recs = _run(StageOrder(stage=0, kind="concurrency", start_ns=1_000_000_000, streams=2, stride=1, quota=6))
    assert len(recs) == 6 and sorted(r.seq for r in recs) == list(range(6))
    by_start = sorted(recs, key=lambda r: r.sent_s)
    assert [round(r.scheduled_s, 3) for r in by_start] == [0.0, 0.001, 0.2, 0.201, 0.4, 0.401]  # 1 ms apart
    assert all(r.send_lag_s == pytest.approx(0.0, abs=1e-4) for r in recs)


def test_warmup_requests_are_marked_by_time_and_by_count() -> None:
    arrivals = tuple((i, i * 0.1) for i in range(10))
    by_time = _run(StageOrder(stage=0, kind="rate", start_ns=1_000_000_000, arrivals=arrivals, warmup_s=0.25))
    assert [r.seq for r in by_time if r.warmup] == [0, 1, 2]
    by_count = _run(StageOrder(stage=0, kind="concurrency", start_ns=1_000_000_000, streams=1, quota=3, warmup_n=2))
    assert [r.warmup for r in by_count] == [True, True, False, False, False]


def test_stop_ends_the_stage_and_counts_requests_in_flight() -> None:
    vt = VirtualTime(start_ns=1_000_000_000)
    out: list[Any] = []
    worker = Worker(WorkloadSpec(JOB, seed=1), 3, out.append, clock=vt.clock, sleep=vt.sleep,
                    behaviours={"normal": _fake(vt, None, 0.0, [])})
    order = StageOrder(stage=5, kind="concurrency", start_ns=1_000_000_000, streams=4, end_s=60.0)

    async def scenario() -> None:
        run = asyncio.ensure_future(worker.run(order))
        await vt.sleep(1.05)
        worker._stop.set()  # what the ("stop", None) command does
        await run
    asyncio.run(vt.run(scenario()))
    kind, stage, index, lag, cancelled = out[-1]
    assert (kind, stage, index, cancelled) == ("done", 5, 3, 4)
    recs = [r for k, *rest in out if k == "records" for r in unpack(rest[0])]
    assert len(recs) == 4 * 5  # five full 0.2 s rounds of four streams before the stop at 1.05 s
    assert lag.samples > 0



def _lost_deadline(vt: VirtualTime, hangs: set[int], sent: list[int]) -> Any:
    """A send whose request numbers in `hangs` never end by themselves (their own deadline was lost)."""
    def factory(api: str) -> Any:
        async def send(_session: Any, job: ProbeJob, prompt: Any) -> ProbeResult:
            sent.append(vt.now)
            if len(sent) - 1 in hangs:
                await asyncio.get_running_loop().create_future()  # nothing resolves it: only a cancel ends it
            await vt.sleep(E2E)
            return ProbeResult(ts=0.0, probe=job.name, target=job.target, model=job.model, api=api, ok=True,
                               connect_s=0.0, ttft_s=TTFT, e2e_s=E2E, output_tokens=8)
        return send
    return factory


def test_a_request_whose_deadline_is_lost_is_abandoned_and_its_stream_goes_on() -> None:
    vt = VirtualTime(start_ns=1_000_000_000)
    out: list[Any] = []
    worker = Worker(WorkloadSpec(JOB, seed=1), 0, out.append, clock=vt.clock, sleep=vt.sleep,
                    behaviours={"normal": _lost_deadline(vt, {1}, [])})
    order = StageOrder(stage=0, kind="concurrency", start_ns=1_000_000_000, streams=1, quota=3)
    asyncio.run(vt.run(worker.run(order)))
    assert out[-1][0] == "done" and out[-1][4] == 0  # the stage ended by itself, nothing left in flight
    recs = sorted((r for kind, *rest in out if kind == "records" for r in unpack(rest[0])), key=lambda r: r.seq)
    assert [r.result.ok for r in recs] == [True, False, True]
    lost = recs[1]
    assert (lost.result.error or "").startswith(f"timeout after {JOB.timeout:g}s (abandoned {OVERDUE_S:g}s later")
    assert lost.ended_s - lost.sent_s == pytest.approx(JOB.timeout + OVERDUE_S, abs=1e-3)
    assert recs[2].sent_s == pytest.approx(lost.ended_s, abs=1e-3)  # the stream went on at once


def test_a_stop_still_cancels_a_request_in_flight_and_is_not_taken_for_its_deadline() -> None:
    vt = VirtualTime(start_ns=1_000_000_000)
    out: list[Any] = []
    worker = Worker(WorkloadSpec(JOB, seed=1), 0, out.append, clock=vt.clock, sleep=vt.sleep,
                    behaviours={"normal": _lost_deadline(vt, {0, 1}, [])})
    order = StageOrder(stage=2, kind="concurrency", start_ns=1_000_000_000, streams=2, quota=4)

    async def scenario() -> None:
        run = asyncio.ensure_future(worker.run(order))
        await vt.sleep(1.0)
        worker._stop.set()
        await run
    asyncio.run(vt.run(scenario()))
    assert out[-1][:2] == ("done", 2) and out[-1][4] == 2  # both requests counted as cancelled in flight
    assert not [r for kind, *rest in out if kind == "records" for r in unpack(rest[0])]  # none became a record
