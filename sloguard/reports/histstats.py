"""Baseline vs candidate from Prometheus bucket counts (`prom:` inputs): the same cells at bucket resolution.

Quantiles interpolate linearly inside the bucket that holds them (Prometheus's `histogram_quantile`);
a quantile in the +Inf bucket is censored ("> the largest finite bound"). The bootstrap redraws each
prompt bucket's counts from a multinomial with its observed shares (resampling requests at bucket
resolution) and mixes the strata with the baseline's weights. Each cell also carries the resolution
bound: the true sample quantiles lie somewhere in their buckets, so the true change lies in
[lower(candidate) / upper(baseline) − 1, upper(candidate) / lower(baseline) − 1].
"""

from __future__ import annotations

import math
import zlib
from dataclasses import replace

import numpy as np

from sloguard.reports.cells import Cell, judge, with_change
from sloguard.reports.data import DataError, Histograms, Side
from sloguard.reports.regression import Settings
from sloguard.reports.stats import change, log_ratio

RESOLUTION = ("Prometheus input: quantiles come from the exported probe histograms at bucket resolution "
              "(linear interpolation inside a bucket, as histogram_quantile does); each change also shows the "
              "range the true change lies in given where the quantiles fall among the buckets. ITL pools every "
              "token gap here (per-request medians elsewhere). Counts are Prometheus increase() over the range, "
              "extrapolated to its edges and rounded to whole requests.")
METRICS = ("ttft", "ttfot", "tpot", "itl", "e2e")


def interpolate(bounds: np.ndarray, cum: np.ndarray, q: float) -> np.ndarray:
    """Return the q-quantile of cumulative shares `cum` (…, k) over upper `bounds` (k,), +inf in the last bucket."""
    lower = np.concatenate([[0.0], bounds[:-1]])
    idx = np.minimum((cum < q - 1e-12).sum(axis=-1), len(bounds) - 1)
    below = np.where(idx > 0, np.take_along_axis(cum, np.maximum(idx - 1, 0)[..., None], -1)[..., 0], 0.0)
    at = np.take_along_axis(cum, idx[..., None], -1)[..., 0]
    lo, hi = lower[idx], bounds[idx]
    frac = np.where(at > below, (q - below) / np.where(at > below, at - below, 1.0), 0.0)
    return np.where(np.isinf(hi), np.inf, lo + (hi - lo) * frac)


def _bucket_of(bounds: np.ndarray, value: float) -> tuple[float, float]:
    if math.isinf(value):
        return float(bounds[-2]) if len(bounds) > 1 else 0.0, math.inf
    i = int(np.searchsorted(bounds, value, side="left"))
    return (0.0 if i == 0 else float(bounds[i - 1])), float(bounds[i])


def _strata(h: Histograms, metric: str) -> dict[str, np.ndarray]:
    return {k: v for k, v in h.counts.get(metric, {}).items() if v.sum() > 0}


def _mixture(counts: list[np.ndarray], weights: list[float], reps: int, rng: np.random.Generator | None) -> np.ndarray:
    """Return cumulative shares of the weighted mixture: (k,) from the counts, or (reps, k) redrawn."""
    out: np.ndarray | float = 0.0
    for c, w in zip(counts, weights, strict=True):
        n = int(c.sum())
        if rng is None:
            out = out + w * np.cumsum(c) / n
        else:
            out = out + w * np.cumsum(rng.multinomial(n, c / n, size=reps), axis=-1) / n
    return np.asarray(out)


