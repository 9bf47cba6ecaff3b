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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from prometheus_client.metrics_core import Metric

from sloguard.config.units import format_duration
from sloguard.slo.burnrate import plan
from sloguard.slo.model import BudgetStatus, BurnStatus, Indicator, SLOStatus

if TYPE_CHECKING:
    from sloguard.slo.engine import CounterKey

P = "sloguard_slo_"
S = "sloguard_stage_"
# name -> (type, help); the table is the exposition's single source of names and help text.
FAMILIES: Mapping[str, tuple[str, str]] = {
    P + "quantile_seconds": ("summary", "SLO metric quantile over the window (probe: exact ≤100k requests, else ≤1% relative; server: histogram_quantile); a lower bound where sloguard_slo_quantile_censored is 1. Computed every evaluation interval."),  # noqa: E501
    P + "quantile_censored": ("summary", "1 when the quantile is only a lower bound: requests that ended before the metric's event (timeout, reset, error) could move it; the objective is then judged missed."),  # noqa: E501
    P + "censored_requests": ("gauge", "Requests in the window that ended before the metric's event (counted as more than the time they ran)."),  # noqa: E501
    P + "objective_seconds": ("summary", "Configured objective threshold for the SLO metric quantile."),
    P + "objective_compliance": ("summary", "1 when the objective holds over the window, 0 when not (a censored quantile never holds)."),  # noqa: E501
    P + "goodput_ratio": ("gauge", "Share of requests in the window that succeeded and met every goodput threshold."),
    P + "goodput_rate": ("gauge", "Good requests per second over the window."),
    P + "goodput_target_ratio": ("gauge", "Configured goodput target ratio."),
    P + "error_ratio": ("gauge", "Share of the budget's requests in the window that spent it (sli=availability: failed; sli=latency: not good, or missing the objective's threshold)."),  # noqa: E501
    P + "error_budget_remaining_ratio": ("gauge", "Share of the budget left over the whole SLO window: 1 - bad / ((1 - objective) x requests the window is expected to hold); negative when overspent."),  # noqa: E501
    P + "window_coverage_ratio": ("gauge", "Share of the SLO window the data behind the budget spans (from the data, so restarts keep it)."),  # noqa: E501
    P + "burn_rate": ("gauge", "Error ratio over the window divided by (1 - objective): 1 spends the budget exactly in the SLO window."),  # noqa: E501
    P + "window_bad_requests": ("gauge", "Requests in the window that spent the budget."),
    P + "burn_evidence_ratio": ("gauge", "Bad requests in the window divided by the fewest that are significant against healthy operation (one-sided binomial test, alpha 0.001); burn alerts need >= 1 over their long window."),  # noqa: E501
    P + "requests": ("counter", "Probe requests judged for each SLO budget since the daemon started, by whether they were good for it."),  # noqa: E501
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


def families(statuses: Sequence[SLOStatus], requests: Mapping[CounterKey, int]) -> list[Metric]:
    """Return one family per FAMILIES entry; `requests` maps (slo, budget labels, good) to the cumulative count."""
    out = {name: Metric(name, doc, kind) for name, (kind, doc) in FAMILIES.items()}
    for st in statuses:
        for name, labels, value in _samples(st):
            if value is not None:
                out[name].add_sample(name, labels, value)
    seen: set[tuple[tuple[str, str], ...]] = set()
    for (slo, budget, good), count in sorted(requests.items()):
        lab = {"slo": slo, **dict(budget), "good": str(good).lower()}
        key = tuple(sorted(lab.items()))
        if key not in seen:  # two identical objectives share one series
            seen.add(key)
            out[P + "requests"].add_sample(P + "requests_total", lab, count)
    return list(out.values())


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: format_duration(v) if k == "window" else v for k, v in row.items()}


def _rows_json(st: SLOStatus, ind: Indicator) -> list[dict[str, Any]]:
    """Return the budget's alertable burn rows with their current burns and whether the condition holds."""
    burns = {u.window: u for u in st.burns if u.indicator == ind}
    out = []
    for rule in plan(st.slo.window, ind.objective, st.slo.probe_rate):
        w = rule.window
        long, short = burns.get(w.long), burns.get(w.short)
        lb, sb = (long.burn_rate if long else None), (short.burn_rate if short else None)
        holds = (lb is not None and sb is not None and long is not None and lb > w.factor and sb > w.factor
                 and (long.evidence or 0.0) >= 1.0)
        out.append({"severity": w.severity, "long_window": format_duration(w.long),
                    "short_window": format_duration(w.short), "factor": w.factor, "meaning": rule.meaning,
                    "min_bad": long.min_bad if long else rule.min_bad, "bad_long": long.bad if long else None,
                    "burn_long": lb, "burn_short": sb, "fires": holds and rule.alertable})
    return out


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
