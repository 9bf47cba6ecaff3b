"""Histogram quantiles that agree with everything the histogram says, each with its resolution.

`histogram_quantile` interpolates linearly inside the bucket that holds the rank, so a histogram whose
observations all sit below its first bound (vLLM's queue and prefill buckets start at 0.3 s; a healthy
queue is tens of microseconds) reads p95 = 0.95 × 0.3 s = 285 ms, while its own sum says the mean is 39 µs.
Here a quantile is an interval [lo, hi] the true value is known to lie in, plus a best value inside it:

- bucket: the q-quantile observation lies in the bucket that holds rank q·N: lo = its lower bound (0 for
  the first bucket; latencies are ≥ 0), hi = its upper bound (the largest finite bound for +Inf);
- mean: at least (1 − q)·N observations are ≥ the q-quantile, so sum ≥ (1 − q)·N·value, i.e.
  value ≤ mean / (1 − q) (for q < 1 and a non-negative sum);
- whole: a stage that is part of another (queue of TTFT) is at most the whole at the same quantile
  (`cap`: if every request's part ≤ its whole, every quantile of the part ≤ that of the whole).

The best value is `histogram_quantile` clamped into [lo, hi]; `bounded` says a bound moved it, i.e. the
interpolation was inconsistent with the histogram and the value is an upper bound, not a measurement.
Per-request quantiles are `exact` (lo = hi = value).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sloguard import histogram
from sloguard.model import Histogram

INF = math.inf


@dataclass(frozen=True, slots=True)
class Bounded:
    """A quantile known to lie in [lo, hi]; `value` is the best estimate inside, `bounded` if a bound set it."""

    value: float
    lo: float
    hi: float
    bounded: bool = False

    @classmethod
    def exact(cls, value: float) -> Bounded:
        """Return a measured value: its interval is the value itself."""
        return cls(value, value, value)

    @property
    def is_exact(self) -> bool:
        """Return True for a measured value (no interval)."""
        return self.lo == self.hi

    def cap(self, whole: float) -> Bounded:
        """Return this part limited to `whole` (a part never exceeds its whole at the same quantile)."""
        if self.hi <= whole:
            return self
        hi = max(0.0, whole)
        return replace(self, value=min(self.value, hi), lo=min(self.lo, hi), hi=hi, bounded=True)


def _bucket(q: float, buckets: list[tuple[float, float]]) -> tuple[float, float]:
    """Return (lower, upper) bound of the bucket holding rank q·N; +Inf maps to the largest finite bound."""
    rank = q * buckets[-1][1]
    prev = 0.0
    for bound, count in buckets:
        if count >= rank and count > 0:
            return (prev, prev) if bound == INF else (prev, bound)
        if bound != INF:
            prev = bound
    return prev, prev


def quantile(q: float, h: Histogram) -> Bounded | None:
    """Return the q-quantile (0 ≤ q ≤ 1) of a histogram as an interval (module docstring); None when empty."""
    value = histogram.quantile(q, h)
    if value is None or not 0.0 <= q <= 1.0:
        return None
    buckets = histogram._monotonic(h)
    lo, hi = _bucket(q, buckets)
    bounded = False
    total = buckets[-1][1]
    if q < 1.0 and total > 0 and h.sum >= 0:
        mean_bound = h.sum / total / (1.0 - q)
        if mean_bound < hi:
            hi, bounded = mean_bound, True
    lo = min(lo, hi)
    best = min(max(value, lo), hi)
    return Bounded(best, lo, hi, bounded and best < value)


def quantiles(qs: tuple[float, ...], h: Histogram | None) -> tuple[Bounded, ...] | None:
    """Return every quantile of `qs` as an interval, or None when the histogram is empty or missing."""
    if h is None or h.count <= 0:
        return None
    out = [quantile(q, h) for q in qs]
    return None if any(b is None for b in out) else tuple(b for b in out if b is not None)
