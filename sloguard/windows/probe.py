"""Per-SLO probe windows: exact percentiles while a window holds ≤100k requests, ≤1% relative beyond.

Each request is one row: its timestamp, flag bits (ok, good, one "missed" bit per SLO objective) and one
float64 column per stored METRICS entry (seconds; decode = e2e − ttft is computed on read). A value is
exact (≥ 0), undefined (NaN: never part of that metric's population) or **censored**: the request ended
(timeout, reset, error) before the metric's event, so all we know is "more than b seconds"; it is stored
as −(1 + b). CENSORING says, per metric, which failed requests are censored and at what bound b
(README "Exact definitions"). Inserts are buffered and stored in bulk (sorted by timestamp).

Quantiles put each censored request at its bound, which gives a lower bound of the true quantile; the
result is exact only if moving every censored value to +∞ leaves it unchanged (checked by recomputing
with censored values at a sentinel above every real latency), else it is reported `censored`.
The newest ≥ RAW_CAP rows are kept raw, so a window whose rows are all raw gets numpy's exact `linear`
percentiles (bit for bit) and exact edges (now − window, now]. Older rows live in time buckets of
sketches (sloguard.windows.sketch, ≤1% relative error; exact and censored values in separate sketches);
a window reaching into them merges the cached bucket summary with the (incrementally extended) sketch of
its raw rows, and its far edge snaps to the nearest bucket boundary (≤ bucket width / 2). Counts (total,
ok, good, missed) are exact integers throughout.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Literal

import numpy as np

from sloguard.model import ProbeResult
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
# How a failed request counts per metric (metrics not listed: "reached"):
# reached  - exact if the event came before the request ended, else censored at the elapsed time;
# end      - the event is the end of the stream: always censored, at max(elapsed, value seen);
# decoding - per-token metrics: censored (at the value seen so far, else 0) if the first token came,
#            undefined if the request never produced a token (it is judged on ttft/e2e and availability);
# record   - stages from the server's own record of the request: exact when recorded, else undefined.
Censoring = Literal["reached", "end", "decoding", "record"]
CENSORING: Mapping[str, Censoring] = {
    "e2e": "end", "tpot": "decoding", "itl": "decoding",
    "request_network": "record", "request_queue": "record", "request_prefill": "record", "request_decode": "record",
}
_COLUMN = {name: i for i, name in enumerate(METRICS)}
_STORED = tuple(attr for attr in METRICS.values() if attr)  # raw columns; decode is computed on read
_STORED_METRICS = tuple(name for name, attr in METRICS.items() if attr)
_READ = attrgetter(*_STORED)
_TTFT, _E2E, _DECODE = _COLUMN["ttft"], _COLUMN["e2e"], _COLUMN["decode"]
_N = len(METRICS)
OK, GOOD = 1, 2  # flag bits; bit MISS << i: the request missed the SLO's objective i
MISS = 4
MAX_OBJECTIVES = 14  # 16 flag bits
_NO_VALUES = np.zeros(0)
SENTINEL = 1e12  # above every real latency: where censored values go for the exactness check
MIN_BUCKET = 60.0
BUCKETS_PER_WINDOW = 1008  # 28d -> 40 min buckets
FLUSH_AT = 256  # buffered results stored at once (bounds the buffer to ~30 KiB)


def elapsed(result: ProbeResult) -> float:
    """Return how long the request ran: elapsed_s, or for rows stored before it existed the latest timing seen."""
    if result.elapsed_s is not None:
        return result.elapsed_s
    return max((v for v in (result.connect_s, result.ttft_s, result.ttfot_s, result.e2e_s) if v is not None),
               default=0.0)


def censored(bound: float) -> float:
    """Return the stored encoding of "more than `bound` seconds": −(1 + bound)."""
    return -1.0 - max(0.0, bound)


def _failed_value(metric: str, value: float | None, result: ProbeResult, ran: float) -> float | None:
    rule = CENSORING.get(metric, "reached")
    if rule == "reached":
        return value if value is not None else censored(ran)
    if rule == "end":
        return censored(max(ran, value or 0.0))
    if rule == "record":
        return value
    return None if result.ttft_s is None else censored(value or 0.0)


def censored_metrics(result: ProbeResult) -> dict[str, float]:
    """Return metric -> lower bound (seconds) for each metric a failed request is censored in (ok: none)."""
    if result.ok:
        return {}
    stored = dict(zip(_STORED_METRICS, encode(result), strict=True))
    return {m: -v - 1.0 for m, v in stored.items() if v is not None and v < 0}


def encode(result: ProbeResult) -> tuple[float | None, ...]:
    """Return the stored metric values of one request: exact, None (undefined) or censored (negative)."""
    values = _READ(result)
    if result.ok:
        return tuple(values)
    ran = elapsed(result)
    return tuple(_failed_value(m, v, result, ran) for m, v in zip(_STORED_METRICS, values, strict=True))


def _decode(e2e: float | None, ttft: float | None) -> float | None:
    """Return one request's decode as decode_column encodes it (None: undefined)."""
    if ttft is None or e2e is None or ttft < 0:
        return None
    return e2e - ttft if e2e >= 0 else censored(-e2e - 1.0 - ttft)


