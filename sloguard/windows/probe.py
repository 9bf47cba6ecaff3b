"""Per-SLO probe windows: exact percentiles while a window holds ≤100k requests, ≤1% relative beyond.

Each request is one row: its timestamp, flag bits (ok, good, one "missed" bit per SLO objective) and one
float64 column per stored METRICS entry, encoded as sloguard.censoring says (seconds: exact ≥ 0, censored
−(1 + b), undefined NaN; decode = e2e − ttft is computed on read). Inserts are buffered and stored in bulk
(sorted by timestamp).

Quantiles put each censored request at its bound, which gives a lower bound of the true quantile, and
report beside it the upper bound with every censored request at +∞ (sloguard.windows.censor judges an
objective from the two).
The newest ≥ RAW_CAP rows are kept raw, so a window whose rows are all raw gets numpy's exact `linear`
percentiles (bit for bit) and exact edges (now − window, now]. Older rows live in time buckets of
sketches (sloguard.windows.sketch, ≤1% relative error; exact and censored values in separate sketches);
a window reaching into them merges the cached bucket summary with the (incrementally extended) sketch of
its raw rows, and its far edge snaps to the nearest bucket boundary (≤ bucket width / 2). Counts (total,
ok, good, missed) are exact integers throughout.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from sloguard.censoring import CENSORING, METRICS, STORED_METRICS, decode, decode_column, encode
from sloguard.model import ProbeResult
from sloguard.windows.censor import Quantile, judge_request
from sloguard.windows.rolling import EVICT_CHUNK, RAW_CAP, BucketRing, RawRing, Rows
from sloguard.windows.sketch import (
    EMPTY_SKETCH,
    ExactQuantiles,
    Sketch,
    at_rank,
    lerp_percentiles,
    merge,
    quantile,
    sketch_of,
)

_COLUMN = {name: i for i, name in enumerate(METRICS)}
_TTFT, _E2E, _DECODE = _COLUMN["ttft"], _COLUMN["e2e"], _COLUMN["decode"]
_N = len(METRICS)
OK, GOOD = 1, 2  # flag bits; bit MISS << i: the request missed the SLO's objective i
MISS = 4
MAX_OBJECTIVES = 14  # 16 flag bits
_NO_VALUES = np.zeros(0)
MIN_BUCKET = 60.0
BUCKETS_PER_WINDOW = 1008  # 28d -> 40 min buckets
FLUSH_AT = 256  # buffered results stored at once (bounds the buffer to ~30 KiB)


def judge(result: ProbeResult, objectives: Sequence[tuple[str, float]],
          encoded: tuple[float | None, ...] | None = None) -> tuple[int, int]:
    """Return (missed, judged) bit sets over (metric, threshold) objectives: judged = it has a value or a
    censoring for the metric; missed = censor.judge_request does not hold. `encoded`: encode(result), if known."""
    if not objectives:
        return 0, 0
    values: dict[str, float | None] = dict(zip(STORED_METRICS, encoded or encode(result), strict=True))
    if any(metric == "decode" for metric, _ in objectives):
        values["decode"] = decode(values.get("e2e"), values.get("ttft"))
    missed = judged = 0
    for i, (metric, threshold) in enumerate(objectives):
        v = values.get(metric)
        if v is None or math.isnan(v):
            continue
        judged |= 1 << i
        if not judge_request(v, threshold).holds:
            missed |= 1 << i
    return missed, judged


class _Orders:
    """One metric's order statistics over a window: censored requests at their bounds (the lower-bound
    arrangement, built at once) and, only when a censored value could matter, the measured values alone."""

    def __init__(self, column: np.ndarray) -> None:
        self._column = column
        with np.errstate(invalid="ignore"):
            cut = np.flatnonzero(column < 0)
        self.n_censored = int(cut.size)
        self._min_bound = math.inf
        low = column
        if cut.size:  # rare: only windows holding failed requests copy the column
            low = column.copy()
            low[cut] = -low[cut] - 1.0
            self._min_bound = float(low[cut].min())
        self.low = ExactQuantiles(low)  # NaN (undefined) is dropped
        self._measured: ExactQuantiles | None = None

    def upper(self, q: float, low: float) -> float:
        """Return the q-quantile with every censored value at +∞: inf when it reads a censored rank."""
        n, n_measured = self.low.n, self.low.n - self.n_censored
        pos = (n - 1) * (100.0 * q / 100)  # the rank lerp_percentiles reads (numpy's `linear`)
        top = min(math.floor(pos) + (1 if pos > math.floor(pos) else 0), n - 1)
        if not self.n_censored or self._min_bound > self.low.at(top):  # censored values sit above the ranks used
            return low
        if top >= n_measured:
            return math.inf
        if self._measured is None:
            self._measured = ExactQuantiles(self._column[self._column >= 0])
        at = self._measured.at  # ranks past `top` carry no weight: clamp them into the measured ones
        return lerp_percentiles(n, (q,), lambda r: at(min(r, n_measured - 1)))[0]


class WindowView:
    """The requests of one window: exact counts, and exact or sketched percentiles (built once per metric)."""

    __slots__ = ("_cache", "_column", "_flags", "_orders", "_sketch", "_sketches", "exact", "good", "ok", "total")

    def __init__(self, total: int, ok: int, good: int, column: Callable[[int], np.ndarray],
                 sketch: Callable[[int], tuple[Sketch, Sketch]] | None,
                 flags: Callable[[int], int] = lambda bit: 0) -> None:
        self.total, self.ok, self.good, self.exact = total, ok, good, sketch is None
        self._column, self._sketch, self._flags = column, sketch, flags
        self._cache: dict[str, tuple[Quantile, ...] | None] = {}
        self._orders: dict[str, _Orders] = {}
        self._sketches: dict[str, tuple[Sketch, Sketch]] = {}

    def count(self, bit: int) -> int:
        """Return how many requests have a flag bit set (MISS << i: missed objective i)."""
        return self._flags(bit)

    def population(self, metric: str) -> int:
        """Return the requests with a value or a censoring for the metric."""
        if self._sketch is None:
            return int(np.count_nonzero(~np.isnan(self._column(_COLUMN[metric]))))
        exact, cens = self._sketch_pair(metric)
        return exact.count + cens.count

    def _sketch_pair(self, metric: str) -> tuple[Sketch, Sketch]:
        """Return the metric's (measured, censored-bound) sketches over the window, merged once."""
        assert self._sketch is not None
        if metric not in self._sketches:
            self._sketches[metric] = self._sketch(_COLUMN[metric])
        return self._sketches[metric]

    def quantiles(self, metric: str, qs: Sequence[float]) -> tuple[float, ...] | None:
        """Return the metric's quantiles (q in 0..1), censored requests at their bounds; None without a value."""
        if self._sketch is None:
            return self._order(metric).low.quantiles(qs)
        got = self.censored_quantiles(metric, qs)
        return None if got is None else tuple(q.value for q in got)

    def _order(self, metric: str) -> _Orders:
        if metric not in self._orders:
            self._orders[metric] = _Orders(self._column(_COLUMN[metric]))
        return self._orders[metric]

    def censored_quantiles(self, metric: str, qs: Sequence[float]) -> tuple[Quantile, ...] | None:
        """Return each quantile with its bounds (censor.Quantile): numpy-exact or ≤1% relative; None without a value."""
        key = f"{metric}@{','.join(map(repr, qs))}"
        if key not in self._cache:
            self._cache[key] = self._exact(metric, qs) if self._sketch is None else self._sketched(metric, qs)
        return self._cache[key]

    def _exact(self, metric: str, qs: Sequence[float]) -> tuple[Quantile, ...] | None:
        order = self._order(metric)
        low = order.low.quantiles(qs)
        if low is None:
            return None
        return tuple(Quantile(v, order.upper(q, v), order.n_censored, order.low.n) for q, v in zip(qs, low,
                                                                                                 strict=True))

    def _sketched(self, metric: str, qs: Sequence[float]) -> tuple[Quantile, ...] | None:
        exact, cens = self._sketch_pair(metric)
        both = merge([exact, cens])
        n = both.count
        if not n:
            return None
        out = []
        for q in qs:
            low = float(quantile(both, q) or 0.0)
            high = at_rank(exact, q * (n - 1))  # censored at +∞: None when the rank is past the measured ones
            out.append(Quantile(low, math.inf if high is None else max(low, high), cens.count, n))
        return tuple(out)


