"""The daemon's incident model: built once per evaluation, read by every surface (API, page, alerts, metrics).

Two steps per evaluation, because the alerts read the verdict and the model reads the alerts: `before_alerts`
builds each SLO's view from its status and verdict (the alerts' "where / why" annotations come from it), then
`after_alerts` adds the severity the firing alerts give it and advances its timeline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from prometheus_client.metrics_core import Metric

from sloguard.alerts.engine import Alert, Transition
from sloguard.alerts.routing import inhibited
from sloguard.families import declare
from sloguard.incident import timeline
from sloguard.incident.build import build, with_alerts
from sloguard.incident.model import SLOView, as_json
from sloguard.slo.breach import breach_window
from sloguard.slo.result import SLOStatus

STATE = declare("sloguard_slo_state", "gauge", "Each SLO's state over its breach window, as the status page, "
                "`sloguard status` and notifications show it (BREACH, OVER BUDGET, OK, NO DATA), with the severity its "
                "firing alerts give it.", ("slo", "state", "severity"))

class VerdictSource(Protocol):
    enabled: bool

    def json(self, slo: str) -> dict[str, Any] | None:
        """Return the SLO's verdict as JSON, or None."""
        ...

    def learning(self, slo: str, wholes: Sequence[str]) -> float:
        """Return the seconds until the SLO's baselines are learned."""
        ...


class FailureSource(Protocol):
    def failures(self, slo: str, window: float, now: float) -> dict[str, int]:
        """Return the SLO's failed requests over the window by kind."""
        ...


class Incidents:
    """Per SLO: the current view and its timeline; not thread-safe (event loop only)."""

    def __init__(self) -> None:
        self.views: dict[str, SLOView] = {}
        self._previous: dict[str, SLOView] = {}

    def before_alerts(self, statuses: Sequence[SLOStatus], verdicts: VerdictSource, failures: FailureSource,
                      now: float) -> None:
        """Build every SLO's view from its status and verdict (no alert state yet)."""
        out = {}
        for st in statuses:
            wholes = [o.metric for o in st.slo.objectives] + (
                [m for m, _ in st.slo.goodput.thresholds()] if st.slo.goodput is not None else [])
            fails = failures.failures(st.slo.name, breach_window(st.slo), now) if st.slo.source == "probe" else {}
            view = build(st, verdicts.json(st.slo.name), fails, verdicts.learning(st.slo.name, wholes),
                         verdicts.enabled)
            old = self.views.get(st.slo.name)
            out[st.slo.name] = with_alerts(view, (), (), old.timeline if old is not None else ())
        self._previous, self.views = self.views, out

    def annotations(self, labels: Mapping[str, str]) -> dict[str, str]:
        """Return what an alert about an SLO says of it: the state, the why line, the evidence, the rows that hold."""
        v = self.views.get(labels.get("slo", ""))
        if v is None:
            return {}
        out = {"diagnosis": v.why.text, "diagnosis_cause": v.why.cause or v.why.kind,
               "diagnosis_stage": v.why.stage or "none", "slo_state": v.state}
        if v.why.evidence and v.state != "OK":
            out["diagnosis_evidence"] = "\n".join(v.why.evidence)
        rows = next((s.rows for s in v.slis if s.sli == labels.get("sli")), ())
        if rows:
            out["burn_rows"] = "; ".join(rows)
        if v.replicas:
            out["worst_replicas"] = "\n".join(r.text for r in v.replicas)
        return out

    def after_alerts(self, active: Sequence[Alert], events: Sequence[Transition], now: float) -> None:
        """Add the alerts' severity to each view and advance its timeline."""
        firing = [a for a in active if a.state == "firing"]
        held = inhibited(firing)
        for name, view in list(self.views.items()):
            events_now = timeline.advance(view.timeline, self._previous.get(name), view, events, now)
            self.views[name] = with_alerts(view, firing, held, events_now)

    def json(self, slo: str) -> dict[str, Any] | None:
        """Return an SLO's view as JSON, or None before its first evaluation."""
        v = self.views.get(slo)
        return None if v is None else as_json(v)

    def decorate(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """Return the /api/v1/slos document with each SLO's `incident`."""
        return {**doc, "slos": [{**s, "incident": self.json(str(s.get("name")))} for s in doc.get("slos", [])]}

    def families(self) -> list[Metric]:
        """Return sloguard_slo_state{slo,state,severity}: 1 for each SLO's current state (the status page's)."""
        fam = STATE.gauge()
        for name, v in sorted(self.views.items()):
            fam.add_metric([name, v.state, v.severity or "none"], 1.0)
        return [fam]
