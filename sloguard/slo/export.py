"""SLOStatus → Prometheus families (DESIGN §6 names) and the `/api/v1/slos` JSON. Empty = absent, never 0.

Segmented SLOs (`segment_by: prompt_bucket`) export each windowed per-request series twice: once
without a `prompt_bucket` label (all buckets; PromQL `prompt_bucket=""` selects it) and once per bucket
with `prompt_bucket="<name>"`. Burn rates and the error budget are per SLO only, so alerts stay single.
Families with a `quantile` label are typed `summary` (precomputed quantiles, without _sum/_count): promtool's
lint rejects a `quantile` label on any other type, and DESIGN §6 fixes the label name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from prometheus_client.metrics_core import Metric

from sloguard.config.units import format_duration
from sloguard.slo.model import SLOStatus

P = "sloguard_slo_"
S = "sloguard_stage_"
# name -> (type, help); the table is the exposition's single source of names and help text.
FAMILIES: Mapping[str, tuple[str, str]] = {
    P + "quantile_seconds": ("summary", "SLO metric quantile over the window (probe: exact ≤100k requests, else ≤1% relative; server: histogram_quantile). Computed every evaluation interval."),  # noqa: E501
    P + "objective_seconds": ("summary", "Configured objective threshold for the SLO metric quantile."),
    P + "objective_compliance": ("summary", "1 when the objective holds over the window, 0 when not."),
    P + "goodput_ratio": ("gauge", "Share of requests in the window that succeeded and met every goodput threshold."),
    P + "goodput_rate": ("gauge", "Good requests per second over the window."),
    P + "goodput_target_ratio": ("gauge", "Configured goodput target ratio."),
    P + "error_ratio": ("gauge", "Share of requests in the window that spent error budget (failed, or for goodput SLOs not good)."),  # noqa: E501
    P + "error_budget_remaining_ratio": ("gauge", "Share of the error budget left over the SLO window; negative when overspent."),  # noqa: E501
    P + "burn_rate": ("gauge", "Error ratio over the window divided by (1 - objective): 1 spends the budget exactly in the SLO window."),  # noqa: E501
    P + "requests": ("counter", "Probe requests judged for the SLO since the daemon started, by whether they were good for the error budget."),  # noqa: E501
    P + "window_requests": ("gauge", "Requests in the window (probe requests, or server histogram observations)."),
    S + "latency_seconds": ("summary", "Stage latency quantile over the window: per-request stages exact; server-histogram stages bounded by the histogram's sum and by their whole; network = time to the response head where no server record exists."),  # noqa: E501
    S + "budget_seconds": ("gauge", "Configured p95 latency budget of the stage."),
    S + "share_ratio": ("gauge", "Stage p50 divided by E2E p50 over the same window."),
    S + "overrun_ratio": ("gauge", "Stage p95 divided by its budget: above 1 the stage overran its budget."),
}


def _q(q: float) -> str:
    return f"{q:g}"


def _seg(labels: dict[str, str], segment: str) -> dict[str, str]:
    return {**labels, "prompt_bucket": segment} if segment else labels


def _samples(st: SLOStatus) -> Iterable[tuple[str, dict[str, str], float | None]]:
    slo = st.slo.name
    for o in st.slo.objectives:
        yield P + "objective_seconds", {"slo": slo, "metric": o.metric, "quantile": _q(o.quantile)}, o.threshold
    for ob in st.objectives:
        lab = _seg({"slo": slo, "metric": ob.metric, "quantile": _q(ob.percentile / 100), "window": format_duration(ob.window)}, ob.segment)  # noqa: E501
        yield P + "quantile_seconds", lab, ob.value
        yield P + "objective_compliance", lab, None if ob.compliant is None else float(ob.compliant)
    if st.slo.goodput is not None:
        yield P + "goodput_target_ratio", {"slo": slo}, st.slo.goodput.target
    yield P + "error_budget_remaining_ratio", {"slo": slo}, st.error_budget_remaining
    for w in st.windows:
        lab = _seg({"slo": slo, "window": format_duration(w.window)}, w.segment)
        yield P + "goodput_ratio", lab, w.goodput_ratio
        yield P + "goodput_rate", lab, w.goodput_rate
        yield P + "error_ratio", lab, w.error_ratio
        yield P + "window_requests", lab, w.requests if w.requests > 0 else None
        if not w.segment:
            yield P + "burn_rate", lab, w.burn_rate
    for stage, budget in sorted(st.slo.budgets.items()):
        yield S + "budget_seconds", {"slo": slo, "stage": stage}, budget
    for s in st.stages:
        lab = _seg({"slo": slo, "stage": s.stage, "window": format_duration(s.window)}, s.segment)
        if s.source == "request":  # measured per request, not the histogram estimate of the same stage
            lab["source"] = "request"
        for q, v in ((0.5, s.p50), (0.95, s.p95), (0.99, s.p99)):
            yield S + "latency_seconds", {**lab, "quantile": _q(q)}, v
        yield S + "share_ratio", lab, s.share
        yield S + "overrun_ratio", lab, s.overrun


def families(statuses: Sequence[SLOStatus], requests: Mapping[tuple[str, bool], int]) -> list[Metric]:
    """Return one family per FAMILIES entry; `requests` maps (slo, good) to the cumulative count."""
    out = {name: Metric(name, doc, kind) for name, (kind, doc) in FAMILIES.items()}
    for st in statuses:
        for name, labels, value in _samples(st):
            if value is not None:
                out[name].add_sample(name, labels, value)
    for (slo, good), count in sorted(requests.items()):
        out[P + "requests"].add_sample(P + "requests_total", {"slo": slo, "good": str(good).lower()}, count)
    return list(out.values())


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: format_duration(v) if k == "window" else v for k, v in row.items()}


def status_json(st: SLOStatus) -> dict[str, Any]:
    """Return one SLO's status as plain JSON types (null = no data)."""
    slo = st.slo
    return {
        "name": slo.name, "target": slo.target, "source": slo.source, "probe": slo.probe,
        "window": format_duration(slo.window), "objective": st.objective, "budget_sli": st.sli,
        "goodput_target": None if slo.goodput is None else slo.goodput.target,
        "error_budget_remaining": st.error_budget_remaining, "worst_stage": st.worst_stage,
        "budgets": dict(slo.budgets), "runbook_url": slo.runbook_url, "dashboard_url": slo.dashboard_url,
        "windows": [_jsonable(asdict(w)) for w in st.windows],
        "objectives": [_jsonable(asdict(o)) for o in st.objectives],
        "stages": [_jsonable(asdict(s)) for s in st.stages],
        "evaluated_at": st.now,
    }


def api_json(statuses: Sequence[SLOStatus]) -> dict[str, object]:
    """Return the `/api/v1/slos` document: {"slos": [...]} in config order."""
    return {"slos": [status_json(st) for st in statuses]}
