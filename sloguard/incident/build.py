"""Build the incident model from one evaluation: SLO status, its verdict, its failures, then the alerts (pure)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sloguard.alerts.engine import Alert
from sloguard.alerts.rules import BURN_ALERT
from sloguard.config.units import format_duration
from sloguard.incident.model import BreachView, Event, Severity, SLIView, SLOView, StageView, State, Why
from sloguard.incident.replicas import worst_replicas
from sloguard.slo.breach import Breach, breach_window, breaches, in_breach
from sloguard.slo.result import SLOStatus, StageStatus
from sloguard.slo.rows import RowState, row_states
from sloguard.slo.stages import PART_OF
from sloguard.slo.status import percent, seconds

NAMED = frozenset({"none", "unknown", ""})  # causes that name nothing
PAGING = ("page", "critical")


def breach_text(b: Breach) -> str:
    """Return one breach as people read it: `p95 ttft 1.34s > 800ms`, `goodput 70.0% < 95.0%`."""
    if b.kind in ("goodput", "availability"):
        return f"{b.name} {percent(b.value)} < {percent(b.threshold)}"
    what = f"p{(b.quantile or 0) * 100:g} {b.name}" if b.kind == "objective" else f"stage {b.name} p95"
    if b.censored:
        return (f"{what} ≥ {seconds(b.value)}: {b.cut_short} of {b.count} requests cut short could put it over "
                f"{seconds(b.threshold)}")
    return f"{what} {seconds(b.value)} > {seconds(b.threshold)}" + (" budget" if b.kind == "budget" else "")


def _state(status: SLOStatus, found: Sequence[Breach], window: float) -> State:
    if in_breach(found):
        return "BREACH"
    if found:
        return "OVER BUDGET"
    at = next((w for w in status.windows if w.window == window and not w.segment), None)
    return "OK" if at is not None and at.requests > 0 else "NO DATA"


def _whole_p95(status: SLOStatus, whole: str, window: float) -> float | None:
    """Return the p95 every surface shows for a whole (its objective's value, else its stage row's)."""
    obj = next((o.value for o in status.objectives if o.metric == whole and o.window == window and not o.segment
                and o.percentile == 95 and o.value is not None), None)
    if obj is not None:
        return obj
    return next((s.p95 for s in status.stages if s.stage == whole and s.window == window and not s.segment), None)


def _stage(status: SLOStatus, s: StageStatus, window: float) -> StageView | None:
    if s.p95 is None:
        return None
    whole = PART_OF.get(s.stage)
    cap = _whole_p95(status, whole, window) if whole else None
    p95 = min(s.p95, cap) if cap is not None else s.p95
    over = bool(s.budget) and (s.resolution[1][0] if s.resolution else p95) > (s.budget or math.inf)
    return StageView(s.stage, p95, s.budget, over, s.bounded or p95 < s.p95, s.source)


def stages(status: SLOStatus, window: float) -> tuple[StageView, ...]:
    """Return the breach window's stages, each no larger than its whole as shown (queue ≤ TTFT)."""
    rows = [_stage(status, s, window) for s in status.stages if s.window == window and not s.segment]
    return tuple(r for r in rows if r is not None)


def worst_stage(shown: Sequence[StageView]) -> str | None:
    """Return the stage most over its budget over the window shown; None when none is over."""
    over = [s for s in shown if s.over and s.budget]
    return max(over, key=lambda s: s.p95 / (s.budget or 1.0)).stage if over else None


def _row_text(r: RowState) -> str:
    name = r.indicator.sli if r.indicator.metric is None else f"{r.indicator.metric} p{r.indicator.percentile:g}"
    w = r.rule.window
    return (f"{name} {format_duration(w.long)}/{format_duration(w.short)}: {r.burn_long or 0:.3g}x "
            f"({w.severity} above {w.factor:g}x)")


def _sli(status: SLOStatus, sli: str, rows: Sequence[RowState]) -> SLIView:
    budgets = [b for b in status.budgets if b.indicator.sli == sli]
    left = min((b.remaining for b in budgets if b.remaining is not None), default=None)
    covered = max((b.covered for b in budgets), default=0.0)
    mine = [r for r in rows if r.indicator.sli == sli]
    firing = [r for r in mine if r.fires]
    sev = "page" if any(r.rule.window.severity == "page" for r in firing) else ("ticket" if firing else "")
    shown = [r for r in firing if r.rule.window.severity == sev] if sev else \
        [r for r in mine if r.rule.window.severity == "page"] or mine
    best = max(shown, key=lambda r: (r.burn_long if r.burn_long is not None else -1.0), default=None)
    burn = best.burn_long if best is not None else None
    window = format_duration(best.rule.window.long) if best is not None else ""
    return SLIView(sli, left, covered, burn, window, rows=tuple(_row_text(r) for r in shown if r.fires))


