"""Rule generation: the live engine's rows, guard and labels; verbatim threshold exprs; CLI."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from sloguard.alerts.rules import BUILTIN_ALERTS, burn_groups, burn_plans, burn_rules
from sloguard.config.spec import Config
from sloguard.gpu.alerts import GPU_ALERTS
from sloguard.rulegen.alertmanager import AM_EXAMPLE
from sloguard.rulegen.cli import main
from sloguard.rulegen.prometheus import ALERTS, SLO_RULES, generate
from sloguard.slo.model import slos_from_config

EXPR = 'sloguard_slo_quantile_seconds{slo="a",metric="ttft",quantile="0.95",window="5m"} > 2'


def config(builtin: bool = True, window: str = "30d", target: float = 0.999, probes: bool = True) -> Config:
    return Config.model_validate({
        "version": "sloguard/v1", "builtin_alerts": builtin,
        "targets": [{"name": "t", "api_url": "http://x"}],
        "probes": [{"name": "p", "target": "t", "interval": "15s"}] if probes else [],
        "slos": [{"name": "a", "target": "t", "error_rate": {"target": target}, "error_budget_window": window,
                  "objectives": [{"metric": "ttft", "percentile": 95, "threshold": "1s"}]},
                 {"name": "srv", "target": "t", "source": "server",
                  "objectives": [{"metric": "queue", "percentile": 95, "threshold": "1s"}]}],
        "alerts": [{"name": "Slow", "expr": EXPR, "for": "5m", "keep_firing_for": "2m"}],
    })


def rules(text: str) -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(text)["groups"] for r in g["rules"]]


def alerting(text: str) -> list[dict[str, Any]]:
    return [r for r in rules(text) if "alert" in r]


def test_recording_rules_come_before_the_alerts_that_read_them_in_one_group() -> None:
    doc = yaml.safe_load(generate(config())[SLO_RULES])
    assert len(doc["groups"]) == 1
    kinds = ["record" if "record" in r else "alert" for r in doc["groups"][0]["rules"]]
    assert kinds == sorted(kinds, key=lambda k: k != "record") and "alert" in kinds


@pytest.mark.parametrize("window", ["30d", "28d", "7d", "1d", "1h"])
def test_burn_alerts_are_the_live_engines_rows(window: str) -> None:
    cfg = config(window=window)
    got = alerting(generate(cfg)[SLO_RULES])
    slos = slos_from_config(cfg)  # the probe SLO and the server SLO: both have burn alerts in Prometheus too
    live = [r for s in slos for r in burn_rules(s)]
    assert {r["labels"]["slo"] for r in got} == {"a", "srv"}
    assert [r["labels"] for r in got] == [dict(r.labels) for r in live]
    assert [r["annotations"] for r in got] == [dict(r.annotations) for r in live]
    groups = [g for s in slos for g in burn_groups(s)]
    for r, (_, _, rows) in zip(got, groups, strict=True):
        clauses = str(r["expr"]).removeprefix("max by (slo, sli) (").split(" or label_replace(")
        assert len(clauses) == len(rows)  # one clause per row, any of which fires the SLI's one alert
        for clause, (ind, plan) in zip(clauses, rows, strict=True):
            f = repr(plan.window.factor)
            assert clause.count(f"> {f}") == 2 and f"{ind.objective!r}" in clause
            guard = f">= {plan.min_bad}, \"row\"" if plan.min_bad is not None else "sqrt("
            assert guard in clause


def test_unscheduled_slo_uses_the_observed_count_clause() -> None:
    got = alerting(generate(config(probes=False))[SLO_RULES])
    assert got and all("sloguard:slo_requests:increase" in r["expr"] and "sqrt(" in r["expr"] for r in got)


@pytest.mark.parametrize(("target", "budget", "shown"), [
    (0.999, "(1 - 0.999)", "0.999"),
    (0.9999995, "(1 - 0.9999995)", "0.9999995"),     # `:g` wrote 1: the rule divided by zero
    (0.99999999999, "(1 - 0.99999999999)", "0.99999999999"),
])
def test_objective_is_written_exactly(target: float, budget: str, shown: str) -> None:
    got = [r for r in alerting(generate(config(target=target))[SLO_RULES]) if r["labels"]["sli"] == "availability"]
    assert got and all(budget in str(r["expr"]) for r in got)
    assert {r["annotations"]["objective"] for r in got} == {shown}


def test_threshold_exprs_are_verbatim_and_builtins_optional() -> None:
    with_builtin = rules(generate(config())[ALERTS])
    assert with_builtin[0] == {"alert": "Slow", "expr": EXPR, "for": "5m", "keep_firing_for": "2m",
                               "labels": {"severity": "warning"}}
    assert [r["alert"] for r in with_builtin[1:]] == [b[0] for b in BUILTIN_ALERTS] + [a.name for a in GPU_ALERTS]
    assert len(rules(generate(config(builtin=False))[ALERTS])) == 1


def test_recording_rules_cover_every_burn_window() -> None:
    cfg = config()
    names = {r["record"] for r in rules(generate(cfg)[SLO_RULES]) if "record" in r}
    for _, plan in burn_plans(slos_from_config(cfg)[0]):
        for w in ("1h", "5m") if plan.window.long == 3600 else ():
            assert f"sloguard:slo_error_ratio:rate{w}" in names
        assert any(n.startswith("sloguard:slo_bad_requests:increase") for n in names)
    assert "sloguard:slo_quantile_seconds:rate5m" in names


def test_cli_writes_files_and_rejects_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parents[3] / "sloguard.example.yaml"
    assert main(["-c", str(example), "-o", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([ALERTS, SLO_RULES, AM_EXAMPLE])
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: sloguard/v1\nalerts: [{name: X, expr: 'rate(m[5m]) > 1'}]\n")
    assert main(["-c", str(bad), "-o", str(tmp_path / "o2")]) == 2
    assert "col 5" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not on PATH")
@pytest.mark.parametrize("probes", [True, False])
def test_generated_slo_rules_pass_promtool(tmp_path: Path, probes: bool) -> None:
    (tmp_path / "r.yaml").write_text(generate(config(probes=probes, window="1d"))[SLO_RULES])
    res = subprocess.run(["promtool", "check", "rules", str(tmp_path / "r.yaml")], capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize(("intervals", "exprs"), [
    ({"fast": "30s"}, ["sloguard_probe_last_success_age_seconds > 600"]),
    ({"fast": "30s", "slow": "10m"}, ['sloguard_probe_last_success_age_seconds{probe!="slow"} > 600',
                                      'sloguard_probe_last_success_age_seconds{probe="slow"} > 1800']),
])
def test_stale_probe_rules_follow_probe_intervals(tmp_path: Path, intervals: dict[str, str],
                                                  exprs: list[str]) -> None:
    cfg = Config.model_validate({"version": "sloguard/v1", "targets": [{"name": "t", "api_url": "http://x"}],
                                 "probes": [{"name": n, "target": "t", "interval": i, "timeout": "20s"}
                                            for n, i in intervals.items()]})
    text = generate(cfg)[ALERTS]
    assert [r["expr"] for r in rules(text) if r["alert"] == "SloguardProbeStale"] == exprs
    if shutil.which("promtool"):  # two rules with one name need distinct labels to pass its lint
        (tmp_path / "r.yaml").write_text(text)
        res = subprocess.run(["promtool", "check", "rules", str(tmp_path / "r.yaml")], capture_output=True,
                             text=True, timeout=60, check=False)
        assert res.returncode == 0, res.stdout + res.stderr


def records(cfg: Config) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in rules(generate(cfg)[SLO_RULES]):
        if "record" in r:
            out.setdefault(r["record"], []).append(str(r["expr"]))
    return out


@pytest.mark.parametrize(("window", "tiled"), [("30d", True), ("28d", True), ("7d", True), ("1d", False)])
def test_long_windows_sum_recorded_5m_counts(window: str, tiled: bool) -> None:
    got = records(config(window=window))
    [expr] = got[f"sloguard:slo_requests_by_good:increase{window}"]
    assert ("sum_over_time(sloguard:slo_requests_by_good:increase5m[" in expr) is tiled
    assert ("sloguard_slo_requests_total" in expr) is not tiled  # a long window never reads the raw series
    if tiled:
        assert expr.endswith("999ms:5m])") and "sloguard:slo_requests_by_good:increase5m" in got
    assert got[f"sloguard:slo_requests:increase{window}"] == [
        f"sum without (good) (sloguard:slo_requests_by_good:increase{window})"]


def test_counts_take_each_engine_replica_once_and_add_probe_series() -> None:
    [expr] = records(config())["sloguard:slo_requests_by_good:increase1h"]
    fleet, own = expr.split(" or sum by ", 1)[0], expr.split(" or sum by ", 2)[-1]
    assert "max by (slo, sli, metric, percentile, good, replica)" in fleet and 'replica!=""' in fleet
    assert 'replica=""' in own and "max by" not in own
    assert "[5m] offset 1h) or min_over_time(" in expr and "resets(" in expr  # exact difference; increase() on a reset


def test_every_budget_has_its_budget_left_record() -> None:
    budgets = records(config())["sloguard:slo_error_budget_remaining:ratio"]
    assert budgets == ['1 - sloguard:slo_error_ratio:rate30d{slo="a",metric="",percentile="",sli="availability"} '
                       "/ (1 - 0.999)",
                       '1 - sloguard:slo_error_ratio:rate30d{slo="a",metric="ttft",percentile="95",sli="latency"} '
                       "/ (1 - 0.95)",
                       '1 - sloguard:slo_error_ratio:rate28d{slo="srv",metric="queue",percentile="95",sli="latency"} '
                       "/ (1 - 0.95)"]
