"""Stage-budget alerts: p95 over budget only with the burn alerts' evidence guard; owners; same rule both paths."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
import yaml

from sloguard.alerts import engine
from sloguard.alerts.rules import rules_from_config
from sloguard.config.spec import Config
from sloguard.guardrails.stagebudget import StageBudgets, breach, from_histogram, from_values
from sloguard.model import Histogram, ProbeResult, Sample
from sloguard.rulegen.prometheus import ALERTS, generate
from sloguard.slo.evaluate import scheduled_min_bad
from sloguard.slo.model import slos_from_config
from sloguard.windows.probe import ProbeWindow


class Values:
    """A window view over plain values (numpy linear percentiles, as the exact probe windows)."""

    def __init__(self, values: Sequence[float]) -> None:
        self.values = np.array(values, dtype=float)

    def population(self, metric: str) -> int:
        return len(self.values)

    def quantiles(self, metric: str, qs: Sequence[float]) -> tuple[float, ...] | None:
        return tuple(float(v) for v in np.percentile(self.values, [q * 100 for q in qs])) if len(self.values) else None


@pytest.mark.parametrize(("above", "k_min", "evidence_holds"), [
    (5, 5, True),  # exactly k_min requests above the budget: the k_min-th largest is above it
    (4, 5, False),
    (0, 5, False),
    (30, 19, True),
])
def test_evidence_is_the_k_min_th_largest_value(above: int, k_min: int, evidence_holds: bool) -> None:
    values = [0.1] * (120 - above) + [0.5] * above  # budget 0.2
    p95, evidence = from_values(Values(values), "ttft", 0.2, k_min)
    assert evidence is not None and (evidence > 1.0) is evidence_holds
    assert p95 == pytest.approx(float(np.percentile(values, 95)))


def test_too_few_requests_for_the_guard_is_no_evidence() -> None:
    assert from_values(Values([0.5, 0.5]), "ttft", 0.2, 5) == (0.5, 0.0)
    assert from_values(Values([]), "ttft", 0.2, 5) == (None, None)


@pytest.mark.parametrize(("p95", "evidence", "expected"), [
    (0.4, 2.0, 2.0), (0.4, 0.9, 1.0), (0.4, None, 1.0), (0.1, 3.0, 0.5), (None, 3.0, None),
])
def test_breach_needs_both(p95: float | None, evidence: float | None, expected: float | None) -> None:
    assert breach(p95, evidence, 0.2) == expected


def test_histogram_evidence_counts_observations_above_the_budget() -> None:
    # 1000 queue observations, 200 above 0.2 s: p95 in the (0.2, 0.5] bucket
    h = Histogram(((0.1, 700.0), (0.2, 800.0), (0.5, 1000.0), (float("inf"), 1000.0)), 1000.0, 150.0)
    p95, evidence = from_histogram(h, 0.2)
    assert p95 is not None and 0.2 < p95 <= 0.5
    assert evidence is not None and evidence > 1.0  # 200 above vs 50 expected (+4.75 sigma ~ 83)


def _cfg(budgets: dict[str, object], interval: str = "10s", builtin: bool = True) -> Config:
    return Config.model_validate({"version": "sloguard/v1", "builtin_alerts": builtin,
                                  "targets": [{"name": "t", "api_url": "http://x"}],
                                  "probes": [{"name": "p", "target": "t", "interval": interval, "timeout": "5s"}],
                                  "slos": [{"name": "s", "target": "t", "budgets": budgets}]})


def _fill(window: ProbeWindow, ttfts: Sequence[float], start: float, step: float) -> None:
    for i, ttft in enumerate(ttfts):
        window.add(ProbeResult(start + i * step, "p", "t", "m", "chat", True, ttft_s=ttft, e2e_s=ttft + 0.5,
                               connect_s=0.0), True)


@pytest.mark.parametrize(("slow", "fires"), [
    (0, False),
    (15, False),  # p95 is over the budget (15 of 180 > 5 %), but healthy operation gets there too often
    (25, True),  # k_min: the schedule's 180 requests in 30 minutes need 25 above the budget
])
def test_status_over_a_real_probe_window(slow: int, fires: bool) -> None:
    cfg = _cfg({"ttft": {"p95": "200ms", "owner": "inference-team", "window": "30m"}, "queue": "1s"})
    (slo,) = slos_from_config(cfg)
    assert scheduled_min_bad(0.1, 1800.0, 0.05) == 25
    window = ProbeWindow(slo.window)
    _fill(window, [0.05] * (180 - slow) + [0.4] * slow, 1000.0, 10.0)
    budgets = StageBudgets(cfg)
    (st,) = budgets.evaluate([slo], {"s": window}, None, 1000.0 + 1799.0)  # no server: queue has no series
    assert (st.stage, st.source, st.window) == ("ttft", "probe", 1800.0)
    assert st.p95 is not None and (st.p95 > 0.2) is (slow > 9)
    assert st.breach is not None and (st.breach > 1.0) is fires
    series = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in budgets.families() for s in f.samples}
    assert series[("sloguard_stage_budget_owner_info", (("owner", "inference-team"), ("slo", "s"),
                                                        ("stage", "ttft")))] == 1.0


def test_rules_one_per_budget_with_owner_and_for() -> None:
    cfg = _cfg({"queue": {"p95": "200ms", "owner": "inference-team", "for": "15m", "severity": "page"},
                "network": "50ms"})
    rules = {r.key: r for r in rules_from_config(cfg) if r.name == "SloguardStageBudgetOverrun"}
    queue, network = rules["SloguardStageBudgetOverrun:s:queue"], rules["SloguardStageBudgetOverrun:s:network"]
    assert queue.source == 'sloguard_stage_budget_breach_ratio{slo="s",stage="queue",window="1h"} > 1'
    assert queue.for_ == 900.0 and dict(queue.labels) == {"severity": "page", "slo": "s", "stage": "queue",
                                                           "owner": "inference-team"}
    assert "owner" not in network.labels and network.for_ == 600.0  # the short form takes the defaults
    assert not [r for r in rules_from_config(_cfg({"queue": "1s"}, builtin=False)) if r.name.startswith("SloguardSt")]
    samples = [Sample("sloguard_stage_budget_breach_ratio", {"slo": "s", "stage": "queue", "window": "1h"}, 1.8)]
    active, _ = engine.evaluate([queue], {}, samples, 0.0)
    active, events = engine.evaluate([queue], active, samples, 900.0)
    (alert,) = active.values()
    assert alert.state == "firing" and events[0].kind == "firing"
    assert dict(alert.annotations)["summary"] == "SLO s stage queue: p95 is 1.80x its 200ms budget over 1h " \
                                                 "(owner inference-team)"


def test_generated_stage_rules_match_and_pass_promtool(tmp_path: Path) -> None:
    cfg = _cfg({"queue": {"p95": "200ms", "owner": "inference-team"}, "ttft": "1s"})
    gen = [r for g in yaml.safe_load(generate(cfg)[ALERTS])["groups"] for r in g["rules"]
           if r["alert"] == "SloguardStageBudgetOverrun"]
    live = [r for r in rules_from_config(cfg) if r.name == "SloguardStageBudgetOverrun"]
    assert [(r["expr"], r["labels"]) for r in gen] == [(r.source, dict(r.labels)) for r in live]
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool missing: scripts/setup.sh installs it"
    (tmp_path / "r.yaml").write_text(generate(cfg)[ALERTS])
    done = subprocess.run([promtool, "check", "rules", str(tmp_path / "r.yaml")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
