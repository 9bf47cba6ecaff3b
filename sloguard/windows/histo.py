"""HistogramWindow: successive cumulative scrapes of one series, and their delta over any window.

The maths on one histogram (delta, merge, quantile, fraction under a threshold) is sloguard.histogram. The
window stores reset-corrected cumulative histograms, so a window's delta is one subtraction and old points can
be thinned (one per time slot ≤ 1/64 of their age wide) without losing restarts: 4 days of 15 s scrapes keep
≈700 points instead of 23,040.
"""

from __future__ import annotations

import bisect
import math
from array import array

from sloguard.histogram import is_reset, merge, minus
from sloguard.model import Histogram

_THIN_EVERY = 64
_THIN_RATIO = 64.0
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
        self._first: _Packed | None = None  # the first point ever: what `total` counts from (never thinned)
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
        if self._first is None:
            self._first = self._cum[0]
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
        return minus(_unpack(self._cum[end]), _unpack(self._cum[base])), self._ts[end] - self._ts[base]

    def total(self) -> Histogram | None:
        """Return everything observed since the first point (resets handled): the delta of any window is the
        difference of two totals, so a counter exported from it subtracts to the windows' counts."""
        if self._first is None or not self._cum:
            return None
        return minus(_unpack(self._cum[-1]), _unpack(self._first))

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
