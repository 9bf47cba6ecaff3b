"""SLO model + rules → Prometheus recording and alerting rule files (the same table the live engine reads)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from sloguard.alerts.rules import (
    BURN_ALERT,
    Rule,
    builtin_rules,
    burn_annotations,
    burn_labels,
    burn_plans,
    guard_rules,
    probe_intervals,
    threshold_rule,
)
from sloguard.config.spec import Config
from sloguard.config.units import format_duration
from sloguard.slo.burnrate import MIN_BAD, BurnRule, Z
from sloguard.slo.model import SLO, Indicator, slos_from_config

HIST_METRICS = ("ttft", "itl", "tpot", "e2e")  # probe histograms: sloguard_probe_<metric>_seconds
QUANTILE_WINDOWS = (300.0, 3600.0)
SLO_RULES, ALERTS = "sloguard-slo.yaml", "sloguard-alerts.yaml"


BY = "slo, sli, metric, percentile"  # one series per SLO budget (absent labels stay absent)
BAD = 'sloguard_slo_requests_total{good="false"}'


def error_ratio_record(window: float) -> str:
    """Return the recording rule name of the budget-spending request ratio over a window."""
    return f"sloguard:slo_error_ratio:rate{format_duration(window)}"


def bad_record(window: float) -> str:
    """Return the recording rule name of the budget-spending request count over a window."""
    return f"sloguard:slo_bad_requests:increase{format_duration(window)}"


def requests_record(window: float) -> str:
    """Return the recording rule name of the judged request count over a window."""
    return f"sloguard:slo_requests:increase{format_duration(window)}"


def _error_ratio(window: float) -> dict[str, Any]:
    w = format_duration(window)
    total = f"sum by ({BY}) (increase(sloguard_slo_requests_total[{w}]))"
    # `or ... * 0` keeps the ratio at 0 (not absent) before the first bad request is counted. A ratio of
    # increases (not rates) divides the same integers the live engine divides, bit for bit.
    bad = f"sum by ({BY}) (increase({BAD}[{w}]))"
    return {"record": error_ratio_record(window), "expr": f"({bad} or {total} * 0) / {total}"}


def _count(record: str, series: str, window: float) -> dict[str, Any]:
    w = format_duration(window)
    # The counter's own difference over the window (an integer, no extrapolation), unless it reset
    # (daemon restart) in the window or has no sample that old yet: then increase().
    exact = f"({series} - {series} offset {w}) unless resets({series}[{w}]) > 0"
    return {"record": record, "expr": f"sum by ({BY}) ({exact} or increase({series}[{w}]))"}


def _quantile(slo: SLO, metric: str, q: float, window: float) -> dict[str, Any]:
    sel = f'probe="{slo.probe}"' if slo.probe else f'target="{slo.target}"'
    w = format_duration(window)
    return {"record": f"sloguard:slo_quantile_seconds:rate{w}",
            "expr": f"histogram_quantile({float(q)!r}, sum by (le) "
                    f"(rate(sloguard_probe_{metric}_seconds_bucket{{{sel}}}[{w}])))",
            "labels": {"slo": slo.name, "metric": metric, "quantile": f"{q:g}"}}


def _burn_windows(slos: Sequence[SLO]) -> tuple[list[float], list[float], list[float]]:
    """Return the windows the alertable rows read: ratios, bad counts, request counts (SLOs without schedule)."""
    plans = [(s, rule) for s in slos if s.source == "probe" for _, rule in burn_plans(s)]
    ratios = sorted({w for _, r in plans for w in (r.window.long, r.window.short)})
    unscheduled = sorted({r.window.long for s, r in plans if s.probe_rate is None})
    return ratios, sorted({r.window.long for _, r in plans}), unscheduled


def recording_rules(slos: Sequence[SLO]) -> list[dict[str, Any]]:
    """Return SLI recording rules: error ratios and bad counts per burn window, probe quantiles per objective."""
    ratios, bad, counts = _burn_windows(slos)
    rules = [_error_ratio(w) for w in ratios] + [_count(bad_record(w), BAD, w) for w in bad]
    rules += [_count(requests_record(w), "sloguard_slo_requests_total", w) for w in counts]
    for slo in slos:
        if slo.source != "probe":
            continue
        for o in slo.objectives:
            if o.metric in HIST_METRICS:
                rules.extend(_quantile(slo, o.metric, o.quantile, w) for w in QUANTILE_WINDOWS)
    return rules


def _sel(slo: SLO, ind: Indicator) -> str:
    labels = {"slo": slo.name, "metric": "", "percentile": "", **ind.labels()}
    return "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in labels.items()) + "}"


def _evidence(rule: BurnRule, sel: str) -> str:
    """Return the guard clause: bad(long) >= k_min from the schedule, else the observed-count form."""
    bad = f"{bad_record(rule.window.long)}{sel}"
    if rule.min_bad is not None:
        return f"{bad} >= {rule.min_bad}"
    n, p = f"{requests_record(rule.window.long)}{sel}", rule.allowed
    return f"{bad} >= {MIN_BAD} and {bad} >= {n} * {p!r} + {Z!r} * sqrt({n} * {p * (1 - p)!r})"


def burn_alerts(slo: SLO) -> list[dict[str, Any]]:
    """Return one alert per alertable (budget, row), the live engine's condition; $value = long-window burn."""
    out = []
    for ind, rule in burn_plans(slo):
        bw, sel = rule.window, _sel(slo, ind)
        budget = f"(1 - {float(ind.objective)!r})"  # repr: exact; `:g` would round 0.9999995 to 1
        cond = [f"{error_ratio_record(w)}{sel} / {budget} > {bw.factor!r}" for w in (bw.long, bw.short)]
        cond.append(_evidence(rule, sel))
        out.append({"alert": BURN_ALERT, "expr": " and ".join(cond), "labels": dict(burn_labels(slo, ind, bw)),
                    "annotations": dict(burn_annotations(slo, ind, rule))})
    return out


