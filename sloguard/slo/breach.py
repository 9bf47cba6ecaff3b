"""What "breach" means, once: the objectives, goodput, availability and stage budgets an SLO misses over a window.

The status (every surface) and the diagnosis both read `breaches()` at `breach_window()`, so a status that says
BREACH never sits over a verdict that says nothing is breached. Stage budgets are listed as kind "budget": the SLO
is over budget there, not in breach of an objective.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sloguard.config.burnwindows import STANDARD_WINDOWS
from sloguard.slo.model import SLO, indicators
from sloguard.slo.result import SLOStatus, StageStatus

Kind = Literal["objective", "goodput", "availability", "budget"]
SLO_KINDS: frozenset[str] = frozenset({"objective", "goodput", "availability"})
P95 = 1  # index of p95 in a stage's (p50, p95, p99) resolution


@dataclass(frozen=True, slots=True)
class Breach:
    """One miss over the breach window: `name` is the metric, stage, "goodput" or "availability".

    Ratios (goodput, availability) are success shares: `value` < `threshold` misses. Latencies: `value` >
    `threshold` misses; `censored` says the value is a lower bound that only requests cut short (`cut_short` of
    `count`) put over the threshold.
    """

    kind: Kind
    name: str
    quantile: float | None
    value: float
    threshold: float
    censored: bool = False
    cut_short: int = 0
    count: int = 0


def breach_window(slo: SLO) -> float:
    """Return the window a breach is judged on: the SLO's shortest reporting window (5 min for most SLOs).

    The burn rows' short windows (1 min, 10 min) are left out: a minute of probes is too few to call a breach.
    """
    shown = [w for w in slo.windows if w in STANDARD_WINDOWS or w == slo.window]
    return min(shown or slo.windows or (slo.window,))


def _floor(s: StageStatus) -> float | None:
    """Return the least a stage's p95 can be: its interval's lower end where bounded, else its value."""
    if s.resolution:
        return s.resolution[P95][0]
    return s.p95


def breaches(status: SLOStatus, window: float | None = None) -> tuple[Breach, ...]:
    """Return every miss over the window (default breach_window()), objectives first, then goodput, availability,
    stage budgets."""
    slo = status.slo
    w = breach_window(slo) if window is None else window
    out = [Breach("objective", o.metric, o.percentile / 100, o.value, o.threshold, o.censored, o.censored_count,
                  o.count)
           for o in status.objectives if o.window == w and not o.segment and o.compliant is False
           and o.value is not None]
    at = next((x for x in status.windows if x.window == w and not x.segment), None)
    if at is not None and slo.goodput is not None and at.goodput_ratio is not None \
            and at.goodput_ratio < slo.goodput.target:
        out.append(Breach("goodput", "goodput", None, at.goodput_ratio, slo.goodput.target, count=int(at.requests)))
    availability = next((i for i in indicators(slo) if i.sli == "availability"), None)
    if at is not None and availability is not None and at.failure_ratio is not None \
            and 1.0 - at.failure_ratio < availability.objective:
        out.append(Breach("availability", "availability", None, 1.0 - at.failure_ratio, availability.objective,
                          count=int(at.requests)))
    for s in status.stages:
        floor = _floor(s)
        if s.window == w and not s.segment and s.budget and s.p95 is not None and floor is not None \
                and floor > s.budget:
            out.append(Breach("budget", s.stage, 0.95, s.p95, s.budget))
    return tuple(out)


def in_breach(found: Sequence[Breach]) -> bool:
    """Return whether any objective, goodput or availability misses (stage budgets alone do not)."""
    return any(b.kind in SLO_KINDS for b in found)


def missed_metrics(status: SLOStatus, found: Sequence[Breach]) -> set[str]:
    """Return the latency metrics and stages a diagnosis explains: missed objectives, goodput's thresholds, budgets."""
    out = {b.name for b in found if b.kind in ("objective", "budget")}
    if status.slo.goodput is not None and any(b.kind == "goodput" for b in found):
        out |= {m for m, _ in status.slo.goodput.thresholds()}
    return out
