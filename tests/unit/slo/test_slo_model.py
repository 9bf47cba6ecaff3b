"""The config -> internal SLO mapping and which budgets (SLIs) each SLO gets."""

from __future__ import annotations

from typing import Any

import pytest

from sloguard.config.burnwindows import windows_for
from sloguard.config.spec import Config
from sloguard.slo.model import DEFAULT_SUCCESS_OBJECTIVE, indicators, slos_from_config


def _cfg(probes: list[dict[str, Any]] | None = None, **slo: Any) -> Config:
    base: dict[str, Any] = {"name": "s", "target": "chat"}
    return Config.model_validate({"version": "sloguard/v1", "probes": probes or [], "slos": [{**base, **slo}]})


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
    assert slo.window == 7 * 86400.0 and slo.windows == windows_for(7 * 86400.0)
    assert dict(slo.budgets) == {"queue": pytest.approx(0.1)}
    assert slo.segment_by == "prompt_bucket" and slo.runbook_url == "http://rb"
    assert slo.probe_rate is None  # no probe p1 configured: no schedule


OBJ = [{"metric": "ttft", "percentile": 95, "threshold": "1s"},
       {"metric": "tpot", "percentile": 50, "threshold": "50ms"}]
GP = {"ttft": "1s", "target": 0.95}


# (SLO keys, expected budgets as (sli, objective, metric, implicit))
@pytest.mark.parametrize(("extra", "budgets"), [
    ({"goodput": GP}, [("latency", 0.95, None, False)]),
    ({"goodput": GP, "error_rate": {"target": 0.999}},
     [("availability", 0.999, None, False), ("latency", 0.95, None, False)]),
    ({"error_rate": {"target": 0.995}}, [("availability", 0.995, None, False)]),
    ({"objectives": OBJ, "goodput": GP}, [("latency", 0.95, None, False)]),  # goodput wins over objectives
    # objectives only: one latency budget per objective, plus the implicit availability budget
    ({"objectives": OBJ}, [("availability", DEFAULT_SUCCESS_OBJECTIVE, None, True),
                           ("latency", 0.95, "ttft", False), ("latency", 0.5, "tpot", False)]),
    ({"objectives": OBJ, "error_rate": {"target": 0.9}},
     [("availability", 0.9, None, False), ("latency", 0.95, "ttft", False), ("latency", 0.5, "tpot", False)]),
    ({"source": "server", "objectives": OBJ[:1]}, [("latency", 0.95, "ttft", False)]),
])
def test_indicators(extra: dict[str, Any], budgets: list[tuple[str, float, str | None, bool]]) -> None:
    (slo,) = slos_from_config(_cfg(**extra))
    got = [(i.sli, i.objective, i.metric, i.implicit) for i in indicators(slo)]
    assert got == [(s, pytest.approx(o), m, imp) for s, o, m, imp in budgets]


def test_failures_always_reach_a_budget() -> None:
    """Every valid combination has a budget that a failed request spends (failures never invisible)."""
    for extra in ({"goodput": GP}, {"error_rate": {"target": 0.99}}, {"objectives": OBJ}):
        (slo,) = slos_from_config(_cfg(**extra))
        assert any(i.sli == "availability" or i.metric is None for i in indicators(slo)), extra


def test_labels_name_each_budget() -> None:
    (slo,) = slos_from_config(_cfg(objectives=OBJ))
    assert [i.labels() for i in indicators(slo)] == [
        {"sli": "availability"}, {"sli": "latency", "metric": "ttft", "percentile": "95"},
        {"sli": "latency", "metric": "tpot", "percentile": "50"}]


@pytest.mark.parametrize(("probes", "slo_probe", "rate"), [
    ([{"name": "a", "target": "chat", "interval": "15s"}], None, 1 / 15),
    ([{"name": "a", "target": "chat", "interval": "15s"}, {"name": "b", "target": "chat", "interval": "30s"}],
     None, 1 / 15 + 1 / 30),
    ([{"name": "a", "target": "chat", "interval": "15s"}, {"name": "b", "target": "chat", "interval": "30s"}],
     "b", 1 / 30),
    ([{"name": "a", "target": "other", "interval": "15s"}], None, None),
])
def test_probe_rate_from_schedule(probes: list[dict[str, Any]], slo_probe: str | None, rate: float | None) -> None:
    extra = {"probe": slo_probe} if slo_probe else {}
    (slo,) = slos_from_config(_cfg(probes=probes, goodput=GP, **extra))
    assert slo.probe_rate == (None if rate is None else pytest.approx(rate))
