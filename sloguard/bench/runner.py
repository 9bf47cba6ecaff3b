"""Run the stages of a bench: orders to the workers, the server watched, each stage judged and written.

A stage ends at its size (duration or requests; requests in flight then finish, each bounded by the
request timeout), when it turns hopeless (≥ HOPELESS_MIN measured requests and > 50% failed: the rest
would only burn time), when it overruns its plan (plan.deadline_s: as if every request took its whole timeout
plus REQUEST_SLACK_S, then OVERRUN_GRACE_S), or on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sloguard.bench import plan as plans
from sloguard.bench.judge import HOPELESS_ERROR_RATIO, Criterion, Judgement, judge
from sloguard.bench.order import LoadKind
from sloguard.bench.pool import StageClient, WorkerPool
from sloguard.bench.progress import Progress
from sloguard.bench.record import RequestRecord, to_json
from sloguard.bench.results import ResultsFile
from sloguard.bench.search import Interrupted, search
from sloguard.bench.serverview import summarise_gpu, summarise_server
from sloguard.bench.summary import NORMAL, summarise
from sloguard.bench.table import load_text
from sloguard.bench.watch import ServerWatch
from sloguard.bench.workload import WorkloadSpec
from sloguard.slo.model import SLO, is_good

START_DELAY_S = 0.3  # orders reach every worker before the stage's common start
HOPELESS_MIN = 20
OVERRUN_GRACE_S = 10.0
REQUEST_SLACK_S = 1.0  # a request's stamping and record on a loaded host, beyond its timeout
STREAMS_PER_WORKER = 256  # benchmarks/bench_client.py: one worker loop keeps TTFT error p99 within goals
RATE_PER_WORKER = 200.0  # requests/s one worker schedules with lag p99 ≤ 1 ms (benchmarks/bench_client.py)


@dataclass
class Setup:
    """Everything a run needs, decided before the first stage."""

    workload: WorkloadSpec
    plan: plans.RunPlan
    slos: Sequence[SLO]
    criteria: Sequence[Criterion]
    results: ResultsFile
    watch: ServerWatch
    progress: Progress
    workers: int | None = None
    stall_s: float = 2.0
    cpus: int = 1


@dataclass
class _Stage:
    index: int
    kind: LoadKind
    load: float
    attempt: int
    records: list[RequestRecord] = field(default_factory=list)
    status: str = "complete"
    done: int = 0
    failed: int = 0


class Runner:
    """Run a sweep or a search; `interrupt()` (SIGINT) ends the running stage and the run."""

    def __init__(self, setup: Setup, pool: WorkerPool) -> None:
        self.s, self.pool = setup, pool
        self.stages: list[dict[str, Any]] = []
        self.search_row: dict[str, Any] | None = None
        self.interrupted = False
        self._running: _Stage | None = None
        self._pooled: dict[float, list[RequestRecord]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def interrupt(self) -> None:
        """End the running stage now and start no other."""
        if not self.interrupted:
            self.interrupted = True
            self.s.progress.note("interrupted: ending the current stage and writing the results")
        self._end_stage("interrupted")

    async def run(self) -> None:
        """Run the plan; stage rows land in `self.stages`, a search result in `self.search_row`."""
        self._loop = asyncio.get_running_loop()
        p = self.s.plan
        if p.mode == "sweep":
            for level in p.levels:
                if self.interrupted:
                    break
                await self.stage(p.kind, level, 0)
            return
        assert p.search is not None
        result = await asyncio.to_thread(search, p.search, self._measure_sync)
        self.search_row = {"type": "search", "kind": result.kind, "max_load": result.max_load,
                           "first_break": result.first_break, "low": result.low, "high": result.high,
                           "estimate": result.estimate, "breaks_first": result.breaks_first, "stages": result.stages,
                           "stopped": result.stopped, "points": [vars_of(pt) for pt in result.points],
                           "criteria": [c.name for c in self.s.criteria]}

    def _measure_sync(self, load: float, attempt: int) -> Judgement:
        """Run a stage from the search's thread on the runner's loop; Interrupted once the user stopped."""
        if self.interrupted:
            raise Interrupted
        assert self._loop is not None
        kind = self.s.plan.kind
        judgement = asyncio.run_coroutine_threadsafe(self.stage(kind, load, attempt), self._loop).result()
        if self.interrupted:
            raise Interrupted
        return judgement

    async def stage(self, kind: LoadKind, load: float, attempt: int) -> Judgement:
        """Run, judge and write one stage."""
        st = _Stage(len(self.stages), kind, load, attempt)
        size = self.s.plan.size
        workers = plans.worker_count(kind, load, self.s.workers, self.s.cpus, STREAMS_PER_WORKER, RATE_PER_WORKER)
        await self.pool.ensure(workers)
        rng = random.Random(f"{self.s.workload.seed}/{st.index}/arrivals")
        offsets = plans.arrivals(load, size, self.s.plan.arrival, rng) if kind == "rate" else []
        start_ns = time.perf_counter_ns() + int(START_DELAY_S * 1e9)
        start_wall = time.time() + START_DELAY_S
        orders = plans.orders(st.index, kind, load, size, workers, start_ns, offsets)
        planned = (size.warmup_s + size.duration_s) if size.duration_s is not None else None
        deadline = plans.deadline_s(orders, size, self.s.workload.job.timeout, REQUEST_SLACK_S)
        self.s.progress.start(f"stage {st.index} {load_text(kind, load)}",
                              f"{planned:g}s" if planned is not None else f"{size.requests} req")
        self.s.watch.reset()
        self.s.watch.start()
        self._running = st
        guard = asyncio.ensure_future(self._overrun(deadline))
        try:
            client = await self.pool.run(orders, self._received)
        finally:
            guard.cancel()
            self._running = None
            await self.s.watch.stop()
        return self._finish(st, client, start_wall, workers)

    async def _overrun(self, deadline_s: float) -> None:
        await asyncio.sleep(START_DELAY_S + deadline_s + OVERRUN_GRACE_S)
        self.s.progress.note(f"stage overran its plan ({deadline_s + OVERRUN_GRACE_S:.0f}s with every request "
                             "at its timeout): ending it; its requests still in flight are not counted")
        self._end_stage("overrun")

    def _received(self, records: list[RequestRecord]) -> None:
        st = self._running
        if st is None:
            return
        records = [r for r in records if r.stage == st.index]  # not a late one of an earlier, stopped stage
        st.records.extend(records)
        self.s.progress.add(records)
        measured = [r for r in records if not r.warmup]
        st.done += len(measured)
        st.failed += sum(1 for r in measured if not r.result.ok and r.behaviour == NORMAL)
        if st.done >= HOPELESS_MIN and st.failed > HOPELESS_ERROR_RATIO * st.done:
            self._end_stage("hopeless")

    def _end_stage(self, status: str) -> None:
        st = self._running
        if st is not None and st.status == "complete":
            st.status = status
            self.pool.stop_stage()

    def _finish(self, st: _Stage, client: StageClient, start_wall: float, workers: int) -> Judgement:
        measured = sorted((r for r in st.records if not r.warmup), key=lambda r: (r.scheduled_s, r.seq))
        # a repeat at the same load (the search's confirmation) is judged on every attempt's sample together
        pooled = self._pooled.setdefault(st.load, []) if st.attempt else []
        pooled.extend(measured)
        self._pooled[st.load] = pooled
        judgement = judge(self.s.criteria, [r for r in pooled if r.behaviour == NORMAL])  # unhappy ones: not judged
        row = self._row(st, measured, client, start_wall, workers, judgement)
        good = {s.name: s for s in self.s.slos if s.source == "probe" and s.goodput is not None}
        lines = [to_json(r, {n: is_good(r.result, s.goodput) for n, s in good.items()}, st.kind, st.load)
                 for r in measured]
        self.s.results.append([*lines, row])
        self.stages.append(row)
        self.s.progress.stage_line(_line(row))
        return judgement

    def _window(self, st: _Stage) -> tuple[float, float] | None:
        """Return the measured window of a timed stage that ran its course (stage seconds), else None."""
        size = self.s.plan.size
        if size.duration_s is None or st.status != "complete":
            return None
        return size.warmup_s, size.warmup_s + size.duration_s

    def _row(self, st: _Stage, measured: list[RequestRecord], client: StageClient, start_wall: float,
             workers: int, j: Judgement) -> dict[str, Any]:
        size = self.s.plan.size
        warm = [r for r in st.records if r.warmup]
        window_start = start_wall + (min((r.sent_s for r in measured), default=0.0) if size.warmup_n
                                     else size.warmup_s)
        status = "hopeless" if j.hopeless and st.status == "complete" else st.status
        return {
            "type": "stage", "stage": st.index, "load_kind": st.kind, "load": st.load, "attempt": st.attempt,
            "status": status, "started_at": round(start_wall, 3),
            "planned": {"duration_s": size.duration_s, "requests": size.requests},
            "warmup": {"seconds": size.warmup_s, "requests": len(warm), "excluded": True},
            **summarise(measured, self.s.slos, self.s.stall_s, st.records, self._window(st)),
            "client": {"workers": workers, "cancelled_in_flight": client.cancelled, "workers_died": client.died,
                       "loop_lag": [vars_of(lag) for lag in client.lags],
                       "loop_lag_p99_max": max((lag.p99 for lag in client.lags), default=None)},
            "server": summarise_server(self.s.watch.views, window_start),
            "scrape_failures": dict(self.s.watch.failures),
            "gpu": summarise_gpu(self.s.watch.gpu, window_start, time.time()),
            "slo": {"verdict": j.verdict, "holds": j.holds, "margin": j.margin, "worst": j.worst,
                    "hopeless": j.hopeless, "pooled_attempts": st.attempt + 1,
                    "criteria": [{"slo": c.criterion.slo, "name": c.criterion.name, "kind": c.criterion.kind,
                                  "target": c.criterion.target, "n": c.n, "hits": c.hits, "n_eff": c.n_eff,
                                  "share": c.share, "low": c.low, "high": c.high, "value": c.value,
                                  "verdict": c.verdict} for c in j.results]},
        }


def vars_of(obj: Any) -> dict[str, Any]:
    """Return a slotted dataclass's fields as a dict."""
    return {name: getattr(obj, name) for name in obj.__slots__}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.0f}"


def _line(row: dict[str, Any]) -> str:
    ttft = row["latency"]["ttft"]
    rps = "-" if row["rps"] is None else f"{row['rps']:.2f}"
    verdict = f" SLO {row['slo']['verdict']}" if row["slo"]["criteria"] else ""
    status = "" if row["status"] == "complete" else f" [{row['status']}]"
    return (f"stage {row['stage']} {load_text(row['load_kind'], row['load'])}: {row['requests']} requests, "
            f"{rps} req/s, TTFT p50 {_ms(ttft['p50'])} p95 {_ms(ttft['p95'])} ms, errors {row['failed']}"
            f"{verdict}{status}")
