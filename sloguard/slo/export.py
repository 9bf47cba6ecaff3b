"""SLOStatus → Prometheus families (DESIGN §6 names) and the `/api/v1/slos` JSON. Empty = absent, never 0.

Segmented SLOs (`segment_by: prompt_bucket`) export each windowed per-request series twice: once
without a `prompt_bucket` label (all buckets; PromQL `prompt_bucket=""` selects it) and once per bucket
with `prompt_bucket="<name>"`. Budget series (error ratio, burn rate, bad requests, evidence, budget left,
coverage, request counters) are per SLO budget only: labelled `sli="availability"|"latency"`, and for a
per-objective latency budget also `metric` and `quantile`, so alerts stay single per budget.
Families with a `quantile` label are typed `summary` (precomputed quantiles, without _sum/_count): promtool's
lint rejects a `quantile` label on any other type, and DESIGN §6 fixes the label name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from prometheus_client.metrics_core import Metric

from sloguard.config.units import format_duration
from sloguard.families import declare
from sloguard.slo.model import Indicator
from sloguard.slo.result import BudgetStatus, BurnStatus, SLOStatus
from sloguard.slo.rows import row_states

if TYPE_CHECKING:
    from sloguard.slo.counters import CounterKey, ReplicaKey

P = "sloguard_slo_"
S = "sloguard_stage_"
# name -> (type, help); the table is the exposition's single source of names and help text.
FAMILIES: Mapping[str, tuple[str, str]] = {
    P + "quantile_seconds": ("summary", "SLO metric quantile over the window (probe: exact ≤100k requests, else ≤1% relative; server: histogram_quantile). Probe: requests cut short before the metric's event (timeout, reset, error; sloguard_slo_censored_requests) count at the time they ran, so the value is a lower bound while any are in the window. Computed every evaluation interval."),  # noqa: E501
    P + "quantile_censored": ("summary", "1 when the objective is missed only because of requests cut short before the metric's event: the quantile with them at the time they ran is within the threshold, with them at +Inf it is over. 0 when it holds even with them at +Inf, or when the measured values alone miss it."),  # noqa: E501
    P + "censored_requests": ("gauge", "Requests in the window cut short before the metric's event (timeout, reset, error), counted as more than the time they ran; they may be nonzero while the objective holds."),  # noqa: E501
    P + "objective_seconds": ("summary", "Configured objective threshold for the SLO metric quantile."),
    P + "objective_compliance": ("summary", "1 when the objective holds over the window (probe: even with every request cut short at +Inf), 0 when not."),  # noqa: E501
    P + "goodput_ratio": ("gauge", "Share of requests in the window that succeeded and met every goodput threshold."),
    P + "goodput_rate": ("gauge", "Good requests per second over the window."),
    P + "goodput_target_ratio": ("gauge", "Configured goodput target ratio."),
    P + "error_ratio": ("gauge", "Share of the budget's requests in the window that spent it (sli=availability: failed; sli=latency: not good, or missing the objective's threshold)."),  # noqa: E501
    P + "error_budget_remaining_ratio": ("gauge", "Share of the budget left over the whole SLO window: 1 - bad / ((1 - objective) x requests the window is expected to hold); negative when overspent."),  # noqa: E501
    P + "window_coverage_ratio": ("gauge", "Share of the SLO window the data behind the budget spans (from the data, so restarts keep it)."),  # noqa: E501
    P + "burn_rate": ("gauge", "Error ratio over the window divided by (1 - objective): 1 spends the budget exactly in the SLO window."),  # noqa: E501
    P + "window_bad_requests": ("gauge", "Requests in the window that spent the budget."),
    P + "burn_evidence_ratio": ("gauge", "Bad requests in the window divided by the fewest that are significant against healthy operation (one-sided binomial test, alpha 0.001); burn alerts need >= 1 over their long window."),  # noqa: E501
    P + "requests": ("counter", "Requests judged for each SLO budget, by whether they were good for it: probe SLOs, sloguard's probes since the daemon started; server SLOs, per replica, the engine's observations and aborted requests since sloguard first scraped it."),  # noqa: E501
    P + "window_requests": ("gauge", "Requests in the window (probe requests, or server histogram observations)."),
    S + "latency_seconds": ("summary", "Stage latency quantile over the window: per-request stages exact; server-histogram stages bounded by the histogram's sum and by their whole; network = time to the response head where no server record exists."),  # noqa: E501
    S + "budget_seconds": ("gauge", "Configured p95 latency budget of the stage."),
    S + "share_ratio": ("gauge", "Stage p50 divided by E2E p50 over the same window."),
    S + "overrun_ratio": ("gauge", "Stage p95 divided by its budget: above 1 the stage overran its budget."),
}

_SEG = ("prompt_bucket",)  # segmented SLOs only
_OBJ = ("slo", "metric", "window", *_SEG)
_BUDGET = ("slo", "sli", "metric", "percentile")  # metric, percentile: per-objective budgets only
_WIN = ("slo", "window", *_SEG)
_STAGE = ("slo", "stage", "window", *_SEG, "source")  # source="request": measured per request
# name -> label names (a summary's `quantile` comes with its type); declared with FAMILIES for `sloguard check`.
LABELS: Mapping[str, tuple[str, ...]] = {
    P + "quantile_seconds": _OBJ, P + "quantile_censored": _OBJ, P + "censored_requests": _OBJ,
    P + "objective_seconds": ("slo", "metric"), P + "objective_compliance": _OBJ,
    P + "goodput_ratio": _WIN, P + "goodput_rate": _WIN, P + "goodput_target_ratio": ("slo",),
    P + "error_ratio": (*_BUDGET, "window"), P + "error_budget_remaining_ratio": _BUDGET,
    P + "window_coverage_ratio": _BUDGET, P + "burn_rate": (*_BUDGET, "window"),
    P + "window_bad_requests": (*_BUDGET, "window"), P + "burn_evidence_ratio": (*_BUDGET, "window"),
    P + "requests": (*_BUDGET, "good", "replica"), P + "window_requests": _WIN,
    S + "latency_seconds": _STAGE, S + "budget_seconds": ("slo", "stage"), S + "share_ratio": _STAGE,
    S + "overrun_ratio": _STAGE,
}
for _name, (_kind, _doc) in FAMILIES.items():
    declare(_name, _kind, _doc, LABELS[_name])


def _q(q: float) -> str:
    return f"{q:g}"


def _seg(labels: dict[str, str], segment: str) -> dict[str, str]:
    return {**labels, "prompt_bucket": segment} if segment else labels


def _budget_samples(st: SLOStatus) -> Iterable[tuple[str, dict[str, str], float | None]]:
    slo = st.slo.name
    for b in st.budgets:
        lab = {"slo": slo, **b.indicator.labels()}
        yield P + "error_budget_remaining_ratio", lab, b.remaining
        yield P + "window_coverage_ratio", lab, b.coverage
    for u in st.burns:
        lab = {"slo": slo, **u.indicator.labels(), "window": format_duration(u.window)}
        yield P + "error_ratio", lab, u.error_ratio
        yield P + "burn_rate", lab, u.burn_rate
        yield P + "window_bad_requests", lab, u.bad if u.requests > 0 else None
        yield P + "burn_evidence_ratio", lab, u.evidence


def _samples(st: SLOStatus) -> Iterable[tuple[str, dict[str, str], float | None]]:
    slo = st.slo.name
    for o in st.slo.objectives:
        yield P + "objective_seconds", {"slo": slo, "metric": o.metric, "quantile": _q(o.quantile)}, o.threshold
    for ob in st.objectives:
        lab = _seg({"slo": slo, "metric": ob.metric, "quantile": _q(ob.percentile / 100), "window": format_duration(ob.window)}, ob.segment)  # noqa: E501
        yield P + "quantile_seconds", lab, ob.value
        yield P + "quantile_censored", lab, None if ob.value is None else float(ob.censored)
        yield P + "objective_compliance", lab, None if ob.compliant is None else float(ob.compliant)
        if st.slo.source == "probe" and ob.value is not None:
            yield P + "censored_requests", _seg({"slo": slo, "metric": ob.metric, "window": format_duration(ob.window)}, ob.segment), float(ob.censored_count)  # noqa: E501
    if st.slo.goodput is not None:
        yield P + "goodput_target_ratio", {"slo": slo}, st.slo.goodput.target
    yield from _budget_samples(st)
    for w in st.windows:
        lab = _seg({"slo": slo, "window": format_duration(w.window)}, w.segment)
        yield P + "goodput_ratio", lab, w.goodput_ratio
        yield P + "goodput_rate", lab, w.goodput_rate
        yield P + "window_requests", lab, w.requests if w.requests > 0 else None
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


def families(statuses: Sequence[SLOStatus], requests: Mapping[CounterKey, int],
             replicas: Mapping[ReplicaKey, float] | None = None) -> list[Metric]:
    """Return one family per FAMILIES entry; `requests` maps (slo, budget labels, good) to the cumulative count,
    `replicas` (server SLOs) (slo, budget labels, good, replica) to the count since the replica was first scraped."""
    out = {name: Metric(name, doc, kind) for name, (kind, doc) in FAMILIES.items()}
    for st in statuses:
        for name, labels, value in _samples(st):
            if value is not None:
                out[name].add_sample(name, labels, value)
    rows: list[tuple[dict[str, str], float]] = [
        ({"slo": slo, **dict(budget), "good": str(good).lower()}, count)
        for (slo, budget, good), count in sorted(requests.items())]
    rows += [({"slo": slo, **dict(budget), "good": str(good).lower(), "replica": replica}, count)
             for (slo, budget, good, replica), count in sorted((replicas or {}).items())]
    seen: set[tuple[tuple[str, str], ...]] = set()
    for lab, count in rows:
        key = tuple(sorted(lab.items()))
        if key not in seen:  # two identical objectives share one series
            seen.add(key)
            out[P + "requests"].add_sample(P + "requests_total", lab, count)
    return list(out.values())


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    """Return a status row for JSON: windows as durations, non-finite numbers (an unbounded `upper`) as null."""
    return {k: format_duration(v) if k == "window" else None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in row.items()}


def _rows_json(st: SLOStatus, ind: Indicator) -> list[dict[str, Any]]:
    """Return the budget's burn rows with their current burns and whether the alert clause holds (slo.rows)."""
    return [{"severity": r.rule.window.severity, "long_window": format_duration(r.rule.window.long),
             "short_window": format_duration(r.rule.window.short), "factor": r.rule.window.factor,
             "meaning": r.rule.meaning, "min_bad": r.min_bad, "bad_long": r.bad_long, "burn_long": r.burn_long,
             "burn_short": r.burn_short, "fires": r.fires} for r in row_states(st, ind)]


