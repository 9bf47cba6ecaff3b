"""Rolling storage for per-request samples: an exact raw ring and a time-bucketed ring of sketches."""

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
    """Keep the newest rows exactly, in insertion order; hand the oldest back in chunks when full."""

    def __init__(self, n_metrics: int, cap: int = RAW_CAP, chunk: int = EVICT_CHUNK) -> None:
        self._cap, self._chunk, self._n = cap, chunk, n_metrics
        self._ts = np.zeros(0)
        self._flags = np.zeros(0, dtype=np.uint8)
        self._values = np.zeros((0, n_metrics))
        self._start = self._end = 0

    def __len__(self) -> int:
        return self._end - self._start

    def append(self, ts: float, flags: int, row: np.ndarray) -> Rows | None:
        """Add one row; return the rows evicted to make room, if any."""
        evicted = self._make_room() if self._end == self._ts.size else None
        self._ts[self._end], self._flags[self._end], self._values[self._end] = ts, flags, row
        self._end += 1
        return evicted

    def drop_before(self, cutoff: float) -> None:
        """Forget the leading rows older than cutoff (they have left every window)."""
        old = self._ts[self._start : self._end] <= cutoff
        self._start += int(old.size if old.all() else np.argmin(old))

    def rows(self) -> Rows:
        """Return views of the rows held, oldest first (valid until the next append)."""
        s, e = self._start, self._end
        return Rows(self._ts[s:e], self._flags[s:e], self._values[s:e])

    @property
    def nbytes(self) -> int:
        """Return the bytes allocated for rows."""
        return int(self._ts.nbytes + self._flags.nbytes + self._values.nbytes)

    def _make_room(self) -> Rows | None:
        evicted = None
        if len(self) >= self._cap + self._chunk:
            s = self._start
            e = s + len(self) - self._cap
            evicted = Rows(self._ts[s:e].copy(), self._flags[s:e].copy(), self._values[s:e].copy())
            self._start = e
        size = len(self)
        alloc = self._ts.size if self._start else min(max(2 * self._ts.size, 1024), self._cap + self._chunk)
        ts, flags, values = np.zeros(alloc), np.zeros(alloc, dtype=np.uint8), np.zeros((alloc, self._n))
        ts[:size] = self._ts[self._start : self._end]
        flags[:size] = self._flags[self._start : self._end]
        values[:size] = self._values[self._start : self._end]
        self._ts, self._flags, self._values = ts, flags, values
        self._start, self._end = 0, size
        return evicted


@dataclass(slots=True)
class Bucket:
    """Summary of the evicted rows of one time bucket: flag-bit counts and one sketch per metric."""

    total: int = 0
    flag_counts: dict[int, int] = field(default_factory=dict)
    sketches: list[Sketch] = field(default_factory=list)


class BucketRing:
    """Time buckets of `width` seconds holding evicted rows as counts and sketches."""

    def __init__(self, n_metrics: int, width: float) -> None:
        self.width, self._n = width, n_metrics
        self._buckets: dict[int, Bucket] = {}
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
            bucket.sketches = [merge([bucket.sketches[m], sketch_of(block[:, m])]) for m in range(self._n)]
        if rows.ts.size:
            self.newest_ts = max(self.newest_ts, float(rows.ts.max()))

    def drop_before(self, cutoff: float) -> None:
        """Forget buckets that end at or before cutoff."""
        for b in [b for b in self._buckets if (b + 1) * self.width <= cutoff]:
            del self._buckets[b]

    def select(self, start: float, end: float) -> list[Bucket]:
        """Return the buckets whose midpoint lies in (start, end]: edges snap by ≤ width/2."""
        return [bk for b, bk in self._buckets.items() if start < (b + 0.5) * self.width <= end]

    @property
    def nbytes(self) -> int:
        """Return the bytes held by bucket sketches (count arrays only)."""
        return sum(s.nbytes for bk in self._buckets.values() for s in bk.sketches)
