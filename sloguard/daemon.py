"""The long-running daemon: build from config, run sources and evaluation, serve, reload, drain on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Coroutine
from typing import Any

from sloguard import __version__
from sloguard.alerts.service import Alerting
from sloguard.clock import Clock, SystemClock, next_tick
from sloguard.components import (
    Secrets,
    build_sources,
    history_horizon,
    read_secrets,
    server_horizon,
    startup_grace,
)
from sloguard.config.load import ConfigError, load_config
from sloguard.config.spec import Config
from sloguard.diagnose.service import Diagnoser
from sloguard.exporter.listen import ListenError
from sloguard.exporter.selfmetrics import SelfState, self_families
from sloguard.exporter.server import Endpoints, start_server
from sloguard.exporter.snapshot import Snapshot
from sloguard.exporter.webconfig import load_web_config
from sloguard.guardrails.server import GuardSignals
from sloguard.guardrails.stagebudget import StageBudgets
from sloguard.log import setup_logging
from sloguard.model import Sample, ServerView
from sloguard.notify import Notifier
from sloguard.persistence import Persistence
from sloguard.probes import jobs_from_config
from sloguard.probes.feed import ProbeFeed
from sloguard.reports.service import ReleaseReports
from sloguard.slo.engine import SLOEngine
from sloguard.slo.model import slos_from_config
from sloguard.sources.base import Source, SourceOutput
from sloguard.sources.online import log_findings
from sloguard.sources.runner import SourceRunner
from sloguard.statedir import StateDirError, prepare
from sloguard.traces.service import RecordService
from sloguard.windows.coarse import BucketAdvisor
from sloguard.windows.server import ServerWindows

log = logging.getLogger("sloguard.daemon")
DRAIN_INTERVAL = 0.25
PRUNE_INTERVAL = 3600.0


class Daemon:
    """Owns every component; the event loop is the only writer, so no component needs its own lock."""

    def __init__(self, config_path: str, web_config_path: str | None = None, listen: str | None = None,
                 clock: Clock | None = None) -> None:
        self.config_path = config_path
        self.web_config_path = web_config_path
        self.listen_override = listen
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

    def _build(self, cfg: Config) -> tuple[Secrets, dict[str, Source]]:
        secrets = read_secrets(cfg)
        return secrets, build_sources(cfg, secrets, self.clock, getattr(self, "sources", None))

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
            "slos": lambda: self.diagnosis.decorate(self.slo.api_json(self.statuses)),
            "probes": lambda: self.probes.history.snapshot(),
            "alerts": lambda: self.alerting.debug_json(),
            "releases": lambda: self.reports.api_json(),
        }, degraded=self.persist.degraded,
            query_providers={"probes": lambda query: self.probes.history.page(query)}, results=self._results)
        self.http, self.port = await start_server(ep, web_config, self.listen_override or cfg.listen)
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
        # Values a rule can read continue across a restart: last success (and its age) come from the store.
        self.probes.metrics.restore(self.persist.probe_baselines())
        self.records = RecordService(cfg, slos)  # joins the server's own record of each probe request
        await self.records.start()
        self.probes.start()
        # Restored alerts whose series are not collected yet are held, not resolved (no re-page on restart).
        self.alerting = Alerting(cfg, self.persist, self.clock, secrets.notifiers, startup_grace=startup_grace(cfg))
        self.reports = self._release_reports(cfg)
        self.runner = SourceRunner(self.snapshot, self._on_output, self.clock)
        self.sources = sources
        self.runner.start(list(sources.values()))
        self.reload_ts = self.clock.now()
        self._publish_self()
        self.statuses: list[Any] = []
        for coro in (self._loop(self.cfg.evaluation_interval, self.evaluate, first=0.5),
                     self._loop(DRAIN_INTERVAL, self.drain_probes),
                     self._loop(PRUNE_INTERVAL, self._prune),
                     self._alert_delivery(), self._watchdog()):
            self._tasks.append(asyncio.create_task(coro))
        # First run only: name probe models the servers do not serve (else every request is a silent 404).
        self._tasks.append(asyncio.create_task(log_findings(cfg, secrets.targets)))
        log.info("sloguard started", extra={"version": __version__, "listen": self.listen_override or cfg.listen,
                                            "port": self.port, "sources": len(sources),
                                            "probes": len(cfg.probes), "slos": len(cfg.slos)})

    def _on_output(self, src: Source, out: SourceOutput) -> None:
        if isinstance(out.payload, ServerView):
            self.server_windows.add(out.payload)
            self.buckets.check(out.payload, self.slo.slos)
            self.guard.add(out.payload)
        self.reports.on_output(out.payload, self.clock.now())

    def _release_reports(self, cfg: Config) -> ReleaseReports:
        """Release identities, boundaries and the automatic before/after reports (sloguard.reports)."""
        from sloguard.reports.storeslice import count

        reports = ReleaseReports(cfg, self.config_path, self.persist, self.alerting, self.clock.now(),
                                 lambda rid, target, t0, t1: count(self.cfg.state_dir, rid, target, t0, t1))
        reports.verdicts_of = self._verdicts_of
        return reports

    def _verdicts_of(self, target: str) -> list[dict[str, Any]]:
        """Return the current bottleneck verdict of each SLO of a target (for its release report)."""
        names = [s.name for s in self.slo.slos if s.target == target]
        return [{"slo": n, **v} for n in names if (v := self.diagnosis.json(n)) is not None]

    def _results(self, spec: str) -> Any:
        """Stream a store slice as JSON lines for `sloguard report --daemon` (DataError for a bad slice)."""
        from sloguard.reports.storeslice import stream

        return stream(self.cfg.state_dir, spec)

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

    async def _alert_delivery(self) -> None:
        while not self.stopping.is_set():
            try:
                await self.alerting.run()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("alert delivery loop crashed; restarting in 1s")
                await asyncio.sleep(1.0)

    def drain_probes(self) -> None:
        """Move probe results into the SLO windows, then hand them to the store (which may fail: they wait)."""
        raw = self.probes.drain(supervise=not self.stopping.is_set())
        self.diagnosis.observe_probes(self.probes.started(), self.clock.now(), self.probes.reached,
                                      self.probes.prefilled())
        results = self.reports.stamp(self.records.finalise(raw))
        if results:
            self.slo.add_probe_results(results)
        self.persist.add_probe_results(results)  # never raises for the store; retries a failed one

    def evaluate(self) -> None:
        """Evaluate SLOs and alerts and publish the snapshot; the exporter serves it until the next cycle."""
        start = time.perf_counter()
        self.heartbeat_mono = time.monotonic()
        now = self.clock.now()
        self.drain_probes()
        self.statuses = self.slo.evaluate(now, self.server_windows)
        self.snapshot.put("slo", self.slo.families(self.statuses))
        windows = {s.name: self.slo.windows(s.name)[""] for s in self.slo.slos}
        self.stage_budgets.evaluate(self.slo.slos, windows, self.server_windows, now)
        self.snapshot.put("stage_budgets", self.stage_budgets.families())
        self.snapshot.put("server", self.server_windows.families(now))
        self.snapshot.put("probes", self.probes.metrics.families(now))
        self.snapshot.put("checks", self.probes.checks.families())
        self.snapshot.put("traces", self.records.families())
        self.snapshot.put("store", self.persist.families())  # before the rules: SloguardStoreDown reads it
        gpu = [Sample(s.name, s.labels, s.value) for fam in self.snapshot.families()
               if fam.name.startswith("sloguard_gpu_") for s in fam.samples]
        self.snapshot.put("guard", self.guard.families(now, self.server_windows, gpu))
        self.reports.tick(now)
        self.snapshot.put("releases", self.reports.families())
        samples = self.snapshot.samples()
        self.diagnosis.step(now, self.statuses, self.slo, self.server_windows, samples)
        verdicts = self.diagnosis.families()
        self.snapshot.put("diagnosis", verdicts)
        samples += [Sample(s.name, s.labels, s.value) for fam in verdicts for s in fam.samples]
        self.alerting.evaluate(samples, now, self.diagnosis.annotations)
        self.snapshot.put("alerts", self.alerting.families(now))
        self.eval_seconds = time.perf_counter() - start
        self.last_eval_mono = time.monotonic()
        if not self.evaluated:
            self.notify.ready()
        self.evaluated = True
        self._publish_self()

    def _prune(self) -> None:
        self.persist.prune(self.cfg.probe_settings.retention)
        self.alerting.prune(self.clock.now())

    def _publish_self(self) -> None:
        self.snapshot.put("self", self_families(self._self_state()))

    def _self_state(self) -> SelfState:
        return SelfState(self.reload_ok == 1.0, self.reload_ts, self.eval_seconds, self.snapshot.last_render_seconds,
                         self.probes.alive(), self.probes.restarts, self.started)

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
            self._swap(cfg, sources, slos, jobs)
            self.notify.ready()
            return True

    def _swap(self, cfg: Config, sources: dict[str, Source], slos: Any, jobs: Any) -> None:
        if cfg.state_dir != self.cfg.state_dir or cfg.listen != self.cfg.listen:
            log.warning("state_dir and listen changes take effect on restart only")
        setup_logging(cfg.log.format, cfg.log.level)
        self.runner.replace(list(sources.values()))
        kept = {id(s) for s in sources.values()}
        self._closing = [t for t in self._closing if not t.done()] + [
            asyncio.create_task(_quietly(s.close())) for s in self.sources.values() if id(s) not in kept]
        self.sources = sources
        self.probes.update(jobs)
        self.records.reconfigure(cfg, slos)
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
        self.runner.shutdown()
        await asyncio.to_thread(self.probes.stop, 4.0)  # > the worker's 3 s grace for in-flight requests
        with contextlib.suppress(Exception):
            self.drain_probes()
            held = self.records.flush()  # results still waiting for engine spans: stored without them
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


async def serve(config_path: str, web_config_path: str | None = None, listen: str | None = None) -> int:
    """Run the daemon until SIGTERM/SIGINT; SIGHUP reloads. Return the process exit code."""
    daemon = Daemon(config_path, web_config_path, listen)
    try:
        await daemon.start()
    except ConfigError as exc:
        print(exc.report(config_path), file=sys.stderr)
        return 2
    except StateDirError as exc:
        print(f"sloguard: {exc}", file=sys.stderr)
        return 2
    except ListenError as exc:
        fix = ("pass another --web.listen-address HOST:PORT" if listen
               else f"change `listen:` in {config_path} or pass --web.listen-address HOST:PORT")
        print(f"sloguard: {exc}; {fix}", file=sys.stderr)
        return 2
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(daemon.reload()))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, daemon.stopping.set)
    await daemon.stopping.wait()
    await daemon.shutdown()
    return 0
