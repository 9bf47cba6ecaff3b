"""Find the highest load at which the SLO holds: bracket by doubling (or halving), then bisect (pure).

`measure(load, attempt)` runs one stage and judges it (sloguard.bench.judge). An uncertain stage is
measured again at the same load up to `confirm` times (the caller pools the samples), then its point
estimate decides the direction. Definitions (README "Load tests"):
- **max load** = the highest measured load at which the SLO held with every lower measured load also
  holding; **first break** = the lowest measured load at which it broke (a hopeless stage, > 50% errors,
  breaks: nothing higher is tried);
- the interval is [the highest load ≤ max load that held *confidently*, the lowest load ≥ first break
  that broke *confidently*]: the true limit lies inside it at the judge's 95% level, bisection
  resolution included; an end that was never established is None;
- the estimate interpolates the worst criterion's margin linearly between max load and first break.
Stops when first break − max load ≤ tolerance × max load (and ≤ 1 for concurrency), or after
`max_stages` stages. A non-monotonic curve (a dip below target between two passing loads) yields the
limit below the first dip found, never a load above a measured failure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

LoadKind = Literal["concurrency", "rate"]


class Outcome(Protocol):
    """What the search needs from a judged stage (sloguard.bench.judge.Judgement has it)."""

    @property
    def verdict(self) -> str: ...
    @property
    def holds(self) -> bool: ...
    @property
    def margin(self) -> float: ...
    @property
    def worst(self) -> str: ...
    @property
    def hopeless(self) -> bool: ...


Measure = Callable[[float, int], Outcome]


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """Where to search: load kind, start, bounds, resolution and stage budget."""

    kind: LoadKind
    start: float
    max_load: float
    min_load: float
    tolerance: float = 0.1
    max_stages: int = 12
    confirm: int = 1


@dataclass(frozen=True, slots=True)
class Point:
    """One measured load: its final outcome (after confirmations) and how many stages it took."""

    load: float
    verdict: str
    holds: bool
    margin: float
    worst: str
    hopeless: bool
    stages: int


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The answer: max load, its interval and estimate, what breaks first, and every measured point."""

    kind: LoadKind
    max_load: float | None
    first_break: float | None
    low: float | None
    high: float | None
    estimate: float | None
    breaks_first: str
    stages: int
    stopped: str  # converged | ceiling | floor | budget | interrupted
    points: tuple[Point, ...] = field(default_factory=tuple)


class Interrupted(Exception):
    """Raised by `measure` when the user interrupts: the search ends with what it has."""


class _Search:
    def __init__(self, spec: SearchSpec, measure: Measure) -> None:
        self.spec, self.measure = spec, measure
        self.points: dict[float, Point] = {}
        self.stages = 0

    def holds(self, load: float) -> bool:
        outcome = self.measure(load, 0)
        used = 1
        while (outcome.verdict == "uncertain" and used <= self.spec.confirm
               and self.stages + used < self.spec.max_stages):
            outcome = self.measure(load, used)
            used += 1
        self.stages += used
        self.points[load] = Point(load, outcome.verdict, outcome.holds, outcome.margin, outcome.worst,
                                  outcome.hopeless, used)
        return outcome.holds

    def budget_left(self) -> bool:
        return self.stages < self.spec.max_stages

    def step(self, load: float, up: bool) -> float:
        """Return the next bracketing load: double or halve (concurrency: whole streams, always moving)."""
        nxt = load * 2 if up else load / 2
        if self.spec.kind == "concurrency":
            nxt = max(float(math.floor(nxt)), load + 1) if up else min(float(math.floor(nxt)), load - 1)
        return min(nxt, self.spec.max_load) if up else nxt

    def converged(self, lo: float, hi: float) -> bool:
        floor = 1.0 if self.spec.kind == "concurrency" else 0.0  # whole streams: adjacent counts are done
        return hi - lo <= max(floor, self.spec.tolerance * lo)

    def midpoint(self, lo: float, hi: float) -> float:
        mid = (lo + hi) / 2
        return float(math.floor(mid)) if self.spec.kind == "concurrency" else mid


def search(spec: SearchSpec, measure: Measure) -> SearchResult:
    """Run the search; `measure` may raise Interrupted to end it early with the points so far."""
    s = _Search(spec, measure)
    try:
        stopped = _bracket_and_bisect(s)
    except Interrupted:
        stopped = "interrupted"
    return _result(spec, s, stopped)


def _bracket_and_bisect(s: _Search) -> str:
    spec = s.spec
    load = min(max(spec.start, spec.min_load), spec.max_load)
    lo: float | None = None
    hi: float | None = None
    if s.holds(load):
        lo = load
        while hi is None:
            if lo >= spec.max_load:
                return "ceiling"
            if not s.budget_left():
                return "budget"
            nxt = s.step(lo, up=True)
            if s.holds(nxt):
                lo = nxt
            else:
                hi = nxt
    else:
        hi = load
        while lo is None:
            nxt = s.step(hi, up=False)
            if nxt < spec.min_load:
                return "floor"
            if not s.budget_left():
                return "budget"
            if s.holds(nxt):
                lo = nxt
            else:
                hi = nxt
    while not s.converged(lo, hi):
        if not s.budget_left():
            return "budget"
        mid = s.midpoint(lo, hi)
        if s.holds(mid):
            lo = mid
        else:
            hi = mid
    return "converged"


def _result(spec: SearchSpec, s: _Search, stopped: str) -> SearchResult:
    points = tuple(sorted(s.points.values(), key=lambda p: p.load))
    first_break = next((p for p in points if not p.holds), None)
    below = [p for p in points if first_break is None or p.load < first_break.load]
    best = below[-1] if below and below[-1].holds else None
    low = next((p.load for p in reversed(below) if p.verdict == "holds"), None)
    above = [p for p in points if first_break is not None and p.load >= first_break.load]
    high = next((p.load for p in above if p.verdict == "breaks"), None)
    return SearchResult(
        kind=spec.kind, max_load=best.load if best else None,
        first_break=first_break.load if first_break else None, low=low, high=high,
        estimate=_estimate(best, first_break), breaks_first=first_break.worst if first_break else "",
        stages=s.stages, stopped=stopped, points=points,
    )


def _estimate(best: Point | None, first_break: Point | None) -> float | None:
    """Interpolate where the worst margin crosses 0 between the last passing and the first failing load."""
    if best is None:
        return None
    if first_break is None:
        return best.load
    m_lo, m_hi = best.margin, first_break.margin
    if not (m_lo >= 0 > m_hi):
        return (best.load + first_break.load) / 2
    return best.load + (first_break.load - best.load) * m_lo / (m_lo - m_hi)
