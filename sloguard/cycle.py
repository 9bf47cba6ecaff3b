"""One evaluation cycle of the daemon's components: probe results and scrapes in, SLOs, diagnosis, alerts out.

The Daemon (sloguard.daemon) builds, swaps and stops the components and says when a cycle runs; a cycle is
what flows through them (DESIGN.md §2): sources -> windows -> SLO evaluation -> diagnose/alerts -> Snapshot.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from sloguard.alerts.service import Alerting
from sloguard.clock import Clock
from sloguard.config.spec import Config
from sloguard.diagnose.service import Diagnoser
from sloguard.exporter.selfmetrics import SelfState, self_families
from sloguard.fleet.leader import Leadership
from sloguard.fleet.service import Fleet
from sloguard.guardrails.server import GuardSignals
from sloguard.guardrails.stagebudget import StageBudgets
from sloguard.incident.service import Incidents
from sloguard.model import ProbeResult, Sample, ServerView
from sloguard.notify import Notifier
from sloguard.persistence import Persistence
from sloguard.probes.bounds import checked
from sloguard.probes.feed import ProbeFeed
from sloguard.reports.service import ReleaseReports
from sloguard.slo.coarse import BucketAdvisor
from sloguard.slo.engine import SLOEngine
from sloguard.snapshot import Snapshot
from sloguard.sources.base import Source, SourceOutput
from sloguard.traces.service import RecordService
from sloguard.web import guard as listener
from sloguard.windows.server import ServerWindows


class Recorder(Protocol):
    """What the daemon hands a recorder (`sloguard record`: sloguard.recording.recorder.Recorder)."""

    def page(self, target: str, t: float, body: bytes) -> None: ...

    def host(self, t: float, samples: Iterable[Sample]) -> None: ...

    def drain(self, t: float, raw: Sequence[ProbeResult], started: Sequence[tuple[str, float]],
              reached: Sequence[ProbeResult], prefilled: Sequence[tuple[str, str, float, int]]) -> None: ...

    def evaluate(self, t: float) -> None: ...

    def verdicts(self, t: float, published: Mapping[str, str]) -> None: ...


class Cycle:
    """Drain probes, evaluate and publish over the components the Daemon owns (declared here, set by it)."""

    cfg: Config
    clock: Clock
    recorder: Recorder | None
    stopping: asyncio.Event
    snapshot: Snapshot
    notify: Notifier
    web_guard: listener.Guard
    fleet: Fleet
    persist: Persistence
    slo: SLOEngine
    server_windows: ServerWindows
    buckets: BucketAdvisor
    guard: GuardSignals
    stage_budgets: StageBudgets
    probes: ProbeFeed
    diagnosis: Diagnoser
    incidents: Incidents
    records: RecordService
    leader: Leadership
    alerting: Alerting
    reports: ReleaseReports
    statuses: list[Any]
    reload_ok: float
    reload_ts: float
    eval_seconds: float
    last_eval_mono: float
    heartbeat_mono: float
    evaluated: bool
    started: float

    def _on_output(self, src: Source, out: SourceOutput) -> None:
        if self.recorder is not None and src.kind == "host":
            self.recorder.host(self.clock.now(), [Sample(s.name, s.labels, s.value) for f in out.families
                                                  for s in f.samples])
        if isinstance(out.payload, ServerView):
            self.server_windows.add(out.payload)
            self.buckets.check(out.payload, self.slo.slos)
            self.guard.add(out.payload)
        self.reports.on_output(out.payload, self.clock.now())

    def drain_probes(self) -> None:
        """Move probe results into the SLO windows, then hand them to the store (which may fail: they wait)."""
        raw = self.probes.drain(supervise=not self.stopping.is_set())
        now, started, prefilled = self.clock.now(), self.probes.started(), self.probes.prefilled()
        if self.recorder is not None:
            self.recorder.drain(now, raw, started, self.probes.reached, prefilled)
        self.diagnosis.observe_probes(started, now, self.probes.reached, prefilled)
        self.records.engines_seen(self.server_windows.engines())
        results = [r for r in map(checked, self.reports.stamp(self.records.finalise(raw))) if r is not None]
        if results:
            self.slo.add_probe_results(results)
        self.persist.add_probe_results(results)  # never raises for the store; retries a failed one

    def evaluate(self) -> None:
        """Evaluate SLOs and alerts and publish the snapshot; the exporter serves it until the next cycle."""
        start = time.perf_counter()
        self.heartbeat_mono = time.monotonic()
        now = self.clock.now()
        self.drain_probes()
        if self.recorder is not None:
            self.recorder.evaluate(now)
        self.statuses = self.slo.evaluate(now, self.server_windows)
        self.snapshot.put("slo", self.slo.families(self.statuses))
        windows = {s.name: self.slo.windows(s.name)[""] for s in self.slo.slos}
        self.stage_budgets.evaluate(self.slo.slos, windows, self.server_windows, now)
        self.snapshot.put("stage_budgets", self.stage_budgets.families())
        self.snapshot.put("server", self.server_windows.families(now))
        self.snapshot.put("probes", self.probes.metrics.families(now))
        self.snapshot.put("checks", self.probes.checks.families())
        self.snapshot.put("traces", self.records.families())
        self.snapshot.put("listeners", listener.families(
            [self.web_guard, *([self.records.receiver.guard] if self.records.receiver else [])]))
        self.snapshot.put("store", self.persist.families())  # before the rules: SloguardStoreDown reads it
        self.fleet.retire(self.cfg, self.server_windows, now)
        self.snapshot.put("discovery", self.fleet.families(self.cfg) + self.leader.families())
        gpu = [Sample(s.name, s.labels, s.value) for fam in self.snapshot.families()
               if fam.name.startswith("sloguard_gpu_") for s in fam.samples]
        self.snapshot.put("guard", self.guard.families(now, self.server_windows, gpu))
        self.reports.tick(now)
        self.snapshot.put("releases", self.reports.families())
        samples = self.snapshot.samples()
        self.diagnosis.step(now, self.statuses, self.slo, self.server_windows, samples)
        verdicts = self.diagnosis.families()
        if self.recorder is not None:
            self.recorder.verdicts(now, {n: f"{v.stage}/{v.cause}" for n, v in self.diagnosis.verdicts.items()})
        self.snapshot.put("diagnosis", verdicts)
        samples += [Sample(s.name, s.labels, s.value) for fam in verdicts for s in fam.samples]
        self.incidents.before_alerts(self.statuses, self.diagnosis, self.slo, now)
        events = self.alerting.evaluate(samples, now, self.incidents.annotations)
        self.incidents.after_alerts(list(self.alerting.active.values()), events, now)
        self.snapshot.put("incident", self.incidents.families())
        self.snapshot.put("alerts", self.alerting.families(now))
        self.eval_seconds = time.perf_counter() - start
        self.last_eval_mono = time.monotonic()
        if not self.evaluated:
            self.notify.ready()
        self.evaluated = True
        self._publish_self()

    def _publish_self(self) -> None:
        self.snapshot.put("self", self_families(self._self_state()))

    def _self_state(self) -> SelfState:
        return SelfState(self.reload_ok == 1.0, self.reload_ts, self.eval_seconds, self.snapshot.last_render_seconds,
                         self.probes.alive(), self.probes.restarts, self.started)

    def _prune(self) -> None:
        self.persist.prune(self.cfg.probe_settings.retention)
        self.alerting.prune(self.clock.now())

    def _verdicts_of(self, target: str) -> list[dict[str, Any]]:
        """Return the current bottleneck verdict of each SLO of a target (for its release report)."""
        names = [s.name for s in self.slo.slos if s.target == target]
        return [{"slo": n, **v} for n in names if (v := self.diagnosis.json(n)) is not None]

    async def _watchdog(self) -> None:
        """Feed systemd's watchdog while the main loop runs and its evaluation loop keeps cycling.

        A blocked event loop or a dead evaluation loop stops the pings (systemd restarts a wedged daemon);
        a failing store does not, since evaluation goes on without it (degraded mode).
        """
        if self.notify.watchdog is None:
            return
        while not self.stopping.is_set():
            stale_after = max(3 * self.cfg.evaluation_interval, self.notify.watchdog)
            if time.monotonic() - self.heartbeat_mono < stale_after:
                self.notify.ping()
            await asyncio.sleep(self.notify.watchdog / 2)
