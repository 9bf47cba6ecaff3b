"""Which burn-rate rows hold for an SLO's budgets now: the live alerts' clauses, read back for people."""

from __future__ import annotations

from dataclasses import dataclass

from sloguard.slo.burnrate import BurnRule, plan
from sloguard.slo.model import Indicator, indicators
from sloguard.slo.result import BurnStatus, SLOStatus


@dataclass(frozen=True, slots=True)
class RowState:
    """One (budget, row): its burns over the long and short windows and whether the alert clause holds now."""

    indicator: Indicator
    rule: BurnRule
    burn_long: float | None
    burn_short: float | None
    bad_long: float | None
    min_bad: float | None
    fires: bool


def _state(ind: Indicator, rule: BurnRule, long: BurnStatus | None, short: BurnStatus | None) -> RowState:
    w = rule.window
    lb, sb = (long.burn_rate if long else None), (short.burn_rate if short else None)
    holds = (lb is not None and sb is not None and long is not None and lb > w.factor and sb > w.factor
             and (long.evidence or 0.0) >= 1.0)
    return RowState(ind, rule, lb, sb, long.bad if long else None, long.min_bad if long else rule.min_bad,
                    holds and rule.alertable)


def row_states(st: SLOStatus, ind: Indicator | None = None, alertable_only: bool = False) -> list[RowState]:
    """Return every row of every budget (or of one), as the alert rules (sloguard.alerts.rules) judge them."""
    out = []
    for i in (indicators(st.slo) if ind is None else (ind,)):
        burns = {u.window: u for u in st.burns if u.indicator == i}
        for rule in plan(st.slo.window, i.objective, st.slo.probe_rate):
            if rule.alertable or not alertable_only:
                out.append(_state(i, rule, burns.get(rule.window.long), burns.get(rule.window.short)))
    return out
