"""Seeded, stratified block bootstrap of quantiles, proportions and means (numpy, vectorised over replicates).

Requests close in time share the server's state (the batch they ran in, the background load of that
minute), so they are not independent: each stratum is resampled in circular blocks of consecutive
requests whose length is chosen from the data (Politis & White 2004, with Patton, Politis & White's 2009
correction, on the ranks so censored values count), 1 for independent requests.
Strata (prompt bucket × load stage) are resampled separately, each keeping its size, and both sides are
weighted with the baseline's stratum shares, so a candidate that happened to draw more long prompts is
not read as slower (post-stratification). A side of more than MAX_RESAMPLED values is bootstrapped from a
subsample of contiguous runs and its replicates' spread rescaled by √(m/n) (the m-out-of-n bootstrap, Bickel,
Götze & van Zwet 1997): a million requests cost what 20,000 do, intervals as wide as the full sample's.
Quantiles are type 1 (inverted CDF: the smallest value whose weighted share at or below it reaches q), so
+inf (a censored request) ranks above every measured value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

EPS = 1e-12
FLOOR = False
CHUNK = 4_000_000  # values per resampled block: memory stays ~100 MB whatever the sample size
MAX_RESAMPLED = 20_000  # values per side a bootstrap redraws; larger samples: m-out-of-n, rescaled
SEGMENTS = 64  # contiguous runs a subsample is made of


def block_length(x: np.ndarray, cap: int = 100, rank: bool = True) -> int:
    """Return the circular-block-bootstrap block length for a series in time order (1 = no dependence)."""
    n = len(x)
    if n < 20:
        return 1
    r = np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(np.float64) if rank else x.astype(np.float64)
    r = r - r.mean()
    var = float(r @ r) / n
    if var == 0:
        return 1
    lags = min(n // 4, 2 * cap)
    acf = np.array([float(r[: n - k] @ r[k:]) / n / var for k in range(1, lags + 1)])
    band = 2.0 * np.sqrt(np.log10(n) / n)
    run, m_hat = 0, lags
    for k, a in enumerate(acf, 1):  # the first lag after which K_N = 5 lags in a row are insignificant
        run = run + 1 if abs(a) < band else 0
        if run == 5:
            m_hat = k - 4
            break
    m = min(2 * m_hat, lags)
    ks = np.arange(1, m + 1)
    t = ks / m
    lam = np.where(t <= 0.5, 1.0, 2.0 * (1.0 - t))
    g = 2.0 * float((lam * ks * acf[:m]).sum())
    d = 4.0 / 3.0 * (1.0 + 2.0 * float((lam * acf[:m]).sum())) ** 2
    if d <= 0 or g == 0:
        return 1
    return int(min(cap, max(1, round((2.0 * g * g / d) ** (1 / 3) * n ** (1 / 3)), int(np.sqrt(n)) if FLOOR else 1)))


@dataclass(frozen=True)
class Stratified:
    """One side's values grouped by stratum (each in time order), the weight each stratum carries (sums to 1)."""

    groups: tuple[np.ndarray, ...]
    weights: tuple[float, ...]

    @property
    def n(self) -> int:
        """Return the number of values."""
        return sum(len(g) for g in self.groups)

    def flat(self) -> tuple[np.ndarray, np.ndarray]:
        """Return (values, per-value weights) in stratum order."""
        values = np.concatenate(self.groups) if self.groups else np.empty(0)
        per = [np.full(len(g), w / len(g)) for g, w in zip(self.groups, self.weights, strict=True)]
        return values, (np.concatenate(per) if per else np.empty(0))

    def uniform(self) -> bool:
        """Return True when every value weighs the same (the baseline itself, or one stratum)."""
        n = self.n
        return all(abs(w - len(g) / n) < 1e-9 for g, w in zip(self.groups, self.weights, strict=True))


def stratify(base: np.ndarray, base_keys: np.ndarray, cand: np.ndarray, cand_keys: np.ndarray
             ) -> tuple[Stratified, Stratified, list[object]]:
    """Group both sides by the strata they share; return them and the strata only one side has (dropped)."""
    kb, kc = set(base_keys.tolist()), set(cand_keys.tolist())
    common = sorted(kb & kc, key=str)
    dropped = sorted(kb ^ kc, key=str)
    gb = tuple(base[base_keys == k] for k in common)
    gc = tuple(cand[cand_keys == k] for k in common)
    total = sum(len(g) for g in gb)
    weights = tuple(len(g) / total for g in gb) if total else ()
    return Stratified(gb, weights), Stratified(gc, weights), dropped


def blocks(s: Stratified, qs: Sequence[float] = ()) -> tuple[int, ...]:
    """Return each stratum's block length: the longest of the ranks' and each quantile's exceedances'.

    Slow requests cluster (one heavy request slows every request beside it), so the tail indicators can
    depend over longer runs than the values as a whole.
    """
    out = []
    for g in s.groups:
        finite = g[np.isfinite(g)]
        cuts = [np.quantile(finite, q) for q in qs] if finite.size else []
        out.append(max([block_length(g), *(block_length((g > c).astype(np.float64), rank=False) for c in cuts)]))
    return tuple(out)


