"""Per-SLO probe windows: exact percentiles while a window holds ≤100k requests, ≤1% relative beyond.

Each request is one row: its timestamp, `ok`/`good` flags and one float64 column per stored METRICS
entry (seconds; NaN where undefined, and for failed requests, whose latencies never enter percentiles;
decode = e2e − ttft is computed on read). Inserts are buffered and stored in bulk (sorted by timestamp).
The newest ≥ RAW_CAP rows are kept raw, so a window whose rows are all raw gets numpy's exact `linear`
percentiles (bit for bit) and exact edges (now − window, now]. Older rows live in time buckets of
sketches (sloguard.windows.sketch, ≤1% relative error); a window reaching into them merges the cached
bucket summary with the (incrementally extended) sketch of its raw rows, and its far edge snaps to the
nearest bucket boundary (≤ bucket width / 2). Counts (total, ok, good) are exact integers throughout.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter

import numpy as np

from sloguard.model import ProbeResult
from sloguard.windows.rolling import EVICT_CHUNK, RAW_CAP, BucketRing, RawRing, Rows
from sloguard.windows.sketch import ExactQuantiles, Sketch, merge, quantile, sketch_of

# Metric name -> ProbeResult field; "decode" is derived as e2e − ttft. ITL is the request's p99 gap.
METRICS: Mapping[str, str] = {
    "ttft": "ttft_s", "ttfot": "ttfot_s", "tpot": "tpot_s", "itl": "itl_p99_s", "e2e": "e2e_s",
    "connect": "connect_s",
    # stages measured per request from the server's own record (sloguard.traces), source="request"
    "request_network": "network_s", "request_queue": "queue_s", "request_prefill": "prefill_s",
    "request_decode": "server_decode_s",
    "head": "head_s",  # time to the response head: the network stage where no server record exists
    "decode": "",  # last: the bucket ring appends the derived column after the stored ones
}
_COLUMN = {name: i for i, name in enumerate(METRICS)}
_STORED = tuple(attr for attr in METRICS.values() if attr)  # raw columns; decode is computed on read
_READ = attrgetter(*_STORED)
_FAILED = (None,) * len(_STORED)  # a failed request's latencies never enter percentiles
_TTFT, _E2E, _DECODE = _COLUMN["ttft"], _COLUMN["e2e"], _COLUMN["decode"]
OK, GOOD = 1, 2  # flag bits
MIN_BUCKET = 60.0
BUCKETS_PER_WINDOW = 1008  # 28d -> 40 min buckets
FLUSH_AT = 256  # buffered results stored at once (bounds the buffer to ~30 KiB)


class WindowView:
    """The requests of one window: exact counts, and exact or sketched percentiles (built once per metric)."""

    __slots__ = ("_column", "_merged", "_orders", "_sketch", "exact", "good", "ok", "total")

    def __init__(self, total: int, ok: int, good: int, column: Callable[[int], np.ndarray],
                 sketch: Callable[[int], Sketch] | None) -> None:
        self.total, self.ok, self.good, self.exact = total, ok, good, sketch is None
        self._column, self._sketch = column, sketch
        self._orders: dict[str, ExactQuantiles] = {}
        self._merged: dict[str, Sketch] = {}

    def quantiles(self, metric: str, qs: Sequence[float]) -> tuple[float, ...] | None:
        """Return the metric's quantiles (q in 0..1): numpy-exact or ≤1% relative; None without a value."""
        if self._sketch is None:
            order = self._orders.get(metric)
            if order is None:
                order = self._orders[metric] = ExactQuantiles(self._column(_COLUMN[metric]))
            return order.quantiles(qs)
        merged = self._merged.get(metric)
        if merged is None:
            merged = self._merged[metric] = self._sketch(_COLUMN[metric])
        values = [quantile(merged, q) for q in qs]
        return None if values[0] is None else tuple(float(v or 0.0) for v in values)


