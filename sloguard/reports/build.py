"""Assemble the report document (schema `sloguard-report/1`): every number the renderers show.

The Markdown and HTML renderers read only this document, so the JSON a CI system gets holds everything
a person sees. Field by field: docs/report-schema.md.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np

from sloguard import __version__
from sloguard.reports.cells import ORDER, Cell, overall
from sloguard.reports.data import LATENCY, STAGES, Side
from sloguard.reports.regression import Settings

SCHEMA = "sloguard-report/1"
CDF_POINTS = 120
CDF_METRICS = ("ttft", "tpot", "e2e")


def rfc3339(ts: float | None) -> str | None:
    """Return a UTC RFC 3339 time, or None."""
    if ts is None or not math.isfinite(ts):
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def side_json(side: Side) -> dict[str, Any]:
    """Return what the report says about one side: origin, identity, environment, counts, time range."""
    req = side.requests
    outcomes: dict[str, int] = {}
    if req is not None:
        values, counts = np.unique(req.outcome.astype(str), return_counts=True)
        outcomes = {str(v): int(c) for v, c in zip(values, counts, strict=True)}
    elif side.histograms is not None:
        outcomes = {k: round(v) for k, v in side.histograms.outcomes.items()}
    return {"kind": side.kind, "spec": side.spec, "identity": side.identity, "environment": side.environment,
            "requests": side.count(), "successes": side.successes(), "outcomes": outcomes,
            "excluded": side.excluded, "time_range": [rfc3339(side.time_range[0]), rfc3339(side.time_range[1])],
            "notes": side.notes, "workload": side.workload}


def cdf(values: np.ndarray) -> list[list[float]]:
    """Return up to CDF_POINTS [value, share ≤ value] points of the finite values (censored ones lift the top)."""
    finite = np.sort(values[np.isfinite(values)])
    n = int((~np.isnan(values)).sum())
    if finite.size == 0 or n == 0:
        return []
    idx = np.unique(np.linspace(0, finite.size - 1, min(CDF_POINTS, finite.size)).astype(int))
    return [[float(finite[i]), (i + 1) / n] for i in idx]


def _quantile(values: np.ndarray, q: float) -> float | None:
    v = values[~np.isnan(values)]
    if v.size == 0:
        return None
    return float(np.quantile(v, q, method="inverted_cdf"))


def _from_cells(cells: list[Cell], metric: str, pct: float, role: str) -> float | None:
    cell = next((c for c in cells if c.metric == metric and c.stat == f"p{pct:g}" and c.scope == "overall"), None)
    return None if cell is None else (cell.base if role == "baseline" else cell.cand)


def objectives(base: Side, cand: Side, cells: list[Cell]) -> list[dict[str, Any]]:
    """Return each SLO objective with both sides' values (each side's own data) and whether each meets it.

    Prometheus inputs have no per-request values: their overall quantile cells (bucket resolution) serve.
    """
    out = []
    for slo in base.slos:
        for o in slo.get("objectives") or []:
            metric, pct, thr = str(o.get("metric")), float(o.get("percentile", 0)), float(o.get("threshold_s", 0))
            row: dict[str, Any] = {"slo": slo.get("name"), "what": f"p{pct:g} {metric}", "threshold": thr}
            for role, side in (("baseline", base), ("candidate", cand)):
                req = side.requests
                col = None if req is None else req.latency.get(metric, req.stages.get(metric))
                value = _from_cells(cells, metric, pct, role) if col is None else _quantile(col, pct / 100)
                row[role] = {"value": _num(value), "censored": value is not None and math.isinf(value),
                             "met": None if value is None else value <= thr}
            out.append(row)
    return out


def distributions(base: Side, cand: Side) -> dict[str, Any]:
    """Return the CDF points of TTFT, TPOT and E2E for both sides."""
    out: dict[str, Any] = {}
    for metric in CDF_METRICS:
        pair = {}
        for role, side in (("baseline", base), ("candidate", cand)):
            if side.requests is not None:
                pair[role] = cdf(side.requests.latency[metric])
        if pair:
            out[metric] = pair
    return out


def stage_breakdown(base: Side, cand: Side) -> dict[str, Any]:
    """Return per stage (connect, queue, prefill, decode, network) each side's p50 and p95, where measured."""
    out: dict[str, Any] = {}
    for stage in STAGES:
        row = {}
        for role, side in (("baseline", base), ("candidate", cand)):
            col = side.requests.stages[stage] if side.requests is not None else None
            if col is not None and not np.isnan(col).all():
                row[role] = {"p50": _quantile(col, 0.5), "p95": _quantile(col, 0.95),
                             "n": int((~np.isnan(col)).sum())}
        if row:
            out[stage] = row
    return out