def judge(result: ProbeResult, objectives: Sequence[tuple[str, float]],
          encoded: tuple[float | None, ...] | None = None) -> tuple[int, int]:
    """Return (missed, judged) bit sets over (metric, threshold) objectives: judged = it has a value or a
    censoring for the metric; missed = censored, or above the threshold. `encoded`: encode(result), if known."""
    if not objectives:
        return 0, 0
    values: dict[str, float | None] = dict(zip(_STORED_METRICS, encoded or encode(result), strict=True))
    if any(metric == "decode" for metric, _ in objectives):
        values["decode"] = _decode(values.get("e2e"), values.get("ttft"))
    missed = judged = 0
    for i, (metric, threshold) in enumerate(objectives):
        v = values.get(metric)
        if v is None or math.isnan(v):
            continue
        judged |= 1 << i
        if v < 0 or v > threshold:
            missed |= 1 << i
    return missed, judged


def decode_column(e2e: np.ndarray, ttft: np.ndarray) -> np.ndarray:
    """Return decode = e2e − ttft, censored at e2e's bound − ttft where e2e is censored and ttft exact."""
    out: np.ndarray = e2e - ttft
    with np.errstate(invalid="ignore"):
        rows = np.flatnonzero(np.minimum(e2e, ttft) < 0)  # a censored side (NaN compares False): rare
    if rows.size:
        e, t = e2e[rows], ttft[rows]
        with np.errstate(invalid="ignore"):
            out[rows] = np.where((e < 0) & (t >= 0), -1.0 - np.maximum(0.0, -e - 1.0 - t), np.nan)
    return out


@dataclass(frozen=True, slots=True)
class Quantile:
    """A quantile over one window: its value (a lower bound when `censored`) and the censored count."""

    value: float
    censored: bool
    censored_count: int
    count: int


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

    def exact(self, q: float, low: float) -> bool:
        """Return whether the q-quantile is unchanged with every censored value at +∞ (SENTINEL)."""
        n, n_measured = self.low.n, self.low.n - self.n_censored
        pos = q * (n - 1)
        top = min(math.floor(pos) + (1 if pos > math.floor(pos) else 0), n - 1)
        if top >= n_measured and self.n_censored:
            return False
        if self._min_bound > self.low.at(top):  # every censored value already sits above the ranks used
            return True
        if self._measured is None:
            self._measured = ExactQuantiles(self._column[self._column >= 0])
        measured = self._measured
        high = lerp_percentiles(n, (q,), lambda r: measured.at(r) if r < n_measured else SENTINEL)[0]
        return high == low


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
        """Return each quantile with its censored flag: numpy-exact or ≤1% relative; None without a value."""
        key = f"{metric}@{','.join(map(repr, qs))}"
        if key not in self._cache:
            self._cache[key] = self._exact(metric, qs) if self._sketch is None else self._sketched(metric, qs)
        return self._cache[key]

    def _exact(self, metric: str, qs: Sequence[float]) -> tuple[Quantile, ...] | None:
        order = self._order(metric)
        low = order.low.quantiles(qs)
        if low is None:
            return None
        return tuple(Quantile(v, not order.exact(q, v), order.n_censored, order.low.n) for q, v in zip(qs, low,
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
            high = at_rank(exact, q * (n - 1))
            out.append(Quantile(low, cens.count > 0 and high != low, cens.count, n))
        return tuple(out)


class ProbeWindow:
    """The requests of one SLO (or one segment of it) over its longest window."""

    def __init__(self, longest: float, cap: int = RAW_CAP, chunk: int = EVICT_CHUNK, since: float = -math.inf) -> None:
        self.longest = longest
        self.since = since  # observed since: creation time or the oldest row added, whichever is earlier
        self.first_ts = math.inf  # the oldest row ever added: where the data (not the process) begins
        self._raw = RawRing(len(_STORED), cap, chunk)
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
