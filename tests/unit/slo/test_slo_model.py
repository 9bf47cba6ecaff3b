"""The config -> internal SLO mapping and the budget objective rules."""

from __future__ import annotations

from typing import Any

import pytest

from sloguard.config.spec import Config
from sloguard.slo.burnrate import BURN_WINDOWS, STANDARD_WINDOWS
from sloguard.slo.model import DEFAULT_SUCCESS_OBJECTIVE, budget_objective, budget_sli, slos_from_config


def _cfg(**slo: Any) -> Config:
    base: dict[str, Any] = {"name": "s", "target": "chat"}
    return Config.model_validate({"version": "sloguard/v1", "slos": [{**base, **slo}]})


def test_maps_every_field() -> None:
    cfg = _cfg(
        probe="p1", objectives=[{"metric": "ttft", "percentile": 95, "threshold": "1s"}],
        goodput={"ttft": "500ms", "tpot": "100ms", "target": 0.99}, error_budget_window="7d",
        budgets={"queue": "100ms"}, segment_by="prompt_bucket", runbook_url="http://rb",
    )
    (slo,) = slos_from_config(cfg)
    assert (slo.name, slo.target, slo.probe, slo.source) == ("s", "chat", "p1", "probe")
    assert slo.objectives[0].quantile == pytest.approx(0.95)
    assert slo.objectives[0].threshold == pytest.approx(1.0)
    assert slo.goodput is not None and slo.goodput.thresholds() == (("ttft", 0.5), ("tpot", 0.1))
    assert slo.window == 7 * 86400.0 and slo.windows == tuple(sorted({*STANDARD_WINDOWS, 7 * 86400.0}))
    assert dict(slo.budgets) == {"queue": pytest.approx(0.1)}
    assert slo.segment_by == "prompt_bucket" and slo.runbook_url == "http://rb"


@pytest.mark.parametrize(
    ("extra", "objective", "sli"),
    [
        ({"goodput": {"ttft": "1s", "target": 0.95}}, 0.95, "goodput"),
        ({"goodput": {"ttft": "1s", "target": 0.95}, "error_rate": {"target": 0.999}}, 0.999, "success"),
        ({"error_rate": {"target": 0.995}}, 0.995, "success"),
        ({}, DEFAULT_SUCCESS_OBJECTIVE, "success"),
    ],
)
def test_budget_objective(extra: dict[str, Any], objective: float, sli: str) -> None:
    (slo,) = slos_from_config(_cfg(**extra))
    assert budget_objective(slo) == pytest.approx(objective)
    assert budget_sli(slo) == sli


@pytest.mark.parametrize(("window_days", "alertable"), [
    (30, [True, True, True, True]),
    (28, [True, True, True, False]),  # 3d/6h: 0.933×
    (7, [True, True, False, False]),  # 3.36×, 1.4×, 0.7×, 0.233×
    (1, [False, False, False, False]),  # 0.48×, 0.2×, 0.1×, 0.033×
])
def test_burn_rows_below_one_x_are_not_alertable(window_days: int, alertable: list[bool]) -> None:
    rows = [bw.alertable(window_days * 86400.0) for bw in BURN_WINDOWS]
    assert rows == alertable
    assert rows == [bw.factor(window_days * 86400.0) >= 1 for bw in BURN_WINDOWS]
