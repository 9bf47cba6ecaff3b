"""One rule for objectives that requests cut short could move (docs/definitions.md: censored latencies).

A request that ended (timeout, reset, error) before a metric's event is **censored**: all we know is that its
value is more than the time it ran. A quantile over a window is then only known to lie in [lower, upper]:
`lower` with every censored request at the time it ran, `upper` with every one at +∞ (inf when a censored
request holds one of the ranks the quantile reads). An objective "quantile ≤ threshold":
- holds when upper ≤ threshold: no value the cut-short requests could have had moves it over (it is judged on
  the measured values; how many were cut short is still reported);
- is missed on measured values when lower > threshold;
- is missed *because of* cut-short requests (`censored`) only when lower ≤ threshold < upper.
A single request is the quantile of a window of one: a censored one at bound b has lower = b, upper = +∞.
Every place that judges a probe quantile or request against a threshold calls `judge` (SLO status, per-request
budget bits, diagnosis breaches), so none can call missed what another calls held.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Quantile:
    """A quantile over one window: bounds with cut-short requests at the time they ran and at +∞, and counts."""

    value: float  # the lower bound: every cut-short request at the time it ran
    upper: float  # every cut-short request at +∞; == value when none can move it; inf when one holds a rank
    censored_count: int  # requests in the window cut short before the metric's event
    count: int  # requests with a value or a censoring for the metric

    @property
    def exact(self) -> bool:
        """Return whether the cut-short requests cannot move the quantile (value is the quantile)."""
        return self.upper == self.value


@dataclass(frozen=True, slots=True)
class Judgement:
    """Whether an objective holds, and whether it is missed only because of cut-short requests."""

    holds: bool
    censored: bool  # missed, and lower ≤ threshold < upper: the measured values alone would hold


HOLDS = Judgement(True, False)
MISSED = Judgement(False, False)
MISSED_CUT_SHORT = Judgement(False, True)


def judge(lower: float, upper: float, threshold: float) -> Judgement:
    """Judge "quantile ≤ threshold" for a quantile known to lie in [lower, upper] (upper may be inf)."""
    if upper <= threshold:
        return HOLDS
    return MISSED if lower > threshold else MISSED_CUT_SHORT


def judge_quantile(q: Quantile, threshold: float) -> Judgement:
    """Judge "quantile ≤ threshold" for a window's quantile (module docstring)."""
    return judge(q.value, q.upper, threshold)


def judge_request(stored: float, threshold: float) -> Judgement:
    """Judge one request's stored value: ≥ 0 measured, < 0 censored at bound −(1 + stored) (windows.probe)."""
    if stored >= 0:
        return judge(stored, stored, threshold)
    return judge(-1.0 - stored, math.inf, threshold)


__all__ = ["HOLDS", "MISSED", "MISSED_CUT_SHORT", "Judgement", "Quantile", "judge", "judge_quantile", "judge_request"]
