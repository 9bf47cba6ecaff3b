"""What each burn-rate row can detect at the configured probe rate: the lines `sloguard check` prints.

Per SLO budget and row: the bad requests the guard needs in the long window (k_min of the n the schedule
puts there), the smallest sustained burn the row detects (max(factor, k_min / (n × p0))) and, per budget,
the expected time from the start of a sustained 14.4× burn to the first page (sloguard.slo.burnrate
BurnRule.time_to_fire, the fastest page row). Warnings: rows that can never fire (skipped by the live
engine and the generated rules alike) and rows whose statistics alone would fire on one bad request.
"""

from __future__ import annotations

from sloguard.config.spec import Config
from sloguard.config.units import format_duration
from sloguard.slo.burnrate import MIN_BAD, BurnRule, Z, plan
from sloguard.slo.model import SLO, Indicator, indicators, slos_from_config

PAGE_BURN = 14.4


def _budget(ind: Indicator) -> str:
    what = ind.sli if ind.metric is None else f"{ind.sli} ({ind.metric} p{ind.percentile:g})"
    return f"{what} {ind.objective * 100:.10g}%" + (" (implicit: no error_rate or goodput)" if ind.implicit else "")


def _dur(seconds: float) -> str:
    if seconds >= 5400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 60:.1f}m" if seconds >= 60 else f"{seconds:.0f}s"


def _row(rule: BurnRule) -> str:
    w = rule.window
    head = f"{w.severity} {format_duration(w.long)}/{format_duration(w.short)} {w.factor:g}x"
    if rule.meaning == "never":
        return f"{head}: never fires ({rule.why}); skipped"
    if rule.min_bad is None:
        return f"{head}: needs bad >= max({MIN_BAD}, n*p0 + {Z:.3g}*sqrt(n*p0*(1-p0))) of the n requests observed"
    smallest = rule.smallest_burn() or w.factor
    return (f"{head}: needs >= {rule.min_bad} bad of ~{rule.expected_long:.0f} requests in "
            f"{format_duration(w.long)}; detects sustained burns >= {smallest:.3g}x")


def _warnings(slo: SLO, ind: Indicator, rules: tuple[BurnRule, ...]) -> list[str]:
    out = []
    for r in rules:
        w = r.window
        row = f"{w.severity} {format_duration(w.long)}/{format_duration(w.short)}"
        if r.meaning == "never":
            out.append(f"warning: slo {slo.name} {_budget(ind)}: {row} can never fire: {r.why}")
        elif r.meaning == "one-failure":
            out.append(f"warning: slo {slo.name} {_budget(ind)}: {row} would fire on one failure at this probe "
                       f"rate (held at {MIN_BAD} bad requests): probe more often or relax the objective")
    if not any(r.alertable and r.window.severity == "page" for r in rules):
        out.append(f"warning: slo {slo.name} {_budget(ind)}: no page row can fire")
    return out


def _time_to_page(rules: tuple[BurnRule, ...]) -> str:
    times = [t for r in rules if r.alertable and r.window.severity == "page"
             if (t := r.time_to_fire(PAGE_BURN)) is not None]
    return f"a {PAGE_BURN:g}x burn pages in ~{_dur(min(times))}" if times else f"a {PAGE_BURN:g}x burn never pages"


def detection_lines(slo: SLO) -> tuple[list[str], list[str]]:
    """Return (report lines, warnings) for one SLO."""
    rate = "no probe schedule" if not slo.probe_rate else f"{slo.probe_rate * 86400:.4g} probe requests/day"
    source = "server histograms" if slo.source == "server" else rate
    lines, warnings = [f"slo {slo.name} ({format_duration(slo.window)} window, {source}):"], []
    for ind in indicators(slo):
        rules = plan(slo.window, ind.objective, slo.probe_rate)
        timing = f"; {_time_to_page(rules)}" if slo.probe_rate else ""
        lines.append(f"  {_budget(ind)}{timing}")
        lines += [f"    {_row(r)}" for r in rules]
        warnings += _warnings(slo, ind, rules)
    return lines, warnings


def report(cfg: Config) -> tuple[list[str], list[str]]:
    """Return the detection report and warnings of every SLO of a config."""
    lines: list[str] = []
    warnings: list[str] = []
    for slo in slos_from_config(cfg):
        more, warn = detection_lines(slo)
        lines += more
        warnings += warn
    return lines, warnings
