"""A compared number (a cell of the report) and its verdict.

Verdict of a cell in the report's family (latency quantiles, goodput, error rate, throughput):
- **regression**: the Holm-adjusted p-value ≤ α (0.05 over the whole family) *and* the estimate is worse
  than the practical threshold (default 5 % relative; error rate 1 percentage point);
- **improvement**: the same, better by more than the threshold;
- **no significant change**: not significant, and the 95 % interval rules out a change beyond the
  threshold in either direction;
- **not enough data**: too few values beyond the quantile (fewer than `min_tail` on a side), or an
  interval still wide enough to hold a change beyond the threshold (the cell says about how many
  requests per side would settle it).
Stage components (queue, prefill, ...) are shown with their own 95 % intervals but are not verdicts.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from sloguard.reports.stats import Change, holm, needed

Verdict = Literal["regression", "improvement", "no significant change", "not enough data"]
Scale = Literal["relative", "absolute"]
ORDER: tuple[Verdict, ...] = ("regression", "improvement", "no significant change", "not enough data")


@dataclass(frozen=True)
class Cell:
    """One metric at one statistic and scope, baseline vs candidate."""

    metric: str  # ttft, tpot, goodput:<slo>, error_rate, throughput, stage:queue ...
    stat: str  # p50 / p95 / p99 / ratio / share / rps
    scope: str  # overall, bucket:<name>, load:<label>
    kind: str  # latency | goodput | error_rate | throughput | stage
    base: float | None  # +inf: censored (a lower bound: see base_bound)
    cand: float | None
    n_base: int
    n_cand: int
    scale: Scale = "relative"
    worse: Literal["up", "down"] = "up"
    threshold: float = 0.05
    delta: float | None = None  # relative (e^θ − 1) or absolute difference
    ci: tuple[float, float] | None = None
    p: float | None = None
    p_adjusted: float | None = None
    family: bool = True
    verdict: Verdict = "not enough data"
    reason: str = ""
    base_bound: float | None = None  # censored: the largest time a censored request ran ("> this")
    cand_bound: float | None = None
    resolution: tuple[float, float] | None = None  # Prometheus: the delta is within this at bucket resolution

    def as_json(self) -> dict[str, Any]:
        """Return the cell with non-finite numbers as null and a `censored` flag per side."""
        out = asdict(self)
        for key in ("base", "cand", "delta"):
            v = out[key]
            if isinstance(v, float) and not math.isfinite(v):
                out[key] = None
        out["base_censored"] = self.base is not None and math.isinf(self.base)
        out["cand_censored"] = self.cand is not None and math.isinf(self.cand)
        out["ci"] = None if self.ci is None else [_finite(x) for x in self.ci]
        out["resolution"] = None if self.resolution is None else [_finite(x) for x in self.resolution]
        return out


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def to_scale(ch: Change, scale: Scale) -> tuple[float, tuple[float, float]]:
    """Return (delta, interval) on the report's scale: relative = e^θ − 1, absolute as is."""
    if scale == "absolute":
        return ch.estimate, (ch.low, ch.high)
    return _expm1(ch.estimate), (_expm1(ch.low), _expm1(ch.high))


def _expm1(x: float) -> float:
    return math.inf if x == math.inf else -1.0 if x == -math.inf else math.expm1(x)


def with_change(cell: Cell, ch: Change | None) -> Cell:
    """Return the cell with its delta, interval and p-value (or 'not enough data' when there is no change)."""
    if ch is None:
        return replace(cell, reason=cell.reason or "no comparable values")
    delta, ci = to_scale(ch, cell.scale)
    return replace(cell, delta=delta, ci=ci, p=ch.p)


def judge(cells: list[Cell], alpha: float) -> list[Cell]:
    """Return the cells with Holm-adjusted p-values over the family and each cell's verdict."""
    family = [i for i, c in enumerate(cells) if c.family and c.p is not None and not c.reason]
    adjusted = holm([cells[i].p or 0.0 for i in family])  # p is set for every family member
    out = list(cells)
    for i, p_adj in zip(family, adjusted, strict=True):
        out[i] = _verdict(replace(out[i], p_adjusted=p_adj), alpha)
    return out


def _verdict(c: Cell, alpha: float) -> Cell:
    assert c.delta is not None and c.ci is not None and c.p_adjusted is not None
    up = c.worse == "up"
    worse = c.delta if up else -c.delta
    lo, hi = c.ci if up else (-c.ci[1], -c.ci[0])  # the interval of "how much worse"
    if c.p_adjusted <= alpha and worse > c.threshold:
        return replace(c, verdict="regression")
    if c.p_adjusted <= alpha and worse < -c.threshold:
        return replace(c, verdict="improvement")
    if -c.threshold <= lo and hi <= c.threshold:
        return replace(c, verdict="no significant change")
    # to settle it the interval must shrink until it clears the threshold on the side the estimate is on
    more = needed(max(c.n_base, c.n_cand), (hi - lo) / 2.0, max(abs(abs(worse) - c.threshold), c.threshold / 2.0))
    reason = (f"the interval {_pct(c, c.ci[0])} … {_pct(c, c.ci[1])} still holds changes beyond "
              f"±{_pct(c, c.threshold, signed=False)}")
    if more:
        reason += f"; about {more} requests per side would settle it"
    return replace(c, verdict="not enough data", reason=reason)


def _pct(c: Cell, x: float, signed: bool = True) -> str:
    if not math.isfinite(x):
        return "+∞" if x > 0 else "−∞"
    if c.scale == "absolute" and c.kind == "error_rate":
        return f"{x * 100:+.1f} pp" if signed else f"{x * 100:.1f} pp"
    if c.scale == "absolute":
        return f"{x * 1000:+.1f} ms" if signed else f"{x * 1000:.1f} ms"
    return f"{x * 100:+.1f} %" if signed else f"{x * 100:.0f} %"


def overall(cells: list[Cell]) -> Verdict:
    """Return the report's verdict: any regression; else any improvement; else no change if anything was judged."""
    judged = [c.verdict for c in cells if c.family]
    v: Verdict
    for v in ("regression", "improvement"):
        if v in judged:
            return v
    return "no significant change" if "no significant change" in judged else "not enough data"
