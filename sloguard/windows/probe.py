"""Per-SLO probe windows: exact percentiles while a window holds ≤100k requests, ≤1% relative beyond.

Each request is one row: its timestamp, `ok`/`good` flags and one column per METRICS entry (seconds;
NaN where undefined, and for failed requests, whose latencies never enter percentiles). The newest
≥ RAW_CAP rows are kept raw, so a window whose rows are all raw gets numpy's exact `linear`
percentiles and exact edges (now − window, now]. Older rows live in time buckets of sketches
(sloguard.windows.sketch, ≤1% relative error); a window reaching into them merges raw and bucket
sketches and its far edge snaps to the nearest bucket boundary (≤ bucket width / 2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from sloguard.model import ProbeResult
from sloguard.windows.rolling import EVICT_CHUNK, RAW_CAP, BucketRing, RawRing, Rows
from sloguard.windows.sketch import Sketch, merge, quantile, sketch_of

# Metric name -> ProbeResult field; "decode" is derived as e2e − ttft. ITL is the request's p99 gap.
METRICS: Mapping[str, str] = {
    "ttft": "ttft_s", "ttfot": "ttfot_s", "tpot": "tpot_s", "itl": "itl_p99_s", "e2e": "e2e_s",
    "connect": "connect_s", "decode": "",
}
_COLUMN = {name: i for i, name in enumerate(METRICS)}
OK, GOOD = 1, 2  # flag bits
MIN_BUCKET = 60.0
BUCKETS_PER_WINDOW = 1008  # 28d -> 40 min buckets


def _row(result: ProbeResult) -> np.ndarray:
    row = np.full(len(METRICS), np.nan)
    if not result.ok:
        return row
    for name, attr in METRICS.items():
        value = getattr(result, attr) if attr else None
        if value is not None:
            row[_COLUMN[name]] = value
    if result.e2e_s is not None and result.ttft_s is not None:
        row[_COLUMN["decode"]] = result.e2e_s - result.ttft_s
    return row


@dataclass(frozen=True, slots=True)
class WindowView:
    """The requests of one window: counts, and the means to read exact or sketched percentiles."""

    total: int
    ok: int
    good: int
    exact: bool
    raw: np.ndarray  # rows of the window held raw, shape (rows, metrics)
    sketches: Sequence[Sketch]  # per metric, from evicted rows (empty when exact)
    _merged: dict[str, Sketch] = field(default_factory=dict)  # per metric, built on first read

    def quantiles(self, metric: str, qs: Sequence[float]) -> tuple[float, ...] | None:
        """Return the metric's quantiles (q in 0..1), or None when the window has no value of it."""
        column = self.raw[:, _COLUMN[metric]]
        if self.exact:
            finite = column[np.isfinite(column)]
            if finite.size == 0:
                return None
            return tuple(float(v) for v in np.percentile(finite, [100.0 * q for q in qs]))
        merged = self._merged.get(metric)
        if merged is None:
            merged = self._merged[metric] = merge([self.sketches[_COLUMN[metric]], sketch_of(column)])
        values = [quantile(merged, q) for q in qs]
        return None if values[0] is None else tuple(float(v or 0.0) for v in values)


class ProbeWindow:
    """The requests of one SLO (or one segment of it) over its longest window."""

    def __init__(self, longest: float, cap: int = RAW_CAP, chunk: int = EVICT_CHUNK) -> None:
        self.longest = longest
        self._raw = RawRing(len(METRICS), cap, chunk)
        self._old = BucketRing(len(METRICS), max(MIN_BUCKET, longest / BUCKETS_PER_WINDOW))

    def add(self, result: ProbeResult, good: bool) -> None:
        """Record one request; `good` says it met every goodput threshold (and succeeded)."""
        flags = (OK if result.ok else 0) | (GOOD if good and result.ok else 0)
        evicted = self._raw.append(result.ts, flags, _row(result))
        if evicted is not None:
            self._old.add(evicted)

    def expire(self, now: float) -> None:
        """Forget what has left the longest window."""
        self._raw.drop_before(now - self.longest)
        self._old.drop_before(now - self.longest)

    def view(self, window: float, now: float) -> WindowView:
        """Return the requests with now − window < ts ≤ now."""
        start = now - window
        rows = self._raw.rows()
        sel = (rows.ts > start) & (rows.ts <= now)
        flags = rows.flags[sel]
        total, ok = int(sel.sum()), int(np.count_nonzero(flags & OK))
        good = int(np.count_nonzero(flags & GOOD))
        if self._old.newest_ts <= start:
            return WindowView(total, ok, good, True, rows.values[sel], ())
        buckets = self._old.select(start, now)
        for bk in buckets:
            total += bk.total
            ok += sum(c for bits, c in bk.flag_counts.items() if bits & OK)
            good += sum(c for bits, c in bk.flag_counts.items() if bits & GOOD)
        sketches = [merge(bk.sketches[m] for bk in buckets) for m in range(len(METRICS))]
        return WindowView(total, ok, good, False, rows.values[sel], sketches)

    @property
    def nbytes(self) -> int:
        """Return the bytes held by raw rows and bucket sketches."""
        return self._raw.nbytes + self._old.nbytes


__all__ = ["METRICS", "ProbeWindow", "Rows", "WindowView"]
