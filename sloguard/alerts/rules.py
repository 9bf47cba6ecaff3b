"""Alert rules as data: threshold rules from config, built-in operational rules, SLO burn-rate rules."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sloguard.alerts.expr import Expr, ExprError, parse_expr
from sloguard.alerts.template import render
from sloguard.config.spec import AlertSpec, Config
from sloguard.config.units import format_duration
from sloguard.gpu.alerts import GPU_ALERTS
from sloguard.guardrails.alerts import check_rules, guardrail_rules, stage_rules
from sloguard.slo.burnrate import FALSE_PER_30D, BurnRule, BurnWindow, Z, plan
from sloguard.slo.model import SLO, Indicator, indicators, slos_from_config

__all__ = ["BUILTIN_ALERTS", "BURN_ALERT", "ExprError", "Rule", "burn_rules", "parse_expr", "render",
           "rules_from_config"]

BURN_ALERT = "SloguardErrorBudgetBurn"
UNDELIVERED_METRIC = "sloguard_notifications_undelivered"
_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class Rule:
    """One alerting rule. One expr: an instance per matching series; several: all must hold ("and")."""

    name: str
    exprs: tuple[Expr, ...]
    for_: float = 0.0
    keep_firing_for: float = 0.0
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    key: str = ""
    source: str = ""  # expr text as written (threshold rules), copied verbatim into generated rules

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.name)


def _m(**kw: object) -> Mapping[str, str]:
    return MappingProxyType({k: str(v) for k, v in kw.items() if v})


STALE_METRIC, STALE_MIN, STALE_INTERVALS = "sloguard_probe_last_success_age_seconds", 600.0, 3
STALE_EXPR = f"{STALE_METRIC} > {STALE_MIN:g}"  # per probe: see stale_exprs
# Built-in operational rules: (name, expr, for, severity, summary). Also emitted by the rule generator.
BUILTIN_ALERTS: tuple[tuple[str, str, float, str, str], ...] = (
    ("SloguardSourceDown", 'sloguard_source_up{source!~"scrape|nvml"} == 0', 120.0, "warning",
     "sloguard source {{ $labels.source }} for {{ $labels.target }} is failing"),
    ("SloguardTargetDown", 'sloguard_source_up{source="scrape"} == 0', 300.0, "critical",
     "inference target {{ $labels.target }} cannot be scraped"),
    ("SloguardProbeStale", STALE_EXPR, 60.0, "warning",
     "probe {{ $labels.probe }} has not succeeded for {{ $value }}s"),
    ("SloguardGPUCollectionFailing", 'sloguard_source_up{source="nvml"} == 0', 300.0, "warning",
     "GPU metrics collection (NVML) is failing"),
    ("SloguardNotificationExpired", f'{UNDELIVERED_METRIC}{{outcome="expired"}} > 0', 0.0, "critical",
     "{{ $value }} notification(s) to {{ $labels.notifier }} expired undelivered in the last hour"),
    ("SloguardNotificationFailed", f'{UNDELIVERED_METRIC}{{outcome="failed"}} > 0', 0.0, "critical",
     "{{ $value }} notification(s) to {{ $labels.notifier }} were rejected permanently in the last hour"),
    ("SloguardStoreDown", "sloguard_store_up == 0", 60.0, "critical",
     "sloguard cannot write its state store (disk full or read-only?): probe results, alert state and "
     "notifications are kept in memory and lost if it restarts"),
)


def threshold_rule(spec: AlertSpec) -> Rule:
    """Return the rule for one `alerts:` entry; raise ExprError on an expression outside the subset."""
    annotations = {"summary": spec.summary, "description": spec.description,
                   "runbook_url": spec.runbook_url or "", **spec.annotations}
    return Rule(spec.name, (parse_expr(spec.expr),), spec.for_, spec.keep_firing_for,
                MappingProxyType({**spec.labels, "severity": spec.severity}),
                MappingProxyType({k: v for k, v in annotations.items() if v}), source=spec.expr)


def stale_exprs(probe_intervals: Mapping[str, float]) -> list[tuple[str, str]]:
    """Return (probe or "", expr) for SloguardProbeStale: stale after max(600 s, 3 × the probe's interval).

    The expression subset compares a series with a constant, never with another series (an interval gauge),
    so a probe slower than 200 s gets a rule of its own and is excluded from the shared 600 s rule.
    """
    slow = {p: STALE_INTERVALS * i for p, i in sorted(probe_intervals.items()) if STALE_INTERVALS * i > STALE_MIN}
    if not slow:
        return [("", STALE_EXPR)]
    shared = f"{STALE_METRIC}{{{','.join(f'probe!={json.dumps(p)}' for p in slow)}}} > {STALE_MIN:g}"
    return [("", shared), *((p, f"{STALE_METRIC}{{probe={json.dumps(p)}}} > {t:.10g}") for p, t in slow.items())]


def builtin_rules(probe_intervals: Mapping[str, float] | None = None) -> tuple[Rule, ...]:
    """Return the built-in operational rules; `probe_intervals` (probe -> seconds) sets stale thresholds."""
    out: list[Rule] = []
    for n, e, f, s, t in BUILTIN_ALERTS:
        exprs = stale_exprs(probe_intervals or {}) if e == STALE_EXPR else [("", e)]
        # A per-probe rule carries its probe label too (the series has it anyway): promtool rejects two rules
        # with the same name and labels.
        out.extend(Rule(n, (parse_expr(x),), f, labels=_m(severity=s, probe=probe), annotations=_m(summary=t),
                        source=x, key=f"{n}:{probe}" if probe else "") for probe, x in exprs)
    out.extend(Rule(a.name, (parse_expr(a.expr),), a.for_, labels=_m(severity=a.severity),
                    annotations=_m(summary=a.summary, description=a.runbook), source=a.expr) for a in GPU_ALERTS)
    return tuple(out)


def _budget_query(slo: SLO, ind: Indicator, family: str, scale: str = "") -> str:
    matchers = ",".join(f"{k}='{v}'" for k, v in {"slo": slo.name, **ind.labels()}.items())
    return f'{{{{ with query "sloguard_slo_{family}{{{matchers}}}{scale}" }}}}'


def _budget_name(ind: Indicator) -> str:
    return ind.sli if ind.metric is None else f"{ind.sli} ({ind.metric} p{ind.percentile:g})"


def burn_annotations(slo: SLO, ind: Indicator, rule: BurnRule) -> Mapping[str, str]:
    """Return the annotations of one burn-rate alert (shared with the rule generator).

    The summary reads e.g. "SLO ux latency budget burning 62x (page at 14.4x over 5m and 1m); 91.38% of the
    1d budget left (2h 0m 0s of data)": observed long-window burn, the row's threshold and windows, and the
    budget left and data coverage read from sloguard's own series (sloguard.alerts.template).
    """
    bw = rule.window
    long_w, short_w, window = format_duration(bw.long), format_duration(bw.short), format_duration(slo.window)
    evidence = (f"at least {rule.min_bad} of the {long_w} window's requests are bad (healthy operation at the "
                f"objective gets there < {FALSE_PER_30D:g} times in 30 days)" if rule.min_bad is not None else
                f"the {long_w} window's bad requests are significant (z {Z:.3g} against the objective)")
    left = (_budget_query(slo, ind, "error_budget_remaining_ratio")
            + "{{ . | first | value | humanizePercentage }}{{ end }}")
    data = (_budget_query(slo, ind, "window_coverage_ratio", f" * {slo.window:.10g}")
            + "{{ . | first | value | humanizeDuration }}{{ end }}")
    return _m(
        summary=f'SLO {slo.name} {_budget_name(ind)} budget burning {{{{ $value | printf "%.3g" }}}}x '
                f"({bw.severity} at {bw.factor:g}x over {long_w} and {short_w}); {left} of the {window} budget "
                f"left ({data} of data)",
        description=f"objective {ind.objective * 100:.10g}% over {window}; fires when both windows burn faster "
                    f"than {bw.factor:g}x and {evidence}",
        objective=repr(float(ind.objective)), runbook_url=slo.runbook_url, dashboard_url=slo.dashboard_url)


def burn_labels(slo: SLO, ind: Indicator, bw: BurnWindow) -> Mapping[str, str]:
    """Return the labels of one burn-rate alert (shared with the rule generator)."""
    return _m(severity=bw.severity, slo=slo.name, **ind.labels(), long_window=format_duration(bw.long),
              short_window=format_duration(bw.short))


def burn_plans(slo: SLO) -> list[tuple[Indicator, BurnRule]]:
    """Return every (budget, row) both alerting paths emit for an SLO: rows that can mean something."""
    return [(ind, rule) for ind in indicators(slo) for rule in plan(slo.window, ind.objective, slo.probe_rate)
            if rule.alertable]


def _selector(family: str, slo: SLO, ind: Indicator, window: float) -> str:
    labels = {"slo": slo.name, **{"metric": "", "percentile": ""}, **ind.labels(), "window": format_duration(window)}
    return f"sloguard_slo_{family}{{{','.join(f'{k}={json.dumps(v)}' for k, v in labels.items())}}}"


def burn_rules(slo: SLO) -> tuple[Rule, ...]:
    """Return one rule per alertable (budget, row): both burns above the factor and the long window's evidence."""
    out = []
    for ind, rule in burn_plans(slo):
        bw = rule.window
        exprs = (parse_expr(f"{_selector('burn_rate', slo, ind, bw.long)} > {bw.factor!r}"),
                 parse_expr(f"{_selector('burn_rate', slo, ind, bw.short)} > {bw.factor!r}"),
                 parse_expr(f"{_selector('burn_evidence_ratio', slo, ind, bw.long)} >= 1"))
        labels = burn_labels(slo, ind, bw)
        key = ":".join([BURN_ALERT, slo.name, *ind.labels().values(), labels["long_window"], labels["short_window"]])
        out.append(Rule(BURN_ALERT, exprs, labels=labels, annotations=burn_annotations(slo, ind, rule), key=key))
    return tuple(out)


def probe_intervals(cfg: Config) -> dict[str, float]:
    """Return each configured probe's interval in seconds (for the stale-probe thresholds)."""
    return {p.name: p.interval for p in cfg.probes if p.kind == "latency"}  # checks have no last success


def guard_rules(cfg: Config) -> tuple[Rule, ...]:
    """Return the guardrail alerts enabled per target (whatever builtin_alerts says) and, with builtin_alerts,
    those of the configured guardrail check probes and of every SLO stage budget (sloguard.guardrails.alerts)."""
    specs = guardrail_rules(cfg) + (check_rules(cfg) + stage_rules(cfg) if cfg.builtin_alerts else [])
    return tuple(Rule(g.name, (parse_expr(g.expr),), g.for_, labels=MappingProxyType(dict(g.labels)),
                      annotations=MappingProxyType(dict(g.annotations)), key=g.key, source=g.expr)
                 for g in specs)


def rules_from_config(cfg: Config) -> tuple[Rule, ...]:
    """Return every rule of a config: threshold, built-in (if enabled), guardrail and burn-rate rules."""
    rules = [threshold_rule(a) for a in cfg.alerts]
    if cfg.builtin_alerts:
        rules.extend(builtin_rules(probe_intervals(cfg)))
    rules.extend(guard_rules(cfg))
    for slo in slos_from_config(cfg):
        rules.extend(burn_rules(slo))
    return tuple(rules)