def resample(s: Stratified, reps: int, rng: np.random.Generator, lengths: tuple[int, ...] | None = None) -> np.ndarray:
    """Return a (reps, n) matrix: each row redraws every stratum from circular blocks of its own length."""
    cols = []
    for g, length in zip(s.groups, lengths or (1,) * len(s.groups), strict=True):
        n = len(g)
        if length <= 1:
            cols.append(g[rng.integers(0, n, size=(reps, n))])
            continue
        starts = rng.integers(0, n, size=(reps, -(-n // length)))
        idx = (starts[:, :, None] + np.arange(length)).reshape(reps, -1)[:, :n] % n
        cols.append(g[idx])
    return np.concatenate(cols, axis=1)


def quantiles(values: np.ndarray, weights: np.ndarray | None, qs: Sequence[float]) -> np.ndarray:
    """Return type-1 weighted quantiles along the last axis: shape values.shape[:-1] + (len(qs),).

    `weights` (one per column, summing to 1) None means equal weights.
    """
    n = values.shape[-1]
    if weights is None:
        ks = [min(n - 1, max(0, int(np.ceil(q * n - EPS)) - 1)) for q in qs]
        part = np.partition(values, sorted(set(ks)), axis=-1)
        return np.stack([part[..., k] for k in ks], axis=-1)
    order = np.argsort(values, axis=-1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=-1)
    cum = np.cumsum(weights[order], axis=-1)
    out = []
    for q in qs:
        k = np.minimum((cum < q * cum[..., -1:] - EPS).sum(axis=-1), n - 1)
        out.append(np.take_along_axis(ordered, k[..., None], axis=-1)[..., 0])
    return np.stack(out, axis=-1)


def subsample(s: Stratified, m: int | None = None) -> Stratified:
    """Return about `m` of the values (each stratum its share), as SEGMENTS contiguous runs spread over each
    stratum's time order: neighbours stay neighbours, so the block length and the dependence it measures hold."""
    n, m = s.n, MAX_RESAMPLED if m is None else m
    if n <= m:
        return s
    groups = []
    for g in s.groups:
        take = max(1, len(g) * m // n)
        k = min(SEGMENTS, take)
        edges = np.linspace(0, len(g), k + 1).astype(np.int64)
        runs = [take // k + (j < take % k) for j in range(k)]  # `take` values in all
        groups.append(np.concatenate([g[a : a + r] for (a, _), r in zip(pairwise(edges), runs, strict=True)]))
    return Stratified(tuple(groups), s.weights)


def _rescaled(point: Any, sub_point: Any, reps: np.ndarray, factor: float) -> np.ndarray:
    """Return replicates of a full sample from a subsample's: point + (rep − subsample point) × √(m/n)
    (m-out-of-n bootstrap, valid for quantiles); a censored (+inf) replicate or point stays as it is."""
    with np.errstate(invalid="ignore"):
        out = point + (reps - sub_point) * factor
    keep = ~np.isfinite(reps) | ~np.isfinite(np.broadcast_to(sub_point, reps.shape))
    return np.where(keep, reps, out)


def quantile_reps(s: Stratified, qs: Sequence[float], reps: int, rng: np.random.Generator
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Return (point estimates (len(qs),), bootstrap replicates (reps, len(qs))); beyond MAX_RESAMPLED values
    the replicates come from a subsample, rescaled (O(reps × MAX_RESAMPLED) whatever the sample size)."""
    values, weights = s.flat()
    w = None if s.uniform() else weights
    point = quantiles(values, w, qs)
    sub = subsample(s)
    if sub is not s:  # sub.n <= MAX_RESAMPLED: the call below bootstraps it directly
        sub_point, sub_reps = quantile_reps(sub, qs, reps, rng)
        return point, _rescaled(point, sub_point, sub_reps, float(np.sqrt(sub.n / s.n)))
    rows = max(1, CHUNK // max(1, values.size))
    lengths = blocks(s, qs)
    out = [quantiles(resample(s, min(rows, reps - i), rng, lengths), w, qs) for i in range(0, reps, rows)]
    return point, np.concatenate(out, axis=0)


def proportion_reps(s: Stratified, reps: int, rng: np.random.Generator) -> tuple[float, np.ndarray]:
    """Return the weighted share of true values and its replicates (block-resampled per stratum)."""
    values, weights = s.flat()
    point = float(weights @ values)
    sub = subsample(s)
    if sub is not s:
        sub_point, sub_reps = proportion_reps(sub, reps, rng)
        factor = float(np.sqrt(sub.n / s.n))
        return point, _rescaled(np.float64(point), np.float64(sub_point), sub_reps, factor)
    rows = max(1, CHUNK // max(1, values.size))
    lengths = blocks(s)
    out = [resample(s, min(rows, reps - i), rng, lengths) @ weights for i in range(0, reps, rows)]
    return point, np.concatenate(out)


def mean_reps(values: np.ndarray, reps: int, rng: np.random.Generator) -> tuple[float, np.ndarray]:
    """Return the mean and its block-bootstrap replicates (one stratum, in time order)."""
    s = Stratified((values,), (1.0,))
    sub = subsample(s)
    if sub is not s:
        sub_mean, sub_reps = mean_reps(sub.groups[0], reps, rng)
        factor = float(np.sqrt(sub.n / s.n))
        return float(values.mean()), _rescaled(np.float64(values.mean()), np.float64(sub_mean), sub_reps, factor)
    rows = max(1, CHUNK // max(1, values.size))
    lengths = blocks(s)
    out = [resample(s, min(rows, reps - i), rng, lengths).mean(axis=1) for i in range(0, reps, rows)]
    return float(values.mean()), np.concatenate(out)
