"""Find the highest load at which the SLO holds: bracket by doubling (or halving), then bisect (pure).

`measure(load, attempt)` runs one stage and judges it (sloguard.bench.judge); its point estimate
decides the direction. Once the bracket is narrow enough, an end of it that is still uncertain is
measured again (attempt 1, 2, ...: the caller pools the samples of one load) up to `confirm` times; if it
flips, bisection resumes. Confidence is thus spent where it decides the answer, not on loads far from
it. Definitions (docs/load-tests.md):
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
        """Measure a load (again, if measured before: the caller pools the samples); return its lean."""
        prev = self.points.get(load)
        attempt = prev.stages if prev is not None else 0
        outcome = self.measure(load, attempt)
        self.stages += 1
        self.points[load] = Point(load, outcome.verdict, outcome.holds, outcome.margin, outcome.worst,
                                  outcome.hopeless, attempt + 1)
        return outcome.holds

    def bracket(self) -> tuple[float | None, float | None]:
        """Return (highest holding load below the first break, first break) over every point so far."""
        ordered = sorted(self.points.values(), key=lambda p: p.load)
        first = next((p for p in ordered if not p.holds), None)
        below = [p for p in ordered if first is None or p.load < first.load]
        lo = below[-1].load if below and below[-1].holds else None
        return lo, first.load if first is not None else None

    def unsure(self, lo: float | None, hi: float | None) -> list[float]:
        """Return the bracket ends still uncertain that may be measured again (not hopeless, within confirm)."""
        ends = [x for x in (lo, hi) if x is not None]
        return [x for x in ends if self.points[x].verdict == "uncertain" and self.points[x].stages <= self.spec.confirm]

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
    """Bracket, bisect, then measure uncertain bracket ends again; bisect again if an end flipped."""
    stopped = _first_bracket(s)
    if stopped:
        return stopped
    while True:
        lo, hi = s.bracket()
        if lo is None or hi is None:
            return "floor" if lo is None else "ceiling"
        if not s.converged(lo, hi):
            if not s.budget_left():
                return "budget"
            s.holds(s.midpoint(lo, hi))
            continue
        again = s.unsure(lo, hi)
        if not again or not s.budget_left():
            return "converged"
        s.holds(again[0])


def _first_bracket(s: _Search) -> str:
    """Double (or halve) from the start until one load holds and another breaks; '' once bracketed."""
    spec = s.spec
    load = min(max(spec.start, spec.min_load), spec.max_load)
    up = s.holds(load)
    while True:
        if up and load >= spec.max_load:
            return "" if s.unsure(load, None) else "ceiling"
        nxt = s.step(load, up)
        if not up and nxt < spec.min_load:
            return "" if s.unsure(None, load) else "floor"
        if not s.budget_left():
            return "budget"
        if s.holds(nxt) != up:
            return ""
        load = nxt


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
