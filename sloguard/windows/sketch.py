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
from collections.abc import Iterable
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
    keys = np.concatenate([p.keys for p in parts])
    counts = np.concatenate([p.counts for p in parts])
    uniq, inverse = np.unique(keys, return_inverse=True)
    return Sketch(uniq, np.bincount(inverse, weights=counts).astype(np.int64))


def quantile(sketch: Sketch, q: float) -> float | None:
    """Return the value of rank q·(n−1) within 1% relative error; None for an empty sketch."""
    if sketch.keys.size == 0:
        return None
    cumulative = np.cumsum(sketch.counts)
    rank = q * (int(cumulative[-1]) - 1)
    idx = int(np.searchsorted(cumulative, rank, side="right"))
    return float(_MAPPING.value(int(sketch.keys[min(idx, sketch.keys.size - 1)])))