class ProbeWindow:
    """The requests of one SLO (or one segment of it) over its longest window."""

    def __init__(self, longest: float, cap: int = RAW_CAP, chunk: int = EVICT_CHUNK, since: float = -math.inf) -> None:
        self.longest = longest
        self.since = since  # observed since: creation time or the oldest row added, whichever is earlier
        self._raw = RawRing(len(_STORED), cap, chunk)
        self._old = BucketRing(len(METRICS), max(MIN_BUCKET, longest / BUCKETS_PER_WINDOW))
        self._pending: list[tuple[float | int | None, ...]] = []
        self._flush_at = min(chunk, FLUSH_AT)
        self._raw_sketches: dict[int, tuple[int, int, int, Sketch]] = {}  # metric -> version, lo, hi, sketch

    def add(self, result: ProbeResult, good: bool) -> None:
        """Record one request (O(1): buffered, stored in bulk); `good` says it met every goodput threshold."""
        flags = (OK | (GOOD if good else 0)) if result.ok else 0
        if result.ts < self.since:
            self.since = result.ts
        self._pending.append((result.ts, flags, *(_READ(result) if result.ok else _FAILED)))
        if len(self._pending) >= self._flush_at:
            self._flush()

    def expire(self, now: float) -> None:
        """Forget what has left the longest window."""
        self._flush()
        self._raw.drop_before(now - self.longest)
        self._old.drop_before(now - self.longest)

    def view(self, window: float, now: float) -> WindowView:
        """Return the requests with now − window < ts ≤ now (far edge snapped to a bucket beyond the raw rows)."""
        self._flush()
        start = now - window
        lo, hi = self._raw.index(start), self._raw.index(now)
        flags = self._raw.flags[lo:hi]
        total, ok, good = hi - lo, int(np.count_nonzero(flags & OK)), int(np.count_nonzero(flags & GOOD))
        if self._old.newest_ts <= start:
            return WindowView(total, ok, good, lambda m: self._column(m, lo, hi), None)
        old = self._old.summary(start, now)
        return WindowView(total + old.total, ok + old.count(OK), good + old.count(GOOD),
                          lambda m: self._column(m, lo, hi),
                          lambda m: merge([old.sketch(m), self._raw_sketch(m, lo, hi)]))

    def covered(self, window: float, now: float) -> float:
        """Return the seconds of `window` observed: min(window, now − since), ≥ 0 (window when since is −inf)."""
        return max(0.0, min(window, now - self.since))

    @property
    def nbytes(self) -> int:
        """Return the bytes held by raw rows and bucket sketches."""
        return self._raw.nbytes + self._old.nbytes

    @property
    def bucket_nbytes(self) -> int:
        """Return the bytes held by bucket sketches alone (they grow with the span beyond the raw rows)."""
        return self._old.nbytes

    def _flush(self) -> None:
        if not self._pending:
            return
        block = np.array(self._pending, dtype=np.float64)
        self._pending = []
        evicted = self._raw.extend(Rows(block[:, 0], block[:, 1].astype(np.uint8), block[:, 2:]))
        if evicted is not None:
            decode = evicted.values[:, _E2E] - evicted.values[:, _TTFT]
            self._old.add(Rows(evicted.ts, evicted.flags, np.column_stack([evicted.values, decode])))

    def _column(self, m: int, lo: int, hi: int) -> np.ndarray:
        if m == _DECODE:
            decode: np.ndarray = self._raw.column(_E2E, lo, hi) - self._raw.column(_TTFT, lo, hi)
            return decode
        return self._raw.column(m, lo, hi)

    def _raw_sketch(self, m: int, lo: int, hi: int) -> Sketch:
        version, c_lo, c_hi, sketch = self._raw_sketches.get(m, (-1, 0, 0, merge([])))
        if (version, c_lo) == (self._raw.version, lo) and c_hi <= hi:  # rows only appended since: extend
            sketch = merge([sketch, sketch_of(self._column(m, c_hi, hi))])
        else:
            sketch = sketch_of(self._column(m, lo, hi))
        self._raw_sketches[m] = (self._raw.version, lo, hi, sketch)
        return sketch


__all__ = ["METRICS", "ProbeWindow", "Rows", "WindowView"]