def loads(base: Side, cand: Side) -> list[dict[str, Any]]:
    """Return per load level (bench) each side's p50/p95 TTFT and E2E and measured throughput."""
    rows: dict[str, dict[str, Any]] = {}
    for role, side in (("baseline", base), ("candidate", cand)):
        req = side.requests
        if req is None:
            continue
        for s in side.stages:
            mask = req.stage == s.index
            row = rows.setdefault(s.label, {"label": s.label, "kind": s.kind, "level": s.level})
            row[role] = {"ended": s.ended, "rps": s.rps, "n": int(mask.sum()),
                         **{f"{m}_{q}": _num(_quantile(req.latency[m][mask], q / 100))
                            for m in ("ttft", "e2e") for q in (50, 95)}}
    return sorted(rows.values(), key=lambda r: (r["kind"], r["level"]))


def max_load(base: Side, cand: Side) -> dict[str, Any] | None:
    """Return the max load at SLO of both runs and its relative shift, where both searched for it."""
    if base.max_load is None or cand.max_load is None:
        return None
    vb, vc = base.max_load.get("value"), cand.max_load.get("value")
    shift = vc / vb - 1 if isinstance(vb, int | float) and isinstance(vc, int | float) and vb > 0 else None
    return {"baseline": dict(base.max_load), "candidate": dict(cand.max_load), "shift": shift}


def top_changes(cells: list[Cell], k: int = 3) -> list[Cell]:
    """Return the k most notable family cells: verdict first (regressions), then the size of the change."""
    judged = [c for c in cells if c.family and c.delta is not None and math.isfinite(c.delta)]
    judged.sort(key=lambda c: (ORDER.index(c.verdict), c.scope != "overall", -abs(c.delta or 0.0)))
    return judged[:k]


def document(base: Side, cand: Side, cells: list[Cell], settings: Settings, warnings: list[str],
             bottlenecks: dict[str, Any] | None = None, resolution: str | None = None) -> dict[str, Any]:
    """Return the whole report document."""
    verdict = overall(cells)
    top = top_changes(cells)
    return {
        "schema": SCHEMA, "generated": rfc3339(datetime.now(UTC).timestamp()), "sloguard_version": __version__,
        "verdict": verdict, "top_changes": [c.as_json() for c in top],
        "baseline": side_json(base), "candidate": side_json(cand), "warnings": warnings,
        "settings": {"replicates": settings.reps, "seed": settings.seed, "alpha": settings.alpha,
                     "thresholds": dict(settings.thresholds), "min_tail": settings.min_tail,
                     "quantiles": list(settings.quantiles)},
        "counts": {v: sum(1 for c in cells if c.family and c.verdict == v) for v in ORDER},
        "cells": [c.as_json() for c in cells],
        "objectives": objectives(base, cand, cells), "distributions": distributions(base, cand),
        "stages": stage_breakdown(base, cand), "loads": loads(base, cand), "max_load": max_load(base, cand),
        "bottlenecks": bottlenecks or {"available": False, "reason": "no stage analysis was made"},
        "resolution": resolution, "metrics": list(LATENCY),
    }
