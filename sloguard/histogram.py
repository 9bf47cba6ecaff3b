"""Quantiles and threshold fractions from cumulative histograms (Prometheus semantics, counter resets handled).

Pure functions on `Histogram` (bounds as floats, so `le="1"` and `le="1.0"` are one bound): the delta between
two scrapes (a reset counts from zero), merging replicas' histograms, `histogram_quantile`'s interpolation, and
the share of observations at or under a threshold. sloguard.windows.histo keeps successive scrapes of a series.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence

from sloguard.model import Histogram

INF = math.inf


def is_reset(old: Histogram, new: Histogram) -> bool:
    """Return True when `new` cannot follow `old`: bounds changed, or any count or bucket decreased."""
    if new.count < old.count or len(new.buckets) != len(old.buckets):
        return True
    return any(nb != ob or nc < oc for (nb, nc), (ob, oc) in zip(new.buckets, old.buckets, strict=True))


def delta(old: Histogram, new: Histogram) -> Histogram:
    """Return new − old per bucket; after a counter reset (restart) return `new` itself."""
    if is_reset(old, new):
        return new
    return minus(new, old)


def minus(new: Histogram, old: Histogram) -> Histogram:
    """Subtract `old` (aligned onto `new`'s bounds) from `new`; negatives clamp to 0."""
    buckets = tuple((b, max(0.0, c - _cum_at(old, b))) for b, c in new.buckets)
    return Histogram(buckets, max(0.0, new.count - old.count), new.sum - old.sum)


def _cum_at(h: Histogram, bound: float) -> float:
    """Cumulative count of `h` at `bound`: the count of its largest own bound ≤ `bound`."""
    best = 0.0
    for b, c in h.buckets:
        if b > bound:
            break
        best = c
    return best


def merge(hs: Iterable[Histogram]) -> Histogram | None:
    """Sum histograms (e.g. across engine / rank series) on the union of their bounds; None if none."""
    items = list(hs)
    if not items:
        return None
    if len(items) == 1:
        return items[0]
    bounds = sorted({b for h in items for b, _ in h.buckets} | {INF})
    buckets = tuple((b, sum(_cum_at(h, b) if b != INF else _inf_count(h) for h in items)) for b in bounds)
    return Histogram(buckets, sum(h.count for h in items), sum(h.sum for h in items))


def _inf_count(h: Histogram) -> float:
    return h.buckets[-1][1] if h.buckets and h.buckets[-1][0] == INF else h.count


def _monotonic(h: Histogram) -> list[tuple[float, float]]:
    """Buckets with +Inf last and counts forced non-decreasing, as Prometheus does."""
    out: list[tuple[float, float]] = []
    top = 0.0
    for b, c in h.buckets:
        top = max(top, c)
        out.append((b, top))
    if not out or out[-1][0] != INF:
        out.append((INF, max(top, h.count)))
    return out


def quantile(q: float, h: Histogram) -> float | None:
    """Return `histogram_quantile(q, h)`; None when empty or without a finite bucket; ±Inf for q outside 0..1."""
    if q < 0:
        return -INF
    if q > 1:
        return INF
    buckets = _monotonic(h)
    total = buckets[-1][1]
    if len(buckets) < 2 or total <= 0:
        return None
    rank = q * total
    i = next((k for k in range(len(buckets) - 1) if buckets[k][1] >= rank), len(buckets) - 1)
    if i == len(buckets) - 1:
        return buckets[-2][0]
    if i == 0 and buckets[0][0] <= 0:
        return buckets[0][0]
    start, end, count = 0.0, buckets[i][0], buckets[i][1]
    if i > 0:
        start = buckets[i - 1][0]
        count -= buckets[i - 1][1]
        rank -= buckets[i - 1][1]
    return start + (end - start) * (rank / count) if count > 0 else end


def fraction_le(h: Histogram, threshold: float) -> tuple[float, bool] | None:
    """Return (share of observations ≤ threshold, exact?); exact iff threshold is a bucket edge. None if empty."""
    got = _le(h, threshold)
    return None if got is None else (got[0] / got[1], got[2])


def count_le(h: Histogram, threshold: float) -> tuple[float, bool] | None:
    """Return (observations ≤ threshold on the scale of h.count, exact?); None if empty.

    Linear in the bucket counts (so the counts of two cumulative histograms subtract to the count of their delta)
    and an integer where the threshold is a bucket edge and h.count is the +Inf bucket's count.
    """
    got = _le(h, threshold)
    if got is None:
        return None
    le, total, exact = got
    return (le if total == h.count else le * (h.count / total)), exact


def _le(h: Histogram, threshold: float) -> tuple[float, float, bool] | None:
    """Return (interpolated cumulative count at threshold, the +Inf count, exact?) as histogram_fraction does."""
    buckets = _monotonic(h)
    total = buckets[-1][1]
    if total <= 0:
        return None
    prev_b, prev_c = 0.0, 0.0
    for b, c in buckets:
        if math.isclose(b, threshold, rel_tol=1e-9, abs_tol=1e-12):
            return c, total, True
        if threshold < b:
            if b == INF:
                return prev_c, total, False
            lo = min(prev_b, threshold)
            share = (threshold - lo) / (b - lo) if b > lo else 1.0
            return prev_c + (c - prev_c) * share, total, False
        prev_b, prev_c = b, c
    return total, total, True


def coarse_bucket_warning(bounds: Sequence[float], threshold: float) -> str | None:
    """Warn when `threshold` falls inside a bucket wider than 10% of it (interpolation can be 30–50% off)."""
    finite = sorted(b for b in bounds if b != INF)
    if any(math.isclose(b, threshold, rel_tol=1e-9) for b in finite):
        return None
    i = bisect.bisect_left(finite, threshold)
    lo = finite[i - 1] if i > 0 else 0.0
    if i == len(finite):
        return (f"threshold {threshold:g}s is above the largest finite bucket bound "
                f"({lo:g}s): the fraction below it cannot be measured")
    hi = finite[i]
    if hi - lo > 0.1 * threshold:
        return (f"threshold {threshold:g}s falls inside bucket ({lo:g}s, {hi:g}s], wider than 10% of it: "
                f"quantiles and fractions there are interpolated; use a bucket edge as the threshold")
    return None
