"""Alert rules as data: threshold rules from config, built-in operational rules, SLO burn-rate rules."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from sloguard.alerts.template import render
from sloguard.config.expr import Expr, ExprError, parse_expr
from sloguard.config.runbooks import DEFAULT_TEMPLATE, runbook_url
from sloguard.config.spec import AlertSpec, Config
from sloguard.config.units import format_duration
from sloguard.gpu.alerts import GPU_ALERTS
from sloguard.guardrails.alerts import check_rules, guardrail_rules, stage_rules
from sloguard.slo.burnrate import FALSE_PER_30D, BurnRule, plan
from sloguard.slo.model import SLO, Indicator, indicators, slos_from_config

__all__ = ["BUILTIN_ALERTS", "BURN_ALERT", "ExprError", "Rule", "burn_groups", "burn_hold", "burn_key", "burn_rules",
           "parse_expr", "render", "rules_from_config"]

BURN_ALERT = "SloguardErrorBudgetBurn"
UNDELIVERED_METRIC = "sloguard_notifications_undelivered"
_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class Rule:
    """One alerting rule. One expr: an instance per matching series; several: all must hold ("and").

    `any_of` (instead of `exprs`): clauses of exprs; the rule holds when every expr of any clause holds ("or" of
    "and"s), as one instance with the rule's labels whose value is the largest first-expr value of the clauses
    that hold (PromQL: `max by (labels) (clause1 or clause2 ...)`).
    """

    name: str
    exprs: tuple[Expr, ...]
    for_: float = 0.0
    keep_firing_for: float = 0.0
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    key: str = ""
    source: str = ""  # expr text as written (threshold rules), copied verbatim into generated rules
    any_of: tuple[tuple[Expr, ...], ...] = ()

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


def builtin_rules(probe_intervals: Mapping[str, float] | None = None, runbooks: str = DEFAULT_TEMPLATE
                  ) -> tuple[Rule, ...]:
    """Return the built-in operational rules; `probe_intervals` (probe -> seconds) sets stale thresholds,
    `runbooks` (runbook_url_template) each rule's runbook_url."""
    out: list[Rule] = []
    for n, e, f, s, t in BUILTIN_ALERTS:
        exprs = stale_exprs(probe_intervals or {}) if e == STALE_EXPR else [("", e)]
        # A per-probe rule carries its probe label too (the series has it anyway): promtool rejects two rules
        # with the same name and labels.
        out.extend(Rule(n, (parse_expr(x),), f, labels=_m(severity=s, probe=probe), source=x,
                        annotations=_m(summary=t, runbook_url=runbook_url(runbooks, n)),
                        key=f"{n}:{probe}" if probe else "") for probe, x in exprs)
    out.extend(Rule(a.name, (parse_expr(a.expr),), a.for_, labels=_m(severity=a.severity),
                    annotations=_m(summary=a.summary, description=a.runbook, runbook_url=runbook_url(runbooks, a.name)),
                    source=a.expr) for a in GPU_ALERTS)
    return tuple(out)


def _budget_query(slo: SLO, sli: str, family: str, scale: str = "") -> str:
    """Return a template query of the least value of one SLI's budgets (several latency budgets: the worst)."""
    return f'{{{{ with query "min(sloguard_slo_{family}{{slo=\'{slo.name}\',sli=\'{sli}\'}}){scale}" }}}}'


def _budget_name(ind: Indicator) -> str:
    return ind.sli if ind.metric is None else f"{ind.sli} ({ind.metric} p{ind.percentile:g})"


def _row_text(ind: Indicator, rule: BurnRule) -> str:
    bw = rule.window
    guard = f" with >= {rule.min_bad} bad" if rule.min_bad is not None else ""
    return f"{_budget_name(ind)} {format_duration(bw.long)}/{format_duration(bw.short)} > {bw.factor:g}x{guard}"