def alert_rule(rule: Rule) -> dict[str, Any]:
    """Return a threshold or built-in rule with its expression text verbatim."""
    out: dict[str, Any] = {"alert": rule.name, "expr": rule.source}
    if rule.for_:
        out["for"] = format_duration(rule.for_)
    if rule.keep_firing_for:
        out["keep_firing_for"] = format_duration(rule.keep_firing_for)
    out["labels"] = dict(rule.labels)
    if rule.annotations:
        out["annotations"] = dict(rule.annotations)
    return out


def _file(source: str, groups: list[dict[str, Any]]) -> str:
    header = (f"# Generated by sloguard from {source}; do not edit.\n"
              f"# Regenerate with: sloguard rules -c {source} -o <dir>\n")
    return header + yaml.safe_dump({"groups": groups}, sort_keys=False, width=200, allow_unicode=True)


def generate(cfg: Config, source: str = "config") -> dict[str, str]:
    """Return file name -> YAML text: SLI recording rules, burn-rate alerts, threshold and built-in alerts."""
    slos = slos_from_config(cfg)
    # Burn rates need the per-request counters, which only probe SLOs export (server SLOs: live engine only).
    probe_slos = [s for s in slos if s.source == "probe"]
    builtin = list(builtin_rules(probe_intervals(cfg))) if cfg.builtin_alerts else []
    rules = [threshold_rule(a) for a in cfg.alerts] + builtin + list(guard_rules(cfg))
    # One group: Prometheus evaluates a group's rules in order, so each burn-rate alert reads the recording
    # rules of the same evaluation (across groups it could read the previous one, and $value would jitter).
    slo_rules = recording_rules(slos) + [r for s in probe_slos for r in burn_alerts(s)]
    groups: Mapping[str, list[dict[str, Any]]] = {
        SLO_RULES: [{"name": "sloguard-slo", "rules": slo_rules}],
        ALERTS: [{"name": "sloguard-alerts", "rules": [alert_rule(r) for r in rules]}],
    }
    return {name: _file(source, g) for name, g in groups.items() if g[0]["rules"]}
