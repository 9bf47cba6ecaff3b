"""The daemon's side of the probe process: supervise it and fan its results out to store, metrics and history."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from sloguard.model import ProbeResult
from sloguard.probes.checkmetrics import CheckMetrics
from sloguard.probes.history import ProbeHistory
from sloguard.probes.job import ProbeJob
from sloguard.probes.metrics import ProbeMetrics
from sloguard.probes.worker import ProbeWorker

log = logging.getLogger("sloguard.probes")
RESTART_BACKOFF = 5.0  # seconds between restarts of a probe process that keeps dying


class ProbeFeed:
    """Owns the probe process (restarted within 5 s if it dies) and the probe metrics and history."""

    def __init__(self, jobs: Sequence[ProbeJob], history_size: int) -> None:
        self.jobs = list(jobs)
        self.metrics = ProbeMetrics()
        self.history = ProbeHistory(history_size)
        self.checks = CheckMetrics()  # guardrail checks (kind abort / oversized_prompt): never SLO requests
        self._expect()
        self.worker = ProbeWorker(self.jobs)
        self.restarts = 0
        self._restarted_at = 0.0
        self.reached: list[ProbeResult] = []  # the last drain's requests that reached the engine

    def start(self) -> None:
        """Spawn the probe process."""
        self.worker.start()

    def update(self, jobs: Sequence[ProbeJob]) -> None:
        """Swap schedules in the running process (reload)."""
        self.jobs = list(jobs)
        self.worker.update(self.jobs)
        self._expect()

    def _expect(self) -> None:
        self.metrics.expect([j.name for j in self.jobs if j.kind == "latency"])
        self.checks.expect({j.name: j.within for j in self.jobs if j.kind != "latency"})

    def drain(self, supervise: bool = True) -> list[ProbeResult]:
        """Return new latency results (already recorded in metrics and history); restart a dead process.

        Guardrail check results go to the check metrics and the history only: they are not user requests,
        so they reach no SLO window, trace join or store.
        """
        results = self.worker.drain()
        # what reached the engine, abort checks included: the diagnosis takes their prefills out of the users'
        self.reached = [r for r in results if r.check_kind != "oversized_prompt"]
        if supervise:
            self._supervise()
        self.metrics.set_overhead(self.worker.overhead_seconds, self.worker.stall_seconds)
        for r in results:
            (self.checks if r.check_kind else self.metrics).observe(r)
            self.history.add(r)
        return [r for r in results if not r.check_kind]

    def started(self) -> list[tuple[str, float]]:
        """Return (target, wall time) of each probe request that started since the last call (after drain())."""
        return self.worker.take_started()

    def prefilled(self) -> list[tuple[str, str, float, int]]:
        """Return (target, trace id, wall time, nominal prompt tokens) of each probe first token since the last call."""
        return self.worker.take_prefilled()

    def _supervise(self) -> None:
        if self.worker.alive() or time.monotonic() - self._restarted_at < RESTART_BACKOFF:
            return
        log.error("probe process died; restarting it", extra={"restarts": self.restarts + 1})
        self.worker.stop(0.5)
        self.worker = ProbeWorker(self.jobs)
        self.worker.start()
        self.restarts += 1
        self._restarted_at = time.monotonic()

    def alive(self) -> bool:
        """Return whether the probe process runs."""
        return self.worker.alive()

    def stop(self, timeout: float) -> None:
        """Stop the probe process (SIGTERM after `timeout`)."""
        self.worker.stop(timeout)