def burn_annotations(slo: SLO, sli: str, severity: str, rows: Sequence[tuple[Indicator, BurnRule]],
                     runbooks: str = DEFAULT_TEMPLATE) -> Mapping[str, str]:
    """Return the annotations of one SLI's burn alert of one severity (shared with the rule generator).

    The summary reads e.g. "SLO ux latency budget burning 62x (page); 91.38% of the 1d budget left (2h 0m 0s
    of data)": the largest long-window burn among the rows that hold, and the least budget left and coverage
    among the SLI's budgets, read from sloguard's own series (sloguard.alerts.template).
    """
    window = format_duration(slo.window)
    left = (_budget_query(slo, sli, "error_budget_remaining_ratio")
            + "{{ . | first | value | humanizePercentage }}{{ end }}")
    data = (_budget_query(slo, sli, "window_coverage_ratio", f" * {slo.window:.10g}")
            + "{{ . | first | value | humanizeDuration }}{{ end }}")
    objectives = ", ".join(sorted({f"{_budget_name(i)} {i.objective * 100:.10g}%" for i, _ in rows}))
    evidence = (f"a row's bad requests must be inconsistent with healthy operation at the objective (< "
                f"{FALSE_PER_30D:g} false firings per row in 30 days)")
    return _m(
        title=f'SLO {slo.name} {sli} budget burning {{{{ $value | printf "%.3g" }}}}x',
        summary=f'SLO {slo.name} {sli} budget burning {{{{ $value | printf "%.3g" }}}}x ({severity}); {left} of the '
                f"{window} budget left ({data} of data)",
        description=f"objective {objectives} over {window}; fires while any row holds ("
                    f"{'; '.join(_row_text(i, r) for i, r in rows)}): both windows burn faster than the factor and "
                    f"{evidence}",
        objective=repr(float(rows[0][0].objective)) if len({i.objective for i, _ in rows}) == 1 else "",
        runbook_url=slo.runbook_url or runbook_url(runbooks, BURN_ALERT), dashboard_url=slo.dashboard_url)


def burn_labels(slo: SLO, sli: str, severity: str) -> Mapping[str, str]:
    """Return the labels of one SLI's burn alert of one severity (shared with the rule generator)."""
    return _m(severity=severity, slo=slo.name, sli=sli)


def burn_plans(slo: SLO) -> list[tuple[Indicator, BurnRule]]:
    """Return every (budget, row) both alerting paths emit for an SLO: rows that can mean something."""
    return [(ind, rule) for ind in indicators(slo) for rule in plan(slo.window, ind.objective, slo.probe_rate)
            if rule.alertable]


BurnGroup = tuple[str, str, tuple[tuple[Indicator, BurnRule], ...]]  # (sli, severity, rows)


def burn_groups(slo: SLO) -> list[BurnGroup]:
    """Return one (sli, severity, rows) per burn alert: an SLO pages (and tickets) once per SLI, whatever the rows."""
    groups: dict[tuple[str, str], list[tuple[Indicator, BurnRule]]] = {}
    for ind, rule in burn_plans(slo):
        groups.setdefault((ind.sli, rule.window.severity), []).append((ind, rule))
    return [(sli, sev, tuple(rows)) for (sli, sev), rows in groups.items()]


def burn_hold(rows: Sequence[tuple[Indicator, BurnRule]]) -> float:
    """Return how long a burn alert keeps firing after its rows clear: its shortest short window.

    A burn hovering at the factor crosses it both ways within one short window (the alert's own reset time);
    held that long, it pages once, not fire/resolve/fire. The resolve comes at most one short window later.
    """
    return min(rule.window.short for _, rule in rows)


def burn_key(slo: str, sli: str, severity: str) -> str:
    """Return the rule key of one SLI's burn alert of one severity (unique per alert, so states never mix)."""
    return f"{BURN_ALERT}:{slo}:{sli}:{severity}"


def _selector(family: str, slo: SLO, ind: Indicator, window: float) -> str:
    labels = {"slo": slo.name, **{"metric": "", "percentile": ""}, **ind.labels(), "window": format_duration(window)}
    return f"sloguard_slo_{family}{{{','.join(f'{k}={json.dumps(v)}' for k, v in labels.items())}}}"


def _clause(slo: SLO, ind: Indicator, rule: BurnRule) -> tuple[Expr, ...]:
    bw = rule.window
    return (parse_expr(f"{_selector('burn_rate', slo, ind, bw.long)} > {bw.factor!r}"),
            parse_expr(f"{_selector('burn_rate', slo, ind, bw.short)} > {bw.factor!r}"),
            parse_expr(f"{_selector('burn_evidence_ratio', slo, ind, bw.long)} >= 1"))


def burn_rules(slo: SLO, runbooks: str = DEFAULT_TEMPLATE) -> tuple[Rule, ...]:
    """Return one rule per SLI and severity: any of its rows with both burns above the factor and evidence."""
    return tuple(Rule(BURN_ALERT, (), keep_firing_for=burn_hold(rows), labels=burn_labels(slo, sli, sev),
                      annotations=burn_annotations(slo, sli, sev, rows, runbooks), key=burn_key(slo.name, sli, sev),
                      any_of=tuple(_clause(slo, ind, rule) for ind, rule in rows))
                 for sli, sev, rows in burn_groups(slo))


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
        rules.extend(builtin_rules(probe_intervals(cfg), cfg.runbook_url_template))
    rules.extend(guard_rules(cfg))
    for slo in slos_from_config(cfg):
        rules.extend(burn_rules(slo, cfg.runbook_url_template))
    return tuple(rules)
