"""The incident model: one value per SLO that every surface renders, so no two surfaces can disagree.

The status page, `sloguard status`, the demo, notification texts and `/api/v1/slos` read these values (or their
JSON, `as_json`) and format them; none recomputes a number. Built by sloguard.incident.build after each evaluation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

State = Literal["BREACH", "OVER BUDGET", "OK", "NO DATA"]
Severity = Literal["page", "ticket", ""]
WhyKind = Literal["verdict", "failures", "learning", "none", "off"]


@dataclass(frozen=True, slots=True)
class BreachView:
    """One miss over the breach window, with its text ("p95 ttft 1.34s > 800ms", "goodput 70.0% < 95.0%")."""

    kind: str
    name: str
    value: float
    threshold: float
    text: str
    censored: bool = False
    cut_short: int = 0


@dataclass(frozen=True, slots=True)
class SLIView:
    """One SLI's budget: left over the SLO window, its burn (the firing alert's $value, else the fastest page row's
    long window), the alert severity firing for it, and the rows that hold."""

    sli: str
    budget_left: float | None
    covered_s: float
    burn: float | None
    burn_window: str
    severity: Severity = ""
    held: bool = False  # a ticket held (inhibited) because this SLI's page fires
    cleared_at: float | None = None  # its rows stopped holding; the alert is kept firing for one short window
    rows: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StageView:
    """One stage's p95 over the breach window against its budget; `bounded`: capped by its whole or an interval."""

    stage: str
    p95: float
    budget: float | None
    over: bool
    bounded: bool
    source: str


@dataclass(frozen=True, slots=True)
class Why:
    """Where the time goes and why, or which requests failed, or why nothing can be said yet; `text` is one line."""

    kind: WhyKind
    text: str
    cause: str = ""
    stage: str = ""
    lever: str = ""
    confidence: float | None = None
    evidence: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    learning_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One of a service's worst replicas over the breach window: its share of the SLO's budget-spending requests
    (server SLOs), its worst objective there, what the diagnosis says of it, and the line every surface shows."""

    name: str
    text: str
    requests: int = 0
    bad: float = 0.0
    share: float | None = None  # of the SLO's bad requests over the window
    worst: str = ""  # "ttft p95 820ms > 100ms"
    outlier: str = ""  # the replica_outlier evidence naming it


@dataclass(frozen=True, slots=True)
class Event:
    """One line of an SLO's incident timeline: when it breached, paged, got its verdict, resolved, recovered."""

    at: float
    kind: str
    text: str


@dataclass(frozen=True)
class SLOView:
    """Everything a person reads about one SLO at one evaluation."""

    name: str
    target: str
    source: str
    window: str  # the breach window every breach, stage and failure count is judged on
    slo_window: str
    state: State
    requests: int
    breaches: tuple[BreachView, ...]
    slis: tuple[SLIView, ...]
    stages: tuple[StageView, ...]
    worst_stage: str | None
    why: Why
    failures: tuple[tuple[str, int], ...] = ()
    severity: Severity = ""
    timeline: tuple[Event, ...] = ()
    evaluated_at: float = 0.0
    runbook_url: str | None = None
    dashboard_url: str | None = None
    replicas: tuple[ReplicaView, ...] = ()  # a service's worst replicas, worst first (at most incident.replicas.SHOWN)


def as_json(v: SLOView) -> dict[str, Any]:
    """Return the view as plain JSON types (the `incident` of each SLO in /api/v1/slos)."""
    doc = asdict(v)
    doc["failures"] = [list(f) for f in v.failures]
    return doc
