"""A mergeable log-bucket quantile sketch: ddsketch's mapping, numpy sparse counts, ≤1% relative error.

Guarantee (DDSketch, Masson et al. 2019): a value v > 0 is counted in the bucket k with
gamma^(k-1) < v ≤ gamma^k, gamma = (1 + a) / (1 - a), and read back as 2·gamma^k / (1 + gamma), so every
value the sketch returns is within a = RELATIVE_ACCURACY = 1% (relative) of the order statistic of the
same rank. Counts are plain integers, so merging sketches is exact addition (order-independent).
Values below MIN_VALUE (1 ns) are counted as MIN_VALUE. The bucket keys and values come from
`ddsketch.mapping.LogarithmicMapping`; the counts live in numpy arrays so that a sketch costs
~16 bytes per occupied bucket and a merge or a whole-array insert is vectorised.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from ddsketch.mapping import LogarithmicMapping

RELATIVE_ACCURACY = 0.01
MIN_VALUE = 1e-9
_MAPPING = LogarithmicMapping(RELATIVE_ACCURACY)
_LN_GAMMA = math.log(_MAPPING.gamma)

_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Sketch:
    """Sparse bucket counts: sorted unique `keys` and their positive `counts`."""

    keys: np.ndarray
    counts: np.ndarray

    @property
    def count(self) -> int:
        """Return how many values the sketch holds."""
        return int(self.counts.sum())

    @property
    def nbytes(self) -> int:
        """Return the bytes held by the count arrays."""
        return int(self.keys.nbytes + self.counts.nbytes)


EMPTY_SKETCH = Sketch(_EMPTY, _EMPTY)


def bucket_keys(values: np.ndarray) -> np.ndarray:
    """Return the ddsketch logarithmic bucket key of each value (vectorised)."""
    clipped = np.maximum(np.asarray(values, dtype=np.float64), MIN_VALUE)
    return np.ceil(np.log(clipped) / _LN_GAMMA).astype(np.int64)


def sketch_of(values: np.ndarray) -> Sketch:
    """Return the sketch of the finite values of an array (NaN = undefined, skipped)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return EMPTY_SKETCH
    keys, counts = np.unique(bucket_keys(finite), return_counts=True)
    return Sketch(keys, counts.astype(np.int64))


def merge(sketches: Iterable[Sketch]) -> Sketch:
    """Return the sum of sketches: exact, associative and commutative."""
    parts = [s for s in sketches if s.keys.size]
    if not parts:
        return EMPTY_SKETCH
    if len(parts) == 1:
        return parts[0]
    keys = np.concatenate([p.keys for p in parts]).astype(np.int64)
    low = int(keys.min())
    dense = np.bincount(keys - low, weights=np.concatenate([p.counts for p in parts])).astype(np.int64)
    occupied = np.flatnonzero(dense)
    return Sketch(occupied + low, dense[occupied])


def lerp_percentiles(n: int, qs: Sequence[float], at: Callable[[int], float]) -> tuple[float, ...]:
    """Return numpy.percentile's `linear` values (bit-identical) of n sorted values read by `at(rank)`."""
    virtual = (n - 1) * (np.array([100.0 * q for q in qs]) / 100)
    prev = np.floor(virtual)
    gamma = virtual - prev
    lower = np.array([at(min(int(p), n - 1)) for p in prev])
    upper = np.array([at(min(int(p) + 1, n - 1)) for p in prev])
    diff = upper - lower
    out = lower + diff * gamma
    np.subtract(upper, diff * (1 - gamma), out=out, where=gamma >= 0.5)
    return tuple(float(v) for v in out)


class ExactQuantiles:
    """Exact order statistics of an array's finite values; quantiles equal numpy.percentile (linear) bit for bit.

    Above SMALL values each value is binned by the top 19 bits of its order-preserving integer image
    (sign, exponent, 7 mantissa bits: ≤0.8% wide bins, exactly monotone), one bincount locates the bin of
    each rank, and only that bin is sorted: O(n) per array instead of a partition per quantile.
    """

    SMALL = 2048

    def __init__(self, values: np.ndarray) -> None:
        self._finite = values[np.isfinite(values)]
        self.n = int(self._finite.size)
        self._runs: dict[int, np.ndarray] = {}
        if self.n <= self.SMALL:
            self._runs[0] = np.sort(self._finite)
            self._cum = np.array([self.n])
            return
        bits = self._finite.view(np.int64)
        low = int(bits.min())
        if low < 0:  # negative floats: flip the magnitude bits so integer order = float order
            bits = np.where(bits < 0, bits ^ np.int64(0x7FFF_FFFF_FFFF_FFFF), bits)
            low = int(bits.min())
        self._keys = np.right_shift(bits, 45)
        self._keys -= low >> 45
        self._cum = np.cumsum(np.bincount(self._keys))

    def quantiles(self, qs: Sequence[float]) -> tuple[float, ...] | None:
        """Return the quantiles (q in 0..1) of the finite values; None when there are none."""
        return lerp_percentiles(self.n, qs, self.at) if self.n else None

    def at(self, rank: int) -> float:
        """Return the order statistic of a rank (0 = smallest finite value)."""
        j = int(np.searchsorted(self._cum, rank, side="right"))
        run = self._runs.get(j)
        if run is None:
            run = self._runs[j] = np.sort(self._finite[self._keys == j])
        return float(run[rank - (int(self._cum[j - 1]) if j else 0)])


def quantile(sketch: Sketch, q: float) -> float | None:
    """Return the value of rank q·(n−1) within 1% relative error; None for an empty sketch."""
    return None if sketch.keys.size == 0 else at_rank(sketch, q * (sketch.count - 1))


def at_rank(sketch: Sketch, rank: float) -> float | None:
    """Return the value of a rank (0 = smallest) within 1% relative error; None beyond the sketch's count."""
    if sketch.keys.size == 0 or rank > sketch.count - 1:
        return None
    idx = int(np.searchsorted(np.cumsum(sketch.counts), rank, side="right"))
    return float(_MAPPING.value(int(sketch.keys[min(idx, sketch.keys.size - 1)])))
