"""Run each source on its own interval with a deadline; one source's failure or hang never touches another."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from prometheus_client.metrics_core import Metric

from sloguard.clock import Clock, SystemClock
from sloguard.families import declare
from sloguard.snapshot import Snapshot
from sloguard.sources.base import Source, SourceAbsent, SourceError, SourceOutput
from sloguard.sources.parsepool import POOL

_KT = ("source", "target", "replica")  # replica: a service's scraped replica only (sloguard.fleet)
UP = declare("sloguard_source_up", "gauge", "1 if the source's last run succeeded (updated each run).", _KT)
DURATION = declare("sloguard_source_duration_seconds", "gauge", "Duration of the source's last run.", _KT)
LAST_SUCCESS = declare("sloguard_source_last_success_timestamp_seconds", "gauge",
                       "Unix time of the source's last successful run.", _KT)
FAILURES = declare("sloguard_source_failures", "counter", "Failed source runs by reason.", (*_KT, "reason"))

log = logging.getLogger("sloguard.runner")
OnOutput = Callable[[Source, SourceOutput], None]


@dataclass
class SourceState:
    """What the runner knows about one source; exported as sloguard_source_* series."""

    up: float = 0.0
    duration: float = 0.0
    last_success: float | None = None
    last_reason: str | None = None
    failures: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    absent: bool = False  # SourceAbsent: nothing to collect on this host; no series at all


def source_id(src: Source) -> tuple[str, str, str]:
    """Return (kind, target, replica): what names one scheduled source (replica "" unless it has one)."""
    return src.kind, src.target, getattr(src, "replica", "")


def source_key(src: Source) -> str:
    """Return the snapshot key of a source's own families."""
    kind, target, replica = source_id(src)
    return f"source/{kind}/{target}" + (f"/{replica}" if replica else "")


class SourceRunner:
    """Schedules sources on an AsyncIOScheduler; results go to the snapshot and to `on_output`."""

    def __init__(self, snapshot: Snapshot, on_output: OnOutput, clock: Clock | None = None) -> None:
        self.snapshot = snapshot
        self.on_output = on_output
        self.clock = clock or SystemClock()
        self.scheduler = AsyncIOScheduler()
        self.sources: list[Source] = []
        self.states: dict[tuple[str, str, str], SourceState] = {}
        self._stopped = False

    def start(self, sources: Sequence[Source]) -> None:
        """Schedule every source; first runs are spread over the first second so they do not burst."""
        self.scheduler.start()
        self.replace(sources)

    def replace(self, sources: Sequence[Source]) -> list[Source]:
        """Swap the scheduled sources (reload); return the old ones for the caller to close."""
        old = self.sources
        for job in self.scheduler.get_jobs():
            job.remove()
        keep = {source_id(s) for s in sources}
        for s in old:
            if source_id(s) not in keep:
                self.snapshot.drop(source_key(s))
                self.states.pop(source_id(s), None)
        self.sources = list(sources)
        now = time.time()
        for src in self.sources:
            self.states.setdefault(source_id(src), SourceState())
            self.scheduler.add_job(
                self.run_once, "interval", seconds=src.interval, args=[src], max_instances=1, coalesce=True,
                misfire_grace_time=max(1, int(src.interval)),
                next_run_time=_dt(now + random.uniform(0.0, min(1.0, src.interval))),
            )
        self.publish()
        return old

    async def run_once(self, src: Source) -> None:
        """Collect once under the source's deadline and record the outcome; never raises."""
        state = self.states.setdefault(source_id(src), SourceState())
        start = time.perf_counter()
        reason: str | None = None
        try:
            async with asyncio.timeout(src.timeout):
                out = await src.collect()
        except asyncio.CancelledError:
            if self._stopped:
                return  # shutdown cancels runs in flight: an expected end, not a job error with a traceback
            raise
        except SourceAbsent as exc:
            self._absent(src, state, exc)
            return
        except SourceError as exc:
            reason, msg = exc.reason, str(exc)
        except TimeoutError:
            reason, msg = "timeout", f"no result within {src.timeout:g}s"
        except Exception as exc:  # a bug in one source must not stop the others
            reason, msg = "exception", f"{type(exc).__name__}: {exc}"
            log.debug("source raised", exc_info=True)
        if not any(s is src for s in self.sources):
            return  # replaced by a reload while it ran: its result must not resurrect removed series
        state.duration = time.perf_counter() - start
        state.runs += 1
        if reason is None:
            self._success(src, state, out)
        else:
            self._failure(src, state, reason, msg)
        self.publish()

    def _absent(self, src: Source, state: SourceState, exc: SourceAbsent) -> None:
        if any(s is src for s in self.sources) and not (state.absent and state.last_reason == exc.reason):
            log.info("source absent", extra={"source": src.kind, "target": src.target, "reason": exc.reason,
                                             "error": str(exc)})
            state.absent, state.last_reason = True, exc.reason
            self.snapshot.drop(source_key(src))
            self.publish()

    def _success(self, src: Source, state: SourceState, out: SourceOutput) -> None:
        if state.last_reason is not None:
            log.info("source recovered", extra={"source": src.kind, "target": src.target})
        state.up, state.last_reason, state.last_success, state.absent = 1.0, None, self.clock.now(), False
        self.snapshot.put(source_key(src), out.families)
        try:
            self.on_output(src, out)
        except Exception:
            log.exception("handling source output failed", extra={"source": src.kind, "target": src.target})

    def _failure(self, src: Source, state: SourceState, reason: str, msg: str) -> None:
        if state.last_reason != reason:  # log each new reason once, not every cycle
            log.warning("source down", extra={"source": src.kind, "target": src.target, "reason": reason,
                                              "error": msg})
        state.up, state.last_reason = 0.0, reason
        state.failures[reason] = state.failures.get(reason, 0) + 1
        self.snapshot.drop(source_key(src))

    def publish(self) -> None:
        """Put the runner's own series into the snapshot."""
        self.snapshot.put("runner", self.families())

    def families(self) -> list[Metric]:
        """Return sloguard_source_{up,duration_seconds,last_success_timestamp_seconds,failures_total}."""
        up, dur, last, fails = UP.gauge(), DURATION.gauge(), LAST_SUCCESS.gauge(), FAILURES.counter()
        for (kind, target, replica), st in sorted(self.states.items()):
            if st.runs == 0 or st.absent:
                continue
            ids = {"source": kind, "target": target} | ({"replica": replica} if replica else {})
            up.add_sample(up.name, ids, st.up)
            dur.add_sample(dur.name, ids, st.duration)
            if st.last_success is not None:
                last.add_sample(last.name, ids, st.last_success)
            for reason, n in sorted(st.failures.items()):
                fails.add_sample(fails.name + "_total", ids | {"reason": reason}, n)
        return [up, dur, last, fails]

    def shutdown(self) -> None:
        """Stop scheduling and the parser process; running jobs are cancelled with the event loop."""
        self._stopped = True
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        POOL.close()


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)
