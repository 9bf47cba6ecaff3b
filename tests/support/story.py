"""One incident through the daemon's own evaluation path, on an injected clock, for tests that read every surface.

Probe results -> SLOEngine -> statuses and families -> the incident model (before alerts) -> the alert rules the
daemon builds (annotated from the model) -> routing to the config's notifiers -> the incident model (after
alerts). The verdict is an input (a canned diagnosis JSON), so the surfaces are compared, not the diagnosis.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sloguard.alerts import engine as alert_engine
from sloguard.alerts.annotate import annotate_all
from sloguard.alerts.engine import Alert
from sloguard.alerts.routing import Group, Notification, route
from sloguard.alerts.rules import rules_from_config
from sloguard.clock import FakeClock
from sloguard.config.load import load_config_text
from sloguard.incident.service import Incidents
from sloguard.model import ProbeResult, Sample
from sloguard.slo.engine import SLOEngine
from sloguard.slo.model import slos_from_config
from sloguard.windows.server import ServerWindows

START = 1_700_000_000.0
CONFIG = """\
version: sloguard/v1
targets: [{name: sim, api_url: "http://127.0.0.1:1"}]
probes: [{name: chat, target: sim, interval: 2s, timeout: 1900ms}]
slos:
  - name: chat
    target: sim
    objectives: [{metric: ttft, percentile: 95, threshold: 1s}, {metric: tpot, percentile: 50, threshold: 50ms}]
    goodput: {ttft: 800ms, tpot: 50ms, target: 0.95}
    error_rate: {target: 0.99}
    error_budget_window: 1d
    budgets: {ttft: 800ms, decode: 1500ms}
notifiers:
  - {name: oncall, type: webhook, url: "http://127.0.0.1:1/hook", group_wait: 10s}
"""
Factory = Callable[[float], ProbeResult]


def result(ts: float, **kw: Any) -> ProbeResult:
    """Return one probe result (healthy unless overridden)."""
    values: dict[str, Any] = {"ok": True, "ttft_s": 0.3, "e2e_s": 0.9, "tpot_s": 0.02, "connect_s": 0.001,
                              "elapsed_s": 0.9, "output_tokens": 31, **kw}
    return ProbeResult(ts=ts, probe="chat", target="sim", model="m", api="chat", **values)


def healthy(ts: float) -> ProbeResult:
    return result(ts)


def slow(ts: float) -> ProbeResult:
    return result(ts, ttft_s=1.4, e2e_s=2.0, elapsed_s=2.0)


def http_503(ts: float) -> ProbeResult:
    return result(ts, ok=False, error="HTTP 503: overloaded", status_code=503, ttft_s=None, e2e_s=None, tpot_s=None,
                  elapsed_s=0.01)


def timeout(ts: float) -> ProbeResult:
    return result(ts, ok=False, error="timeout after 1.9s", ttft_s=None, e2e_s=None, tpot_s=None, elapsed_s=1.9)


@dataclass
class Verdicts:
    """The diagnosis as the incident model reads it: a canned verdict and a learning ETA per SLO."""

    enabled: bool = True
    verdict: dict[str, Any] | None = field(default_factory=lambda: {"cause": "none", "stage": "none", "summary": ""})
    learning_s: float = 0.0

    def json(self, slo: str) -> dict[str, Any] | None:
        return self.verdict

    def learning(self, slo: str, wholes: Sequence[str]) -> float:
        return self.learning_s


class Story:
    """The daemon's evaluation path without processes; `step()` is one evaluation."""

    def __init__(self, config: str = CONFIG, start: float = START, server: ServerWindows | None = None) -> None:
        self.cfg = load_config_text(config)
        self.clock = FakeClock(start)
        self.server = server  # server SLOs: feed it ServerViews (a service's replicas) between steps
        self.engine = SLOEngine(slos_from_config(self.cfg), self.clock)
        self.incidents = Incidents()
        self.rules = rules_from_config(self.cfg)
        self.verdicts = Verdicts()
        self.active: dict[str, Alert] = {}
        self.groups: dict[str, Group] = {}
        self.sent: list[Notification] = []
        self.told: list[tuple[Notification, dict[str, Any]]] = []  # each notification with the model when sent
        self.samples: list[Sample] = []
        self.statuses: list[Any] = []

    def run(self, seconds: float, factory: Factory, every: float = 2.0, evaluate: float = 10.0) -> None:
        """Send a probe result every `every` s and evaluate every `evaluate` s for `seconds`."""
        end = self.clock.now() + seconds
        next_eval = self.clock.now() + evaluate
        while self.clock.now() < end:
            self.clock.advance(every)
            self.engine.add_probe_results([factory(self.clock.now())])
            if self.clock.now() >= next_eval:
                self.step()
                next_eval += evaluate

    def step(self) -> None:
        now = self.clock.now()
        self.statuses = self.engine.evaluate(now, self.server)
        self.samples = [Sample(s.name, s.labels, s.value) for fam in self.engine.families(self.statuses)
                        for s in fam.samples]
        self.incidents.before_alerts(self.statuses, self.verdicts, self.engine, now)
        active, events = alert_engine.evaluate(self.rules, self.active, self.samples, now)
        self.active, events = annotate_all(active, events, self.incidents.annotations)
        firing = [a for a in self.active.values() if a.state == "firing"]
        self.groups, notes = route(self.cfg.notifiers, self.groups, firing, now)
        self.sent += notes
        self.incidents.after_alerts(list(self.active.values()), events, now)
        self.told += [(n, dict(self.view(n.alerts[0].labels and dict(n.alerts[0].labels).get("slo", "chat"))))
                      for n in notes]

    def api(self) -> dict[str, Any]:
        """Return /api/v1/slos as the daemon serves it (less the diagnosis block)."""
        return self.incidents.decorate(self.engine.api_json(self.statuses))

    def view(self, slo: str = "chat") -> Mapping[str, Any]:
        got = self.incidents.json(slo)
        assert got is not None
        return got
