"""The daemon's side of release reports: stamp results, watch identities, make the due before/after reports.

A report is `sloguard report` on two store slices, run as a child process (its numpy work never holds
the daemon's event loop; a crash in it is a failed report, not a failed daemon), written under
`state_dir/reports/<target>/<time>-<before>-<after>/report.{md,html,json}`. Its summary goes through the
notifiers (durable outbox) and its verdicts to `sloguard_report_verdict`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client.core import Metric

from sloguard.config.spec import Config
from sloguard.families import declare
from sloguard.model import ProbeResult, ServerView
from sloguard.reports.identity import Observed
from sloguard.reports.message import report_alert
from sloguard.reports.releases import Boundary, Count, Releases

log = logging.getLogger("sloguard.reports")
TIMEOUT_S = 600.0
VERDICT_VALUE = {"regression": 1.0, "no significant change": 0.0, "improvement": -1.0}
RELEASE_INFO = declare("sloguard_release_info", "gauge", "The release identity each target serves now (1): detected "
                       "engine, version, served models, and targets[].labels as label_<key>.",
                       ("target", "engine", "engine_version", "model", "release_id", "label_*"))
RELEASE_START = declare("sloguard_release_start_timestamp_seconds", "gauge", "When the target's current release was "
                        "first seen (its last release boundary).", ("target",))
VERDICT = declare("sloguard_report_verdict", "gauge", "Latest release report per target and metric: 1 regression, 0 no "
                  "significant change, -1 improvement (absent: not enough data); metric=\"report\" is the whole "
                  "report's.", ("target", "metric", "stat"))


class ReleaseReports:
    """Owns Releases and the report processes; every method runs on the daemon's event loop."""

    def __init__(self, cfg: Config, config_path: str, persist: Any, alerting: Any, now: float,
                 count: Count) -> None:
        self.cfg, self.config_path, self.alerting, self.count = cfg, config_path, alerting, count
        self.releases = Releases(cfg, persist.conn, persist.lock, now)
        self.releases.resume()
        self._tasks: set[asyncio.Task[None]] = set()
        self.latest: dict[str, dict[str, Any]] = {}
        # the daemon's bottleneck verdicts of a target's SLOs, shown in its report (sloguard.diagnose)
        self.verdicts_of: Callable[[str], list[dict[str, Any]]] = lambda target: []
        for b in self.releases.boundaries:  # restart: the last report of each target keeps being exported
            if b.status == "done" and b.report_path:
                self._remember(b)

    @property
    def root(self) -> Path:
        """Return where reports are kept."""
        return Path(self.cfg.state_dir) / "reports"

    def on_output(self, payload: object, now: float) -> None:
        """Take identity observations and scrape-detected engines."""
        if isinstance(payload, Observed):
            self.releases.observe(payload, now)
        elif isinstance(payload, ServerView):
            self.releases.observe_engine(payload.target, payload.engine, now)

    def stamp(self, results: list[ProbeResult]) -> list[ProbeResult]:
        """Return results stamped with their target's release id."""
        return self.releases.stamp(results) if results else results

    def reconfigure(self, cfg: Config, config_path: str, now: float) -> None:
        """Apply a reloaded config (changed labels are release boundaries)."""
        self.cfg, self.config_path = cfg, config_path
        self.releases.reconfigure(cfg, now)

    def tick(self, now: float) -> None:
        """Start the reports that are due (each in its own child process)."""
        self.releases.touch(now)
        for b in self.releases.due(now, self.count):
            task = asyncio.get_running_loop().create_task(self._make(b, now))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _dir(self, b: Boundary) -> Path:
        stamp = datetime.fromtimestamp(b.at, UTC).strftime("%Y%m%dT%H%M%SZ")
        return self.root / b.target / f"{stamp}-{b.before[:8]}-{b.after[:8]}"

    def command(self, b: Boundary, now: float, out: Path) -> list[str]:
        """Return the `sloguard report` command line of a boundary's report."""
        spec = self.cfg.reports
        base = f"store:release_id={b.before},target={b.target},{b.at - spec.baseline:.3f}..{b.at:.3f}"
        cand = f"store:release_id={b.after},target={b.target},{b.at + spec.warmup:.3f}..{now:.3f}"
        return [sys.executable, "-m", "sloguard", "report", "--baseline", base, "--candidate", cand,
                "--state-dir", self.cfg.state_dir, "-c", self.config_path, "--out-dir", str(out),
                "--diagnosis", str(out / "diagnosis.json")]

    async def _make(self, b: Boundary, now: float) -> None:
        out = self._dir(b)
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / "diagnosis.json").write_text(json.dumps(self.verdicts_of(b.target)), encoding="utf-8")
            proc = await asyncio.create_subprocess_exec(*self.command(b, now, out), stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.PIPE)
            try:
                async with asyncio.timeout(TIMEOUT_S):
                    _, err = await proc.communicate()
            except TimeoutError:
                proc.kill()
                await proc.wait()
                raise RuntimeError(f"the report took longer than {TIMEOUT_S:g}s") from None
            if proc.returncode not in (0, 1):
                lines = err.decode(errors="replace").strip().splitlines()
                raise RuntimeError(lines[-1] if lines else f"sloguard report exited {proc.returncode}")
            doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failed report is logged and recorded; the daemon goes on
            detail = str(exc)[:500]
            self.releases.finished(b, "failed", detail=detail)
            log.error("release report failed", extra={"target": b.target, "error": detail})
            return
        b = self.releases.finished(b, "done", verdict=str(doc["verdict"]), path=str(out))
        self._remember(b, doc)
        self._prune()
        alert = report_alert(b, doc, self.releases.identity_of(b.before), self.releases.identity_of(b.after),
                             self.cfg.runbook_url_template)
        sent = self.alerting.post(alert, now)
        log.warning("release report", extra={"target": b.target, "verdict": doc["verdict"], "path": str(out),
                                             "notifiers": ",".join(sent)})

    def _remember(self, b: Boundary, doc: dict[str, Any] | None = None) -> None:
        if doc is None:
            try:
                doc = json.loads((Path(b.report_path) / "report.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return
        self.latest[b.target] = {"boundary": b, "verdict": doc["verdict"],
                                 "cells": [(c["metric"], c["stat"], c["verdict"]) for c in doc["cells"]
                                           if c["scope"] == "overall" and c["family"]]}

    def _prune(self) -> None:
        reports = sorted((p for p in self.root.glob("*/*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
        for old in reports[: max(0, len(reports) - self.cfg.reports.keep)]:
            shutil.rmtree(old, ignore_errors=True)

    def families(self) -> list[Metric]:
        """Return sloguard_release_info, _release_start_timestamp_seconds and sloguard_report_verdict."""
        keys = sorted({k for st in self.releases.targets.values() for k in st.identity.labels})
        info = RELEASE_INFO.gauge([*RELEASE_INFO.labels[:-1], *(f"label_{k}" for k in keys)])
        start = RELEASE_START.gauge()
        for name, _st in sorted(self.releases.targets.items()):
            ident = self.releases.identity(name)
            if ident is None:
                continue
            info.add_metric([name, ident.engine, ident.engine_version or "", ident.model, ident.release_id,
                             *(ident.labels.get(k, "") for k in keys)], 1.0)
            at = max((b.at for b in self.releases.boundaries if b.target == name), default=None)
            if at is not None:
                start.add_metric([name], at)
        verdict = VERDICT.gauge()
        for target, latest in sorted(self.latest.items()):
            if latest["verdict"] in VERDICT_VALUE:
                verdict.add_metric([target, "report", ""], VERDICT_VALUE[latest["verdict"]])
            for metric, stat, v in latest["cells"]:
                if v in VERDICT_VALUE:
                    verdict.add_metric([target, metric, stat], VERDICT_VALUE[v])
        return [info, start, verdict]

    def api_json(self) -> dict[str, Any]:
        """Return identities and boundaries for GET /api/v1/releases."""
        targets = {}
        for name in self.releases.targets:
            ident = self.releases.identity(name)
            targets[name] = None if ident is None else {**ident.as_json(), "release_id": ident.release_id}
        bounds = [{"id": b.id, "target": b.target, "at": b.at, "before": b.before, "after": b.after,
                   "status": b.status, "verdict": b.verdict, "report_path": b.report_path, "detail": b.detail}
                  for b in self.releases.boundaries[-100:]]
        return {"targets": targets, "boundaries": bounds}

    async def close(self) -> None:
        """Cancel running reports (they are made again after a restart)."""
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