def _budget_json(st: SLOStatus, b: BudgetStatus) -> dict[str, Any]:
    ind = b.indicator
    return {**ind.labels(), "objective": ind.objective, "implicit": ind.implicit, "remaining": b.remaining,
            "bad": b.bad, "allowed": b.allowed, "expected": b.expected, "covered": b.covered,
            "coverage": b.coverage, "window": format_duration(b.window), "rows": _rows_json(st, ind)}


def _burn_json(u: BurnStatus) -> dict[str, Any]:
    return {**u.indicator.labels(), "window": format_duration(u.window), "requests": u.requests, "bad": u.bad,
            "error_ratio": u.error_ratio, "burn_rate": u.burn_rate, "min_bad": u.min_bad, "evidence": u.evidence}


def least_remaining(st: SLOStatus) -> float | None:
    """Return the least budget left among the SLO's budgets (None without data)."""
    return min((b.remaining for b in st.budgets if b.remaining is not None), default=None)


def status_json(st: SLOStatus) -> dict[str, Any]:
    """Return one SLO's status as plain JSON types (null = no data)."""
    slo = st.slo
    return {
        "name": slo.name, "target": slo.target, "source": slo.source, "probe": slo.probe,
        "window": format_duration(slo.window), "probe_rate": slo.probe_rate,
        "goodput_target": None if slo.goodput is None else slo.goodput.target,
        "worst_stage": st.worst_stage, "error_budget_remaining": least_remaining(st),
        "error_budgets": [_budget_json(st, b) for b in st.budgets], "burns": [_burn_json(u) for u in st.burns],
        "budgets": dict(slo.budgets), "runbook_url": slo.runbook_url, "dashboard_url": slo.dashboard_url,
        "windows": [_jsonable(asdict(w)) for w in st.windows],
        "objectives": [_jsonable(asdict(o)) for o in st.objectives],
        "stages": [_jsonable(asdict(s)) for s in st.stages],
        "evaluated_at": st.now,
    }


def api_json(statuses: Sequence[SLOStatus]) -> dict[str, object]:
    """Return the `/api/v1/slos` document: {"slos": [...]} in config order."""
    return {"slos": [status_json(st) for st in statuses]}
