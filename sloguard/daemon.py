"""The long-running daemon: build the components from config, schedule sources and cycles, reload, drain on stop.

What one cycle does with the components is sloguard.cycle; running it as a process (signals, exit codes) is
sloguard.run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine, Iterator
from functools import partial
from typing import Any

from sloguard import __version__
from sloguard.alerts.service import Alerting
from sloguard.clock import Clock, SystemClock, next_tick
from sloguard.components import build_sources, history_horizon, server_horizon, startup_grace
from sloguard.config.load import ConfigError, load_config
from sloguard.config.secrets import Secrets, read_secrets
from sloguard.config.spec import Config
from sloguard.cycle import Cycle, Recorder
from sloguard.diagnose.service import Diagnoser
from sloguard.exporter.server import Endpoints, start_server
from sloguard.fleet.leader import leadership
from sloguard.fleet.service import Fleet
from sloguard.guardrails.server import GuardSignals
from sloguard.guardrails.stagebudget import StageBudgets
from sloguard.incident.service import Incidents
from sloguard.log import setup_logging
from sloguard.notify import Notifier
from sloguard.persistence import Persistence
from sloguard.probes import jobs_from_config
from sloguard.probes.bounds import checked
from sloguard.probes.feed import ProbeFeed
from sloguard.reports.service import ReleaseReports
from sloguard.slo.coarse import BucketAdvisor
from sloguard.slo.engine import SLOEngine
from sloguard.slo.model import missed_slo, slos_from_config
from sloguard.snapshot import Snapshot
from sloguard.sources.base import Source
from sloguard.sources.online import log_findings
from sloguard.sources.runner import SourceRunner
from sloguard.sources.scrape import ScrapeSource
from sloguard.statedir import prepare
from sloguard.traces.service import RecordService
from sloguard.web import guard as listener
from sloguard.web.webconfig import load_web_config
from sloguard.windows.server import ServerWindows

log = logging.getLogger("sloguard.daemon")
DRAIN_INTERVAL = 0.25
PRUNE_INTERVAL = 3600.0


class Daemon(Cycle):
    """Owns every component; the event loop is the only writer, so no component needs its own lock."""

    def __init__(self, config_path: str, web_config_path: str | None = None, listen: str | None = None,
                 clock: Clock | None = None, lifecycle: bool = False, max_connections: int = 512,
                 recorder: Recorder | None = None) -> None:
        self.config_path = config_path
        self.recorder = recorder  # sloguard record: every page, drain and evaluation to a recording
        self.web_config_path = web_config_path
        self.listen_override = listen
        self.lifecycle = lifecycle  # POST /-/reload without credentials (--web.enable-lifecycle)
        self.web_guard = listener.Guard(listener.Limits(max_connections=max_connections), "web")
        self.clock = clock or SystemClock()
        self.snapshot = Snapshot()
        self.stopping = asyncio.Event()
        self.reload_ok = 1.0
        self.reload_ts = 0.0
        self.evaluated = False
        self.started = time.time()
        self.port = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._reload_lock = asyncio.Lock()
        self._closing: list[asyncio.Task[None]] = []
        self.eval_seconds = 0.0
        self.last_eval_mono = time.monotonic()
        self.heartbeat_mono = time.monotonic()  # the evaluation loop ran: what the systemd watchdog is fed from
        self.notify = Notifier()
        self.fleet = Fleet(self._fleet_changed)  # discovered replicas; a change re-plans the scrapes
        self._fleet_due: asyncio.TimerHandle | None = None
        self.sources: dict[str, Source] = {}

    def _build(self, cfg: Config) -> tuple[Secrets, dict[str, Source]]:
        secrets = read_secrets(cfg)
        return secrets, self._hooked(build_sources(cfg, secrets, self.clock, self.sources, self.fleet.replicas(cfg)))

    def _hooked(self, sources: dict[str, Source]) -> dict[str, Source]:
        """Return the sources, each scrape handing its pages to the recorder when one runs (`sloguard record`)."""
        if self.recorder is not None:
            for src in sources.values():
                if isinstance(src, ScrapeSource):
                    src.on_page = self.recorder.page
        return sources

    def _fleet_changed(self) -> None:
        """Apply discovered changes once, 0.2 s after the first (a relist's burst of events is one re-plan)."""
        if self._fleet_due is None and not self.stopping.is_set():
            self._fleet_due = asyncio.get_running_loop().call_later(0.2, self._apply_fleet)

    def _apply_fleet(self) -> None:
        """Start scrapes of new replicas, stop those of vanished ones (their windows kept for replica_grace)."""
        self._fleet_due = None
        try:
            sources = build_sources(self.cfg, self.secrets, self.clock, self.sources, self.fleet.replicas(self.cfg))
            self._replace_sources(self._hooked(sources))
            self.fleet.retire(self.cfg, self.server_windows, self.clock.now())
        except Exception:  # one bad discovery answer must not stop the daemon applying the next
            log.exception("applying discovered targets failed")

    def _replace_sources(self, sources: dict[str, Source]) -> None:
        self.runner.replace(list(sources.values()))
        kept = {id(s) for s in sources.values()}
        self._closing = [t for t in self._closing if not t.done()] + [
            asyncio.create_task(_quietly(s.close())) for s in self.sources.values() if id(s) not in kept]
        self.sources = sources

    async def start(self) -> None:
        """Load config, build and start everything; raise ConfigError if the first config is bad.

        Raise StateDirError when state_dir is misconfigured; a full or read-only disk starts degraded instead.
        """
        cfg = load_config(self.config_path)
        setup_logging(cfg.log.format, cfg.log.level)
        web_config = load_web_config(self.web_config_path)
        secrets, sources = self._build(cfg)
        self.cfg = cfg
        self.persist = Persistence(prepare(cfg.state_dir), self.clock, cfg.probe_settings.store_backlog)
        # Listen before anything starts (probe process, schedules): a busy or forbidden address is one line and
        # exit 2, with nothing to clean up. Providers are looked up per request, after start() has finished.
        ep = Endpoints(self.snapshot, self.reload, lambda: self.evaluated, {
            "slos": lambda: self.incidents.decorate(self.diagnosis.decorate(self.slo.api_json(self.statuses))),
            "probes": lambda: self.probes.history.snapshot(),
            "alerts": lambda: self.alerting.debug_json(),
            "releases": lambda: self.reports.api_json(),
        }, degraded=self.persist.degraded,
            query_providers={"probes": lambda query: self.probes.history.page(query)}, results=self._results,
            lifecycle=self.lifecycle)
        self.http, self.port = await start_server(ep, web_config, self.listen_override or cfg.listen, self.web_guard)
        slos = slos_from_config(cfg)
        self.slo = SLOEngine(slos, self.clock)
        # Streamed from the store (batches ordered by ts), so 28 days of results never sit in memory at once.
        self.slo.rebuild(self.persist.history(self.clock.now() - history_horizon(slos)))
        # History only as long as a server-side SLO needs it: each series keeps thinned snapshots.
        self.server_windows = ServerWindows(max_age=server_horizon(slos))
        self.buckets = BucketAdvisor()
        self.guard = GuardSignals(cfg)  # guardrail signals: spec decoding, GPU/queue contradictions
        self.stage_budgets = StageBudgets(cfg)  # stage p95 over budget, with the burn alerts' evidence guard
        self.probes = ProbeFeed(jobs_from_config(cfg, secrets.targets), cfg.probe_settings.history_size)
        self.diagnosis = Diagnoser(cfg)  # where the time goes and why, per SLO, after each evaluation
        self.incidents = Incidents()  # the one model every surface reads
        # Values a rule can read continue across a restart: last success (and its age) come from the store.
        self.probes.metrics.restore(self.persist.probe_baselines())
        # Joins the server's own record of each probe request; span sampling keeps requests that missed an SLO.
        self.records = RecordService(cfg, partial(missed_slo, slos=tuple(slos)))
        await self.records.start(web_config)
        self.probes.start()
        # Restored alerts whose series are not collected yet are held, not resolved (no re-page on restart).
        self.leader = leadership(cfg.ha)  # HA: only the elected replica delivers (ha.mode lease / file_lock)
        self.alerting = Alerting(cfg, self.persist, self.clock, secrets.notifiers, startup_grace=startup_grace(cfg),
                                 leader=self.leader)
        self.reports = self._release_reports(cfg)
        self.runner = SourceRunner(self.snapshot, self._on_output, self.clock)
        self.sources = sources
        self.runner.start(list(sources.values()))
        self.secrets = secrets
        self.fleet.reconfigure(cfg, secrets.discovery)
        self.reload_ts = self.clock.now()
        self._publish_self()
        self.statuses: list[Any] = []
        for coro in (self._loop(self.cfg.evaluation_interval, self.evaluate, first=0.5),
                     self._loop(DRAIN_INTERVAL, self.drain_probes),
                     self._loop(PRUNE_INTERVAL, self._prune),
                     self._alert_delivery(), self._watchdog(), self.leader.run()):
            self._tasks.append(asyncio.create_task(coro))
        # First run only: name probe models the servers do not serve (else every request is a silent 404).
        self._tasks.append(asyncio.create_task(log_findings(cfg, secrets.targets)))
        log.info("sloguard started", extra={"version": __version__, "listen": self.listen_override or cfg.listen,
                                            "port": self.port, "sources": len(sources),
                                            "probes": len(cfg.probes), "slos": len(cfg.slos)})

    def _release_reports(self, cfg: Config) -> ReleaseReports:
        """Release identities, boundaries and the automatic before/after reports (sloguard.reports)."""
        from sloguard.reports.storeslice import count

        reports = ReleaseReports(cfg, self.config_path, self.persist, self.alerting, self.clock.now(),
                                 lambda rid, target, t0, t1: count(self.cfg.state_dir, rid, target, t0, t1))
        reports.verdicts_of = self._verdicts_of
        return reports

    def _results(self, spec: str, limit: int) -> Iterator[str]:
        """Stream a store slice as JSON lines for `sloguard report --daemon` (DataError for a bad slice)."""
        from sloguard.reports.storeslice import stream

        return stream(self.cfg.state_dir, spec, limit)

    async def _loop(self, interval: float, step: Any, first: float | None = None) -> None:
        """Run `step` every `interval` on a fixed cadence from its first run (clock.next_tick), never raising."""
        await asyncio.sleep(interval if first is None else first)
        origin = time.monotonic()
        while not self.stopping.is_set():
            try:
                step()
            except Exception:  # one bad cycle must not end the loop
                log.exception("periodic step failed", extra={"step": getattr(step, "__name__", "?")})
            now = time.monotonic()
            await asyncio.sleep(next_tick(origin, interval, now) - now)

    async def _alert_delivery(self) -> None:
        while not self.stopping.is_set():
            try:
                await self.alerting.run()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("alert delivery loop crashed; restarting in 1s")
                await asyncio.sleep(1.0)

    async def reload(self) -> bool:
        """Build the new config completely, then swap; on any error keep the old one and return False."""
        async with self._reload_lock:
            self.notify.reloading()
            try:
                cfg = load_config(self.config_path)
                secrets, sources = self._build(cfg)
                slos = slos_from_config(cfg)
                jobs = jobs_from_config(cfg, secrets.targets)
                # Builds rules and notifiers before touching the running set; raises without side effects.
                self.alerting.reconfigure(cfg, secrets.notifiers)
            except Exception as exc:  # any failure while building leaves the running config untouched
                errors = exc.errors if isinstance(exc, ConfigError) else [f"{type(exc).__name__}: {exc}"]
                self.reload_ok = 0.0
                self._publish_self()
                log.error("config reload failed; keeping the running config",
                          extra={"file": self.config_path, "errors": "; ".join(errors)})
                self.notify.ready()
                return False
            self.secrets = secrets
            self._swap(cfg, sources, slos, jobs)
            self.notify.ready()
            return True

    def _swap(self, cfg: Config, sources: dict[str, Source], slos: Any, jobs: Any) -> None:
        if cfg.state_dir != self.cfg.state_dir or cfg.listen != self.cfg.listen or cfg.ha != self.cfg.ha:
            log.warning("state_dir, listen and ha changes take effect on restart only")
        setup_logging(cfg.log.format, cfg.log.level)
        self._replace_sources(sources)
        self.fleet.reconfigure(cfg, self.secrets.discovery)
        self.probes.update(jobs)
        self.records.reconfigure(cfg, partial(missed_slo, slos=tuple(slos)))
        self.guard.reconfigure(cfg)
        self.stage_budgets.reconfigure(cfg)
        self.reports.reconfigure(cfg, self.config_path, self.clock.now())
        self.diagnosis.reconfigure(cfg)
        self.slo.reconfigure(slos, self.persist.history(self.clock.now() - history_horizon(slos)))
        self.server_windows.reconfigure({t.name for t in cfg.targets}, server_horizon(slos), self.clock.now())
        self.cfg = cfg
        self.reload_ok, self.reload_ts = 1.0, self.clock.now()
        self._publish_self()
        log.info("config reloaded", extra={"file": self.config_path})

    async def shutdown(self) -> None:
        """Stop schedules, stop the probe process, flush state and close; bounded well under 10 s."""
        self.stopping.set()
        self.notify.stopping()
        await _quietly(self.fleet.close())
        self.runner.shutdown()
        await asyncio.to_thread(self.probes.stop, 4.0)  # > the worker's 3 s grace for in-flight requests
        with contextlib.suppress(Exception):
            self.drain_probes()
            held = [r for r in map(checked, self.records.flush()) if r is not None]  # stored without spans
            self.slo.add_probe_results(held)
            self.persist.add_probe_results(held)
        with contextlib.suppress(Exception):
            await self.records.stop()
        with contextlib.suppress(Exception):
            await self.reports.close()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2.0):
                await self.alerting.close()
        for src in self.runner.sources:
            await _quietly(src.close())
        await self.http.cleanup()
        self.persist.close()
        log.info("sloguard stopped")


async def _quietly(coro: Coroutine[Any, Any, None]) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(2.0):
            await coro