def quantile_cells(metric: str, base: Histograms, cand: Histograms, scope: str, keys: list[str] | None,
                   st: Settings) -> list[Cell]:
    """Return p50/p95/p99 cells of one metric over the strata `keys` (None: every shared prompt bucket)."""
    sb, sc = _strata(base, metric), _strata(cand, metric)
    shared = sorted(set(sb) & set(sc)) if keys is None else [k for k in keys if k in sb and k in sc]
    nb, nc = (int(sum(s[k].sum() for k in shared)) for s in (sb, sc))
    cells = [Cell(metric, f"p{q}", scope, "latency", None, None, nb, nc, threshold=st.threshold(metric))
             for q in st.quantiles]
    if not shared:
        return [replace(c, reason="no histogram data on one side") for c in cells]
    bounds = base.bounds[metric]
    weights = [float(sb[k].sum()) / nb for k in shared]
    rng = np.random.default_rng([st.seed, zlib.crc32(f"{scope}/{metric}".encode())])
    cum_b, cum_c = _mixture([sb[k] for k in shared], weights, 0, None), _mixture([sc[k] for k in shared], weights,
                                                                                   0, None)
    rep_b = _mixture([sb[k] for k in shared], weights, st.reps, rng)
    rep_c = _mixture([sc[k] for k in shared], weights, st.reps, rng)
    out = []
    for cell, q in zip(cells, st.quantiles, strict=True):
        qb, qc = float(interpolate(bounds, cum_b, q / 100)), float(interpolate(bounds, cum_c, q / 100))
        cell = replace(cell, base=qb, cand=qc, base_bound=float(bounds[-2]) if math.isinf(qb) else None,
                       cand_bound=float(bounds[-2]) if math.isinf(qc) else None)
        need = st.min_requests(q)
        if min(nb, nc) < need:
            out.append(replace(cell, reason=f"p{q} needs ≥ {need} requests per side (baseline {nb}, candidate {nc})"))
            continue
        (lb, hb), (lc, hc) = _bucket_of(bounds, qb), _bucket_of(bounds, qc)
        with np.errstate(divide="ignore"):
            res = (lc / hb - 1.0 if hb > 0 else -1.0, hc / lb - 1.0 if lb > 0 else math.inf)
        ch = change(float(log_ratio(qc, qb)), log_ratio(interpolate(bounds, rep_c, q / 100),
                                                        interpolate(bounds, rep_b, q / 100)))
        out.append(replace(with_change(cell, ch), resolution=res))
    return out


def proportion_cell(metric: str, base: tuple[float, float], cand: tuple[float, float], st: Settings) -> Cell:
    """Return a goodput (good, all) or error-rate (failed, all) cell from counter increases."""
    goodput = metric.startswith("goodput")
    (kb, nb), (kc, nc) = (tuple(round(x) for x in p) for p in (base, cand))
    cell = Cell(metric, "ratio" if goodput else "share", "overall", "goodput" if goodput else "error_rate",
                None, None, nb, nc, scale="relative" if goodput else "absolute", worse="down" if goodput else "up",
                threshold=st.threshold(metric))
    if min(nb, nc) < st.min_requests(50):
        return replace(cell, reason=f"needs ≥ {st.min_requests(50)} requests per side")
    rng = np.random.default_rng([st.seed, zlib.crc32(metric.encode())])
    pb, pc = kb / nb, kc / nc
    rb, rc = rng.binomial(nb, pb, st.reps) / nb, rng.binomial(nc, pc, st.reps) / nc
    cell = replace(cell, base=pb, cand=pc)
    if goodput:
        return with_change(cell, change(float(log_ratio(pc, pb)), log_ratio(rc, rb)))
    return with_change(cell, change(pc - pb, rc - rb))


def compare_histograms(base: Side, cand: Side, st: Settings) -> list[Cell]:
    """Return every cell two Prometheus sides support, judged as one family."""
    hb, hc = base.histograms, cand.histograms
    assert hb is not None and hc is not None
    for metric in set(hb.bounds) & set(hc.bounds):
        if not np.array_equal(hb.bounds[metric], hc.bounds[metric]):
            raise DataError(f"sloguard_probe_{metric}_seconds has different buckets in the baseline "
                            f"({hb.bounds[metric].tolist()}) and the candidate ({hc.bounds[metric].tolist()}): "
                            "quantiles at different resolutions are not compared")
    cells: list[Cell] = []
    buckets = sorted(set().union(*(hb.counts.get(m, {}).keys() for m in METRICS)))
    for metric in METRICS:
        if metric in hb.bounds and metric in hc.bounds:
            cells += quantile_cells(metric, hb, hc, "overall", None, st)
            if len(buckets) > 1:
                for b in buckets:
                    cells += quantile_cells(metric, hb, hc, f"bucket:{b}", [b], st)
    for slo in sorted(set(hb.good) & set(hc.good)):
        cells.append(proportion_cell(f"goodput:{slo}", hb.good[slo], hc.good[slo], st))

    def failed(h: Histograms) -> tuple[float, float]:
        total = sum(h.outcomes.values())
        return total - h.outcomes.get("success", 0.0), total

    cells.append(proportion_cell("error_rate", failed(hb), failed(hc), st))
    return judge(cells, st.alpha)
