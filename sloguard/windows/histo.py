"""Quantiles and threshold fractions from cumulative histogram deltas (Prometheus semantics, resets handled).

Pure functions on `Histogram` (bounds as floats, so `le="1"` and `le="1.0"` are one bound) plus
`HistogramWindow`, which keeps successive cumulative scrapes of one series. The window stores
reset-corrected cumulative histograms, so a window's delta is one subtraction and old points can be
thinned (one per time slot ≤ 1/64 of their age wide) without losing restarts: 4 days of 15 s scrapes
keep ≈700 points instead of 23,040.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Iterable, Sequence

from sloguard.model import Histogram

INF = math.inf
_THIN_EVERY = 64
_THIN_RATIO = 64.0


def is_reset(old: Histogram, new: Histogram) -> bool:
    """Return True when `new` cannot follow `old`: bounds changed, or any count or bucket decreased."""
    if new.count < old.count or len(new.buckets) != len(old.buckets):
        return True
    return any(nb != ob or nc < oc for (nb, nc), (ob, oc) in zip(new.buckets, old.buckets, strict=True))


def delta(old: Histogram, new: Histogram) -> Histogram:
    """Return new − old per bucket; after a counter reset (restart) return `new` itself."""
    if is_reset(old, new):
        return new
    return _minus(new, old)


def _minus(new: Histogram, old: Histogram) -> Histogram:
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
    buckets = _monotonic(h)
    total = buckets[-1][1]
    if total <= 0:
        return None
    prev_b, prev_c = 0.0, 0.0
    for b, c in buckets:
        if math.isclose(b, threshold, rel_tol=1e-9, abs_tol=1e-12):
            return c / total, True
        if threshold < b:
            if b == INF:
                return prev_c / total, False
            lo = min(prev_b, threshold)
            share = (threshold - lo) / (b - lo) if b > lo else 1.0
            return (prev_c + (c - prev_c) * share) / total, False
        prev_b, prev_c = b, c
    return 1.0, True


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


_Packed = tuple[tuple[float, ...], "array[float]", float, float]
_BOUNDS: dict[tuple[float, ...], tuple[float, ...]] = {}


def _pack(h: Histogram) -> _Packed:
    bounds = tuple(b for b, _ in h.buckets)
    bounds = _BOUNDS.setdefault(bounds, bounds)  # one tuple per distinct bucket layout, shared by all points
    return bounds, array("d", (c for _, c in h.buckets)), h.count, h.sum


def _unpack(p: _Packed) -> Histogram:
    bounds, counts, count, total = p
    return Histogram(tuple(zip(bounds, counts, strict=True)), count, total)


class HistogramWindow:
    """Successive cumulative scrapes of one series; windowed deltas that survive restarts."""

    def __init__(self, max_age: float) -> None:
        self.max_age = max_age
        self._ts: list[float] = []
        # Points are stored packed (shared bounds + an array of counts): ~0.3 KB instead of ~2.3 KB for
        # vLLM's 22-bucket histograms, which matters at hundreds of points per series over an SLO window.
        self._cum: list[_Packed] = []
        self._last_raw: Histogram | None = None
        self._offset: Histogram | None = None
        self._resets = 0
        self._adds = 0

    def add(self, ts: float, h: Histogram) -> None:
        """Record a scrape at `ts`; out-of-order or duplicate timestamps are ignored."""
        if self._ts and ts <= self._ts[-1]:
            return
        last = self._last_raw
        if last is not None and is_reset(last, h):
            self._resets += 1
            self._offset = merge(x for x in (self._offset, last) if x is not None)
        self._last_raw = h
        cum = h if self._offset is None else merge((self._offset, h))
        assert cum is not None
        self._ts.append(ts)
        self._cum.append(_pack(cum))
        self._adds += 1
        if self._adds % _THIN_EVERY == 0:
            self._thin(ts)

    def over(self, window: float, now: float) -> Histogram | None:
        """Return the delta between the newest point ≤ now and the point at/just before now − window.

        With less history than `window`, the oldest point is the base. None without two points, or
        when the newest point is older than the window (a target that stopped answering).
        """
        found = self.over_span(window, now)
        return found[0] if found else None

    def over_span(self, window: float, now: float) -> tuple[Histogram, float] | None:
        """Return (delta, seconds between its two points) as `over` defines it, or None."""
        end = bisect.bisect_right(self._ts, now) - 1
        if end < 1 or self._ts[end] <= now - window:
            return None
        base = max(0, bisect.bisect_right(self._ts, now - window) - 1)
        base = min(base, end - 1)
        return _minus(_unpack(self._cum[end]), _unpack(self._cum[base])), self._ts[end] - self._ts[base]

    def resets(self) -> int:
        """Return the counter resets (engine restarts) seen so far."""
        return self._resets

    def newest(self) -> float | None:
        """Return the timestamp of the newest point, or None when empty."""
        return self._ts[-1] if self._ts else None

    def _thin(self, now: float) -> None:
        """Drop points older than max_age (keeping one base) and keep one point per time slot.

        Slots are aligned to absolute time with a width of the power of two ≤ age/64, so kept points
        never erode from one end: points an age A old stay ≤ A/32 apart (window error ≤ 3%).
        """
        keep: list[int] = []
        seen: set[tuple[float, float]] = set()
        for i in range(len(self._ts) - 1, -1, -1):
            t = self._ts[i]
            age = now - t
            if age > self.max_age:
                keep.append(i)  # the base for the oldest window
                break
            step = 2.0 ** math.floor(math.log2(age / _THIN_RATIO)) if age >= _THIN_RATIO else 0.0
            slot = (step, math.floor(t / step) if step else float(i))
            if slot not in seen:
                seen.add(slot)
                keep.append(i)
        keep.reverse()
        self._ts = [self._ts[i] for i in keep]
        self._cum = [self._cum[i] for i in keep]
