"""Guardrail alerts: one rule per enabled guardrail and target, off by default, same text live and generated."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from sloguard.alerts import engine
from sloguard.alerts.engine import Alert
from sloguard.alerts.rules import rules_from_config
from sloguard.config.spec import Config
from sloguard.guardrails.alerts import CHECK_ALERTS, GUARDRAIL_ALERTS
from sloguard.model import Sample
from sloguard.rulegen.prometheus import ALERTS, generate


def _cfg(guardrails: dict[str, object], builtin: bool = True) -> Config:
    return Config.model_validate({"version": "sloguard/v1", "builtin_alerts": builtin, "targets": [
        {"name": "chat", "guardrails": guardrails}, {"name": "quiet"}]})


def _guard_rules(cfg: Config) -> list[object]:
    return [r for r in rules_from_config(cfg) if r.name in {k.alert for k in GUARDRAIL_ALERTS.values()}]


def test_off_by_default() -> None:
    assert _guard_rules(_cfg({})) == []


@pytest.mark.parametrize(("name", "expr"), [
    ("prefix_cache_hit_ratio", 'sloguard_guardrail_value{guardrail="prefix_cache_hit_ratio",target="chat"} < 0.6'),
    ("spec_decode_acceptance", 'sloguard_guardrail_value{guardrail="spec_decode_acceptance",target="chat"} < 0.5'),
    ("busy_gpu_empty_queue", 'sloguard_guardrail_value{guardrail="busy_gpu_empty_queue",target="chat"} >= 0.9'),
    ("idle_gpu_deep_queue", 'sloguard_guardrail_value{guardrail="idle_gpu_deep_queue",target="chat"} >= 0.9'),
])
def test_each_guardrail_defaults_to_the_seeds(name: str, expr: str) -> None:
    (rule,) = _guard_rules(_cfg({name: {}}, builtin=False))  # enabled per target, whatever builtin_alerts says
    assert rule.source == expr and rule.for_ == 600.0  # type: ignore[attr-defined]
    assert dict(rule.labels) == {"severity": "warning", "guardrail": name}  # type: ignore[attr-defined]
    assert rule.annotations["description"] == GUARDRAIL_ALERTS[name].runbook  # type: ignore[attr-defined]


def _run(values: list[float | None], for_: str) -> list[str]:
    cfg = _cfg({"prefix_cache_hit_ratio": {"below": 0.5, "for": for_, "severity": "page",
                                           "labels": {"owner": "inference-team"}}})
    rules = _guard_rules(cfg)
    active: dict[str, Alert] = {}
    out = []
    for i, v in enumerate(values):
        samples = [] if v is None else [Sample("sloguard_guardrail_value", {
            "target": "chat", "model": "m", "guardrail": "prefix_cache_hit_ratio"}, v)]
        active, events = engine.evaluate(rules, active, samples, 60.0 * i)  # type: ignore[arg-type]
        out.append((next(iter(active.values())).state[0] if active else "-")
                   + "".join("+" if e.kind == "firing" else "!" for e in events))
    return out


@pytest.mark.parametrize(("values", "expected"), [
    ([0.3, 0.3, 0.3, 0.3], ["p", "p", "f+", "f"]),
    ([0.3, 0.7, 0.3, 0.3], ["p", "-", "p", "p"]),  # a good window restarts `for`
    ([0.3, None, 0.3, 0.3], ["p", "-", "p", "p"]),  # no value (too little evidence) is not a breach
])
def test_fires_after_for(values: list[float | None], expected: list[str]) -> None:
    assert _run(values, "2m") == expected


def test_message_carries_value_labels_and_runbook() -> None:
    cfg = _cfg({"prefix_cache_hit_ratio": {"labels": {"owner": "inference-team"}}})
    labels = {"target": "chat", "model": "m", "guardrail": "prefix_cache_hit_ratio"}
    samples = [Sample("sloguard_guardrail_value", labels, 0.42), Sample("sloguard_guardrail_evidence", labels, 48210)]
    active, _ = engine.evaluate(_guard_rules(cfg), {}, samples, 0.0)  # type: ignore[arg-type]
    (alert,) = active.values()
    got, notes = dict(alert.labels), dict(alert.annotations)
    assert got["owner"] == "inference-team" and got["target"] == "chat"
    assert notes["summary"] == ("prefix-cache hit ratio on chat m is 0.42 over 5m (alert < 0.6; the window holds "
                                "48210 prompt tokens)")
    assert "prefix caching" in notes["description"]


def _checks(builtin: bool = True) -> Config:
    return Config.model_validate({"version": "sloguard/v1", "builtin_alerts": builtin, "targets": [
        {"name": "chat", "api_url": "http://x", "metrics_url": "http://x/metrics"}], "probes": [
        {"name": "ab", "target": "chat", "kind": "abort", "within": "3s"},
        {"name": "long", "target": "chat", "kind": "oversized_prompt"},
        {"name": "lat", "target": "chat"}]})


def test_check_alerts_one_per_check_probe_with_the_builtins() -> None:
    names = {"SloguardAbortNotPropagated", "SloguardOversizedPromptMishandled"}
    rules = [r for r in rules_from_config(_checks()) if r.name in names]
    metric = "sloguard_check_consecutive_failures"
    assert [r.source for r in rules] == [f'{metric}{{check="abort",probe="ab"}} >= 2',
                                         f'{metric}{{check="oversized_prompt",probe="long"}} >= 2']
    assert not [r for r in rules_from_config(_checks(builtin=False)) if r.name in names]


@pytest.mark.parametrize(("probe", "series", "expected"), [
    ("ab", {"sloguard_check_seconds": 20.2}, "GPU slots leak on client disconnect: chat failed 2 abort checks in a row "
     "(probe ab; the last request ran on 20.2s after its client left, allowed 3s)"),
    ("long", {"sloguard_check_seconds": 20.0, "sloguard_check_status_code": 200},
     "prompts over the context length are mishandled: chat failed 2 oversized-prompt checks in a row (probe long; "
     "the last answer: HTTP 200 after 20s, allowed 1s)"),
])
def test_check_alert_message_says_what_the_last_check_saw(probe: str, series: dict[str, float],
                                                          expected: str) -> None:
    check = "abort" if probe == "ab" else "oversized_prompt"
    labels = {"probe": probe, "target": "chat", "check": check}
    samples = [Sample("sloguard_check_consecutive_failures", labels, 2.0),
               *(Sample(name, labels, v) for name, v in series.items())]
    active, _ = engine.evaluate(list(rules_from_config(_checks())), {}, samples, 0.0)
    (alert,) = [a for a in active.values() if a.state == "firing"]
    assert dict(alert.annotations)["summary"] == expected


def test_generated_rules_carry_the_same_expression_and_pass_promtool(tmp_path: Path) -> None:
    cfg = _cfg({name: {} for name in GUARDRAIL_ALERTS})
    cfg = cfg.model_copy(update={"probes": _checks().probes})  # the check probes name target "chat" too
    names = {k.alert for k in (*GUARDRAIL_ALERTS.values(), *CHECK_ALERTS.values())}
    generated = [r for g in yaml.safe_load(generate(cfg)[ALERTS])["groups"] for r in g["rules"] if r["alert"] in names]
    live = [r for r in rules_from_config(cfg) if r.name in names]
    assert [(r["expr"], r.get("for")) for r in generated] == [(r.source, "10m" if r.for_ else None) for r in live]
    assert len(live) == 6
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool missing: scripts/setup.sh installs it")
    (tmp_path / "rules.yaml").write_text(generate(cfg)[ALERTS])
    run = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules.yaml")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