def failures_text(failures: Sequence[tuple[str, int]], window: str) -> str:
    """Return failed requests by kind: `failures over 5m: 12 timeout, 3 HTTP 503`."""
    if not failures:
        return f"no failed request over {window}"
    return f"failures over {window}: " + ", ".join(f"{n} {kind}" for kind, n in failures)


def _learning(s: float) -> str:
    return f"~{max(5, math.ceil(s / 5) * 5)} s" if s < 120 else f"~{math.ceil(s / 60)} min"


def why(verdict: Mapping[str, Any] | None, found: Sequence[Breach], failures: Sequence[tuple[str, int]],
        window: str, learning_s: float, enabled: bool) -> Why:
    """Return the one "where / why" line every surface shows: the verdict, the failures, or why there is none yet."""
    failed = failures_text(failures, window) if any(b.kind == "availability" for b in found) else ""
    if not enabled or verdict is None:
        return Why("off", failed or ("diagnosis off (diagnose.enabled: false)" if not enabled
                                     else "diagnosis not evaluated yet"))
    cause = str(verdict.get("cause") or "")
    conf = verdict.get("confidence")
    base = Why("none", "", cause, str(verdict.get("stage") or ""), str(verdict.get("lever") or ""),
               float(conf) if isinstance(conf, int | float) else None,
               tuple(str(e) for e in verdict.get("evidence_text") or ()),
               tuple(str(m) for m in verdict.get("missing") or ()), learning_s)
    summary = str(verdict.get("summary") or cause)
    if cause not in NAMED:
        return replace(base, kind="verdict", text=f"{failed}; {summary}" if failed else summary)
    if learning_s > 0:
        text = f"diagnosis learning baselines: ready in {_learning(learning_s)}"
        return replace(base, kind="learning", text=f"{failed}; {text}" if failed else text)
    if failed:
        return replace(base, kind="failures", text=failed)
    if cause == "unknown":
        return replace(base, kind="verdict", text=summary)
    if any(b.kind != "availability" for b in found):
        return replace(base, text="no verdict yet for the breach")
    return replace(base, text=f"none: every objective and stage budget holds over the last {window}")


def build(status: SLOStatus, verdict: Mapping[str, Any] | None, failures: Mapping[str, int], learning_s: float,
          enabled: bool = True) -> SLOView:
    """Return one SLO's view from its status, its verdict JSON (Diagnoser.json), failures by kind, learning ETA."""
    slo = status.slo
    w = breach_window(slo)
    found = breaches(status, w)
    shown = stages(status, w)
    rows = row_states(status, alertable_only=True)
    slis = tuple(_sli(status, sli, rows) for sli in dict.fromkeys(r.indicator.sli for r in rows))
    fails = tuple(sorted(failures.items(), key=lambda kv: -kv[1]))
    at = next((x for x in status.windows if x.window == w and not x.segment), None)
    return SLOView(
        name=slo.name, target=slo.target, source=slo.source, window=format_duration(w),
        slo_window=format_duration(slo.window), state=_state(status, found, w),
        requests=int(at.requests) if at is not None else 0,
        breaches=tuple(BreachView(b.kind, b.name, b.value, b.threshold, breach_text(b), b.censored, b.cut_short)
                       for b in found),
        slis=slis, stages=shown, worst_stage=worst_stage(shown),
        why=why(verdict, found, fails, format_duration(w), learning_s, enabled), failures=fails,
        evaluated_at=status.now, runbook_url=slo.runbook_url, dashboard_url=slo.dashboard_url,
        replicas=worst_replicas(status, verdict))


def _severity(labels: Mapping[str, str]) -> Severity:
    sev = labels.get("severity", "")
    return "page" if sev in PAGING else ("ticket" if sev == "ticket" else "")


def with_alerts(view: SLOView, alerts: Sequence[Alert], held: Collection[str], timeline: tuple[Event, ...]
                ) -> SLOView:
    """Return the view with the severity its firing alerts give it (page over ticket) and its timeline."""
    mine = [a for a in alerts if a.state == "firing" and dict(a.labels).get("slo") == view.name]
    sev: Severity = "page" if any(_severity(dict(a.labels)) == "page" for a in mine) else (
        "ticket" if any(_severity(dict(a.labels)) == "ticket" for a in mine) else "")
    slis = []
    for s in view.slis:
        burn = [a for a in mine if a.name == BURN_ALERT and dict(a.labels).get("sli") == s.sli]
        got: Severity = max((_severity(dict(a.labels)) for a in burn), key=lambda x: x == "page", default="")
        kept = [a.keep_since for a in burn if _severity(dict(a.labels)) == got]
        cleared = max(t for t in kept if t is not None) if kept and None not in kept else None
        slis.append(replace(s, severity=got, held=any(a.fingerprint in held for a in burn), cleared_at=cleared))
    return replace(view, severity=sev, slis=tuple(slis), timeline=timeline)
