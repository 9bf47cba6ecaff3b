"""Rolling storage for per-request samples: an exact, time-sorted raw ring and a time-bucketed ring of sketches."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sloguard.windows.sketch import Sketch, merge, sketch_of

RAW_CAP = 100_000  # the ring always holds at least the newest RAW_CAP rows once it has seen them
EVICT_CHUNK = 4096  # rows moved to the bucket ring at once (vectorised), so the ring peaks at cap + chunk


@dataclass(frozen=True, slots=True)
class Rows:
    """A block of rows: timestamps, flag bits and one column per metric (NaN = undefined)."""

    ts: np.ndarray
    flags: np.ndarray
    values: np.ndarray  # shape (rows, metrics)


class RawRing:
    """Keep the newest ≥ cap rows exactly, sorted by timestamp (ties in arrival order); evict the oldest in chunks.

    Each metric column is allocated on its first finite value (None = all NaN), 8 bytes per row after that;
    a row costs 10 bytes (timestamp, 16 flag bits) plus its columns. `version` changes whenever held rows
    move or leave (anything but an append at the end), so callers can cache per-position results.
    """

    def __init__(self, n_metrics: int, cap: int = RAW_CAP, chunk: int = EVICT_CHUNK) -> None:
        self._cap, self._chunk = cap, chunk
        self._ts = np.zeros(0)
        self._flags = np.zeros(0, dtype=np.uint16)
        self._cols: list[np.ndarray | None] = [None] * n_metrics
        self._start = self._end = 0
        self.version = 0

    def __len__(self) -> int:
        return self._end - self._start

    def append(self, ts: float, flags: int, row: np.ndarray) -> Rows | None:
        """Add one row; return the rows evicted to make room, if any."""
        return self.extend(Rows(np.array([ts]), np.array([flags], dtype=np.uint16), row.reshape(1, -1)))

    def extend(self, block: Rows) -> Rows | None:
        """Add rows in any order (a stable sort places them); return the oldest rows evicted, if any."""
        evicted: list[Rows] = []
        for i in range(0, block.ts.size, self._chunk):
            part = slice(i, i + self._chunk)
            self._insert(Rows(block.ts[part], block.flags[part], block.values[part]))
            if len(self) >= self._cap + self._chunk:
                evicted.append(self._take(self._start, self._end - self._cap))
                self._start, self.version = self._end - self._cap, self.version + 1
        if not evicted:
            return None
        return Rows(*(np.concatenate([getattr(r, f) for r in evicted]) for f in ("ts", "flags", "values")))

    def drop_before(self, cutoff: float) -> None:
        """Forget the rows with ts ≤ cutoff (they have left every window)."""
        n = int(np.searchsorted(self.ts, cutoff, side="right"))
        if n:
            self._start, self.version = self._start + n, self.version + 1

    def index(self, t: float) -> int:
        """Return how many held rows have ts ≤ t."""
        return int(np.searchsorted(self.ts, t, side="right"))

    @property
    def ts(self) -> np.ndarray:
        """Return a view of the timestamps held, ascending (valid until the next change)."""
        return self._ts[self._start : self._end]

    @property
    def flags(self) -> np.ndarray:
        """Return a view of the flag bits held, in timestamp order."""
        return self._flags[self._start : self._end]

    def allocated(self, m: int) -> bool:
        """Return whether metric m has held a finite value (else every row is NaN)."""
        return self._cols[m] is not None

    def column(self, m: int, lo: int, hi: int) -> np.ndarray:
        """Return metric m of held rows lo..hi (positions as counted by index); NaN where undefined."""
        col = self._cols[m]
        return np.full(hi - lo, np.nan) if col is None else col[self._start + lo : self._start + hi]

    def rows(self) -> Rows:
        """Return a copy of the rows held, oldest first."""
        return self._take(self._start, self._end)

    @property
    def nbytes(self) -> int:
        """Return the bytes allocated for rows."""
        return int(self._ts.nbytes + self._flags.nbytes + sum(c.nbytes for c in self._cols if c is not None))

    def _take(self, s: int, e: int) -> Rows:
        values = np.column_stack([np.full(e - s, np.nan) if c is None else c[s:e] for c in self._cols])
        return Rows(self._ts[s:e].copy(), self._flags[s:e].copy(), values.reshape(e - s, len(self._cols)))

    def _insert(self, block: Rows) -> None:
        order = np.argsort(block.ts, kind="stable")
        ts, flags, values = block.ts[order], block.flags[order], block.values[order]
        self._reserve(ts.size)
        pos = self._end if not len(self) or ts[0] >= self._ts[self._end - 1] else self._start + self.index(ts[0])
        moved = self._end - pos
        if moved:  # late rows: re-sort the tail they fall into
            self.version += 1
            order = np.argsort(np.concatenate([self._ts[pos : self._end], ts]), kind="stable")
        new_end = self._end + ts.size
        self._ts[pos:new_end] = self._merge(self._ts[pos : self._end], ts, order if moved else None)
        self._flags[pos:new_end] = self._merge(self._flags[pos : self._end], flags, order if moved else None)
        for m in range(len(self._cols)):
            col = self._cols[m]
            if col is None and bool(np.isfinite(values[:, m]).any()):
                col = self._cols[m] = np.full(self._ts.size, np.nan)
            if col is not None:
                col[pos:new_end] = self._merge(col[pos : self._end], values[:, m], order if moved else None)
        self._end = new_end

    @staticmethod
    def _merge(old: np.ndarray, new: np.ndarray, order: np.ndarray | None) -> np.ndarray:
        return new if order is None else np.concatenate([old, new])[order]

    def _reserve(self, k: int) -> None:
        size = len(self)
        if self._end + k <= self._ts.size:
            return
        alloc = max(size + k, min(max(2 * self._ts.size, 1024), self._cap + self._chunk))
        if alloc <= self._ts.size:  # enough room once the live rows move to the front
            alloc = self._ts.size
        s, e = self._start, self._end
        self._ts = _moved(self._ts, s, e, alloc, 0.0)
        self._flags = _moved(self._flags, s, e, alloc, 0)
        self._cols = [None if c is None else _moved(c, s, e, alloc, np.nan) for c in self._cols]
        self._start, self._end, self.version = 0, size, self.version + 1


def _compact(sketch: Sketch) -> Sketch:
    """Return the sketch stored in 8 bytes per occupied key (int32 keys and counts; a bucket holds < 2^31 rows)."""
    return Sketch(sketch.keys.astype(np.int32), sketch.counts.astype(np.int32)) if sketch.keys.size else sketch


def _moved(a: np.ndarray, s: int, e: int, alloc: int, fill: float) -> np.ndarray:
    out = np.full(alloc, fill, dtype=a.dtype)
    out[: e - s] = a[s:e]
    return out


@dataclass(slots=True)
class Bucket:
    """Summary of the evicted rows of one time bucket: flag-bit counts and one sketch per metric."""

    total: int = 0
    flag_counts: dict[int, int] = field(default_factory=dict)
    sketches: list[Sketch] = field(default_factory=list)

    def count(self, bit: int) -> int:
        """Return how many rows have the flag bit set."""
        return sum(c for bits, c in self.flag_counts.items() if bits & bit)


class Summary:
    """Counts and per-metric sketches of a set of buckets, each merged once on first read."""

    def __init__(self, buckets: list[Bucket]) -> None:
        self._buckets = buckets
        self.total = sum(b.total for b in buckets)
        self._counts: dict[int, int] = {}
        self._sketches: dict[int, Sketch] = {}

    def count(self, bit: int) -> int:
        """Return how many rows have the flag bit set."""
        if bit not in self._counts:
            self._counts[bit] = sum(b.count(bit) for b in self._buckets)
        return self._counts[bit]

    def sketch(self, m: int) -> Sketch:
        """Return the merged sketch of metric m (exact sum of the bucket sketches)."""
        if m not in self._sketches:
            self._sketches[m] = merge(b.sketches[m] for b in self._buckets)
        return self._sketches[m]


class BucketRing:
    """Time buckets of `width` seconds holding evicted rows as counts and sketches; summaries cached until a change."""

    CACHE = 32  # summaries kept (a few per window length; cleared whenever buckets change)

    def __init__(self, n_metrics: int, width: float) -> None:
        self.width, self._n = width, n_metrics
        self._buckets: dict[int, Bucket] = {}
        self._ids = np.zeros(0, dtype=np.int64)
        self._cache: dict[tuple[int, int, int], Summary] = {}
        self.newest_ts = float("-inf")

    def add(self, rows: Rows) -> None:
        """Fold evicted rows into their buckets."""
        index = np.floor(rows.ts / self.width).astype(np.int64)
        for b in np.unique(index):
            sel = index == b
            bucket = self._buckets.setdefault(int(b), Bucket(sketches=[merge([])] * self._n))
            bucket.total += int(sel.sum())
            bits, counts = np.unique(rows.flags[sel], return_counts=True)
            for bit, count in zip(bits.tolist(), counts.tolist(), strict=True):
                bucket.flag_counts[bit] = bucket.flag_counts.get(bit, 0) + count
            block = rows.values[sel]
            bucket.sketches = [_compact(merge([bucket.sketches[m], sketch_of(block[:, m])])) for m in range(self._n)]
        if rows.ts.size:
            self.newest_ts = max(self.newest_ts, float(rows.ts.max()))
        self._changed()

    def drop_before(self, cutoff: float) -> None:
        """Forget buckets that end at or before cutoff."""
        old = [b for b in self._ids.tolist() if (b + 1) * self.width <= cutoff]
        for b in old:
            del self._buckets[b]
        if old:
            self._changed()

    def select(self, start: float, end: float) -> list[Bucket]:
        """Return the buckets whose midpoint lies in (start, end]: edges snap by ≤ width/2."""
        mids = (self._ids + 0.5) * self.width
        return [self._buckets[b] for b in self._ids[(mids > start) & (mids <= end)].tolist()]

    def summary(self, start: float, end: float) -> Summary:
        """Return the summary of select(start, end), cached until the buckets change."""
        mids = (self._ids + 0.5) * self.width
        ids = self._ids[(mids > start) & (mids <= end)]
        key = (int(ids[0]), int(ids[-1]), ids.size) if ids.size else (0, 0, 0)
        if key not in self._cache:
            if len(self._cache) >= self.CACHE:
                self._cache.clear()
            self._cache[key] = Summary([self._buckets[b] for b in ids.tolist()])
        return self._cache[key]

    @property
    def nbytes(self) -> int:
        """Return the bytes held by bucket sketches (count arrays only)."""
        return sum(s.nbytes for bk in self._buckets.values() for s in bk.sketches)

    def _changed(self) -> None:
        self._ids = np.array(sorted(self._buckets), dtype=np.int64)
        self._cache.clear()