class ProbeWindow:
    """The requests of one SLO (or one segment of it) over its longest window."""

    def __init__(self, longest: float, cap: int = RAW_CAP, chunk: int = EVICT_CHUNK, since: float = -math.inf) -> None:
        self.longest = longest
        self.since = since  # observed since: creation time or the oldest row added, whichever is earlier
        self.first_ts = math.inf  # the oldest row ever added: where the data (not the process) begins
        self._raw = RawRing(len(STORED_METRICS), cap, chunk)
        # Bucket columns: every metric's exact values, then every metric's censored bounds.
        self._old = BucketRing(2 * _N, max(MIN_BUCKET, longest / BUCKETS_PER_WINDOW))
        self._pending: list[tuple[float | int | None, ...]] = []
        self._flush_at = min(chunk, FLUSH_AT)
        self._raw_sketches: dict[int, tuple[int, int, int, Sketch]] = {}  # column -> version, lo, hi, sketch

    def add(self, result: ProbeResult, good: bool, missed: int = 0,
            encoded: tuple[float | None, ...] | None = None) -> None:
        """Record one request (O(1): buffered, stored in bulk).

        `good`: it met every goodput threshold; `missed`: bit i set when it missed objective i; `encoded`:
        encode(result) when the caller has it already.
        """
        flags = (OK | (GOOD if good else 0)) if result.ok else 0
        if result.ts < self.since:
            self.since = result.ts
        self.first_ts = min(self.first_ts, result.ts)
        self._pending.append((result.ts, flags | (missed * MISS), *(encoded or encode(result))))
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

        def raw_count(bit: int) -> int:
            return int(np.count_nonzero(flags & bit))

        if self._old.newest_ts <= start:
            return WindowView(total, ok, good, lambda m: self._column(m, lo, hi), None, raw_count)
        old = self._old.summary(start, now)
        return WindowView(total + old.total, ok + old.count(OK), good + old.count(GOOD),
                          lambda m: self._column(m, lo, hi),
                          lambda m: (merge([old.sketch(m), self._raw_sketch(m, lo, hi)]),
                                     merge([old.sketch(_N + m), self._raw_sketch(_N + m, lo, hi)])),
                          lambda bit: raw_count(bit) + old.count(bit))

    def covered(self, window: float, now: float) -> float:
        """Return the seconds of `window` observed: min(window, now − since), ≥ 0 (window when since is −inf)."""
        return max(0.0, min(window, now - self.since))

    def data_span(self, window: float, now: float) -> float:
        """Return the seconds of `window` the stored data spans: min(window, now − oldest row), 0 without rows."""
        return max(0.0, min(window, now - self.first_ts)) if math.isfinite(self.first_ts) else 0.0

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
        evicted = self._raw.extend(Rows(block[:, 0], block[:, 1].astype(np.uint16), block[:, 2:]))
        if evicted is not None:
            full = np.column_stack([evicted.values, decode_column(evicted.values[:, _E2E], evicted.values[:, _TTFT])])
            with np.errstate(invalid="ignore"):
                exact = np.where(full >= 0, full, np.nan)
                bounds = np.where(full < 0, -full - 1.0, np.nan)
            self._old.add(Rows(evicted.ts, evicted.flags, np.column_stack([exact, bounds])))

    def _column(self, m: int, lo: int, hi: int) -> np.ndarray:
        if m != _DECODE and not self._raw.allocated(m):  # never a value: no data, without a NaN array
            return _NO_VALUES
        if m == _DECODE:
            return decode_column(self._raw.column(_E2E, lo, hi), self._raw.column(_TTFT, lo, hi))
        return self._raw.column(m, lo, hi)

    def _split_column(self, c: int, lo: int, hi: int) -> np.ndarray:
        """Return bucket-layout column c (exact values of metric c, or censored bounds of metric c − N)."""
        col = self._column(c % _N, lo, hi)
        with np.errstate(invalid="ignore"):
            return np.where(col >= 0, col, np.nan) if c < _N else np.where(col < 0, -col - 1.0, np.nan)

    def _raw_sketch(self, c: int, lo: int, hi: int) -> Sketch:
        version, c_lo, c_hi, sketch = self._raw_sketches.get(c, (-1, 0, 0, EMPTY_SKETCH))
        if (version, c_lo) == (self._raw.version, lo) and c_hi <= hi:  # rows only appended since: extend
            sketch = merge([sketch, sketch_of(self._split_column(c, c_hi, hi))])
        else:
            sketch = sketch_of(self._split_column(c, lo, hi))
        self._raw_sketches[c] = (self._raw.version, lo, hi, sketch)
        return sketch


__all__ = ["CENSORING", "METRICS", "ProbeWindow", "Quantile", "Rows", "WindowView"]
