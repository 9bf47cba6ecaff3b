"""Baseline vs candidate from per-request data: every compared number as a Cell, judged as one family.

Scopes: `overall` (strata = load stage × prompt bucket), `bucket:<name>` (strata = load stage) and
`load:<label>` (strata = prompt bucket), the latter two only where there is more than one. Every scope
and metric draws from its own generator seeded by (seed, scope, metric), so a report is reproducible
and a cell does not change when another is added.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from sloguard.reports.bootstrap import mean_reps, proportion_reps, quantile_reps, stratify
from sloguard.reports.cells import Cell, judge, with_change
from sloguard.reports.data import LATENCY, STAGES, Requests, Side
from sloguard.reports.stats import change, log_ratio

QUANTILES = (50, 95, 99)
DEFAULT_THRESHOLDS: Mapping[str, float] = {
    **{m: 0.05 for m in LATENCY}, "goodput": 0.05, "throughput": 0.05, "error_rate": 0.01, "stage": 0.05,
}


@dataclass(frozen=True)
class Settings:
    """How a report compares: replicates, seed, family-wise α, thresholds, and the sample-size floor."""

    reps: int = 1000
    seed: int = 0
    alpha: float = 0.05
    thresholds: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    min_tail: int = 5  # values beyond a quantile (each side) before it is judged
    quantiles: tuple[int, ...] = QUANTILES

    def threshold(self, metric: str) -> float:
        """Return the practical threshold of a metric (goodput:<slo> uses goodput's, stage:* stage's)."""
        head = metric.split(":", 1)[0]
        return self.thresholds.get(metric, self.thresholds.get(head, DEFAULT_THRESHOLDS.get(head, 0.05)))

    def min_requests(self, q: int) -> int:
        """Return how many values a side needs before quantile q is judged."""
        return math.ceil(self.min_tail / min(q / 100.0, 1.0 - q / 100.0))


@dataclass(frozen=True)
class Scope:
    """A subset of both sides and the stratum key of each of its requests."""

    name: str
    base: np.ndarray  # bool masks
    cand: np.ndarray
    base_keys: np.ndarray
    cand_keys: np.ndarray


def _loads(side: Side) -> np.ndarray:
    req = side.requests
    assert req is not None
    labels = {s.index: s.label for s in side.stages}
    return np.array([labels.get(int(i), "-") for i in req.stage], dtype=object)


def scopes(base: Side, cand: Side) -> Iterator[Scope]:
    """Yield overall, then per prompt bucket and per load level where there is more than one."""
    rb, rc = base.requests, cand.requests
    assert rb is not None and rc is not None
    lb, lc = _loads(base), _loads(cand)
    yield Scope("overall", np.ones(rb.n, bool), np.ones(rc.n, bool), lb + "|" + rb.bucket, lc + "|" + rc.bucket)
    buckets = sorted(set(rb.bucket.tolist()) | set(rc.bucket.tolist()))
    if len(buckets) > 1:
        for b in buckets:
            yield Scope(f"bucket:{b}", rb.bucket == b, rc.bucket == b, lb, lc)
    loads = sorted(set(lb.tolist()) | set(lc.tolist()), key=_load_order)
    if len(loads) > 1:
        for ld in loads:
            yield Scope(f"load:{ld}", lb == ld, lc == ld, rb.bucket, rc.bucket)


def _load_order(label: str) -> tuple[str, float]:
    kind, _, level = label.partition(" ")
    try:
        return kind, float(level.rstrip("/s"))
    except ValueError:
        return kind, math.inf


def _rng(settings: Settings, *key: str) -> np.random.Generator:
    return np.random.default_rng([settings.seed, zlib.crc32("/".join(key).encode())])


def latency_cells(metric: str, sc: Scope, rb: Requests, rc: Requests, st: Settings, kind: str = "latency"
                  ) -> list[Cell]:
    """Return one cell per quantile of a latency (or stage) column in a scope."""
    cols = (rb.latency, rc.latency) if kind == "latency" else (rb.stages, rc.stages)
    vb, vc = cols[0][metric][sc.base], cols[1][metric][sc.cand]
    kb, kc = sc.base_keys[sc.base], sc.cand_keys[sc.cand]
    keep_b, keep_c = ~np.isnan(vb), ~np.isnan(vc)
    sb, sc_, _ = stratify(vb[keep_b], kb[keep_b], vc[keep_c], kc[keep_c])
    name = metric if kind == "latency" else f"stage:{metric}"
    qs = st.quantiles if kind == "latency" else (50, 95)
    scale = "relative" if kind == "latency" else "absolute"
    base_cell = Cell(name, "", sc.name, kind, None, None, sb.n, sc_.n, scale=scale,  # type: ignore[arg-type]
                     threshold=st.threshold(name), family=kind == "latency")
    if min(sb.n, sc_.n) == 0:
        return [replace(base_cell, stat=f"p{q}", reason="no values on one side") for q in qs]
    rng = _rng(st, sc.name, name)
    pb, rep_b = quantile_reps(sb, [q / 100 for q in qs], st.reps, rng)
    pc, rep_c = quantile_reps(sc_, [q / 100 for q in qs], st.reps, rng)
    out = []
    bound_b, bound_c = _bound(vb, rb.elapsed[sc.base]), _bound(vc, rc.elapsed[sc.cand])
    for j, q in enumerate(qs):
        cell = replace(base_cell, stat=f"p{q}", base=float(pb[j]), cand=float(pc[j]), base_bound=bound_b,
                       cand_bound=bound_c)
        need = st.min_requests(q)
        if kind == "latency" and min(sb.n, sc_.n) < need:
            out.append(replace(cell, reason=f"p{q} needs ≥ {need} values per side (baseline {sb.n}, candidate "
                                            f"{sc_.n})"))
            continue
        if scale == "relative":
            ch = change(float(log_ratio(pc[j], pb[j])), log_ratio(rep_c[:, j], rep_b[:, j]))
        else:
            ch = change(float(pc[j] - pb[j]), rep_c[:, j] - rep_b[:, j])
        out.append(with_change(cell, ch))
    return out


def _bound(values: np.ndarray, elapsed: np.ndarray) -> float | None:
    """Return the longest time a censored request ran (what "> X" shows); None without censored values."""
    censored = np.isinf(values)
    if not censored.any():
        return None
    known = elapsed[censored & ~np.isnan(elapsed)]
    return float(known.max()) if known.size else math.nan


def share_cell(metric: str, hits_b: np.ndarray, hits_c: np.ndarray, sc: Scope, st: Settings) -> Cell:
    """Return a goodput (relative, lower is worse) or error-rate (difference, higher is worse) cell."""
    goodput = metric.startswith("goodput")
    sb, sc_, _ = stratify(hits_b[sc.base].astype(float), sc.base_keys[sc.base], hits_c[sc.cand].astype(float),
                          sc.cand_keys[sc.cand])
    cell = Cell(metric, "ratio" if goodput else "share", sc.name, "goodput" if goodput else "error_rate", None, None,
                sb.n, sc_.n, scale="relative" if goodput else "absolute", worse="down" if goodput else "up",
                threshold=st.threshold(metric))
    if min(sb.n, sc_.n) < st.min_requests(50):
        return replace(cell, reason=f"needs ≥ {st.min_requests(50)} requests per side")
    rng = _rng(st, sc.name, metric)
    pb, rep_b = proportion_reps(sb, st.reps, rng)
    pc, rep_c = proportion_reps(sc_, st.reps, rng)
    cell = replace(cell, base=pb, cand=pc)
    if goodput:
        return with_change(cell, change(float(log_ratio(pc, pb)), log_ratio(rep_c, rep_b)))
    return with_change(cell, change(pc - pb, rep_c - rep_b))


def throughput_cell(label: str, cb: np.ndarray, cc: np.ndarray, concurrency: float, st: Settings) -> Cell:
    """Return a closed-loop stage's throughput (Little's law: concurrency / mean cycle) change."""
    cb, cc = cb[~np.isnan(cb)], cc[~np.isnan(cc)]
    cell = Cell("throughput", "rps", f"load:{label}", "throughput", None, None, len(cb), len(cc), worse="down",
                threshold=st.threshold("throughput"))
    if min(len(cb), len(cc)) < st.min_requests(50):
        return replace(cell, reason=f"needs ≥ {st.min_requests(50)} requests per side")
    rng = _rng(st, label, "throughput")
    mb, rep_b = mean_reps(cb, st.reps, rng)
    mc, rep_c = mean_reps(cc, st.reps, rng)
    cell = replace(cell, base=concurrency / mb, cand=concurrency / mc)
    return with_change(cell, change(float(log_ratio(mb, mc)), log_ratio(rep_b, rep_c)))


def good_flags(req: Requests, slo: Mapping[str, object]) -> np.ndarray | None:
    """Return per request: succeeded and met every goodput threshold (TPOT/ITL skipped where undefined)."""
    gp = slo.get("goodput")
    if not isinstance(gp, Mapping):
        return None
    good = req.ok.copy()
    for metric, threshold in gp.items():
        if metric == "target" or metric not in req.latency or not isinstance(threshold, int | float):
            continue
        col = req.latency[metric]
        undefined_ok = metric in ("tpot", "itl")
        good &= (col <= threshold) | (np.isnan(col) & undefined_ok)
    return good


def compare(base: Side, cand: Side, st: Settings) -> list[Cell]:
    """Return every cell (latency, goodput, error rate, throughput, stage components), judged."""
    rb, rc = base.requests, cand.requests
    assert rb is not None and rc is not None
    cells: list[Cell] = []
    for sc in scopes(base, cand):
        for metric in LATENCY:
            cells += latency_cells(metric, sc, rb, rc, st)
        for slo in base.slos:
            gb, gc = good_flags(rb, slo), good_flags(rc, slo)
            if gb is not None and gc is not None:
                cells.append(share_cell(f"goodput:{slo.get('name')}", gb, gc, sc, st))
        cells.append(share_cell("error_rate", ~rb.ok, ~rc.ok, sc, st))
        if sc.name == "overall":
            for stage in STAGES:
                if not (np.isnan(rb.stages[stage]).all() or np.isnan(rc.stages[stage]).all()):
                    cells += latency_cells(stage, sc, rb, rc, st, kind="stage")
    cells += _throughput(base, cand, st)
    return judge(cells, st.alpha)


def _throughput(base: Side, cand: Side, st: Settings) -> list[Cell]:
    rb, rc = base.requests, cand.requests
    assert rb is not None and rc is not None
    lb, lc = _loads(base), _loads(cand)
    out = []
    for s in base.stages:
        if s.kind == "concurrency" and s.label in set(lc.tolist()):
            out.append(throughput_cell(s.label, rb.cycle[lb == s.label], rc.cycle[lc == s.label], s.level, st))
    return out
