"""`sloguard check` rejects alert expressions over names and label names sloguard never exports (issue 46, found 6),
knowing exactly what the exporter declares (sloguard.catalog): no hand-written list to drift."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.core import GaugeMetricFamily
from support.exposition import unknown_to_check

from sloguard import catalog
from sloguard.cli import main
from sloguard.config.load import ConfigError, parse_config

BASE: dict[str, Any] = {
    "version": "sloguard/v1",
    "targets": [{"name": "chat", "engine": "vllm", "metrics_url": "http://127.0.0.1:8000/metrics",
                 "api_url": "http://127.0.0.1:8000", "model": "m"}],
    "probes": [{"name": "p", "target": "chat", "interval": "30s", "timeout": "20s"}],
    "slos": [{"name": "chat-latency", "target": "chat",
              "objectives": [{"metric": "ttft", "percentile": 95, "threshold": "1s"}]}],
}


def _errors(*exprs: str) -> list[str]:
    doc = {**BASE, "alerts": [{"name": f"A{i}", "expr": e} for i, e in enumerate(exprs)]}
    try:
        parse_config(doc)
    except ConfigError as exc:
        return exc.errors
    return []


# Each passes today's main with exit 0 and can never fire.
@pytest.mark.parametrize(("expr", "want"), [
    ('sloguard_slo_quantile_seconds{slo_name="chat-latency",metric="ttft",quantile="0.95",window="5m"} > 2',
     "alerts[0].expr: sloguard_slo_quantile_seconds has no label slo_name; did you mean slo? (its labels: slo, "
     "metric, window, prompt_bucket, quantile)"),
    ('sloguard_slo_ttft_p95_seconds{slo="chat-latency"} > 2',
     'alerts[0].expr: sloguard does not export sloguard_slo_ttft_p95_seconds; quantiles are one family: '
     'sloguard_slo_quantile_seconds{metric="ttft",quantile="0.95",window="5m"} (known: sloguard_slo_burn_evidence_'),
    ('sloguard_probe_requests{outcome="timeout"} > 0',  # a counter's series ends in _total
     "alerts[0].expr: sloguard does not export sloguard_probe_requests; did you mean sloguard_probe_requests_total?"),
    ('sloguard_probe_requests_total{job="sloguard"} > 0',
     "alerts[0].expr: sloguard_probe_requests_total has no label job (Prometheus adds it when it scrapes; "
     "sloguard's own rule engine never sees it)"),
    ('up{job="sloguard"} == 0', "alerts[0].expr: sloguard does not export up (its own rule engine sees only"),
    ('sloguard_probe_ttft_seconds_bucket{quantile="0.5"} > 0',
     "alerts[0].expr: sloguard_probe_ttft_seconds_bucket has no label quantile"),
])
def test_unknown_names_and_labels_are_rejected(expr: str, want: str) -> None:
    (got,) = _errors(expr)
    assert got.startswith(want), got


@pytest.mark.parametrize("expr", [
    'sloguard_slo_quantile_seconds{slo="chat-latency",metric="ttft",quantile="0.95",window="5m"} > 2',
    'sloguard_probe_ttft_seconds_bucket{le="0.5",probe="p"} > 0',
    'sloguard_build_info{version=~".+"} == 1',
    'sloguard_release_info{label_team="x"} == 1',  # targets[].labels become label_<key>
    'sloguard_gpu_sm_clock_hertz{uuid=~"GPU-.*"} < 1e9',
    'sloguard_gpu_mig_sm_active_ratio{mig_uuid=~".+"} > 0.9',
])
def test_exported_names_and_labels_pass(expr: str) -> None:
    assert _errors(expr) == []


def test_every_declared_series_and_label_is_accepted() -> None:
    """Whatever the exporter declares, check takes: each series with a matcher on each of its labels."""
    def selector(labels: tuple[str, ...]) -> str:
        return ",".join(f'{lab.replace("*", "x")}=~".*"' for lab in labels)

    exprs = [f"{name}{{{selector(labels)}}} >= 0" for name, labels in sorted(catalog.series().items())]
    assert len(exprs) > 150
    assert _errors(*exprs) == []


def test_a_family_nobody_declared_is_caught_by_the_exposition_checks() -> None:
    """The guard behind every promtool-checked exposition in the suite (support.exposition)."""
    new = GaugeMetricFamily("sloguard_brand_new_ratio", "x", labels=["slo"])
    new.add_metric(["a"], 1.0)
    odd = GaugeMetricFamily("sloguard_slo_burn_rate", "x", labels=["slo", "tenant"])
    odd.add_metric(["a", "b"], 1.0)
    assert unknown_to_check([new, odd]) == [
        "sloguard_brand_new_ratio: not declared (sloguard.families.declare)",
        "sloguard_slo_burn_rate: label tenant not declared"]


def test_a_family_declared_outside_the_producers_is_not_known() -> None:
    """A module that declares families but is missing from catalog.PRODUCERS: a fresh `check` never imports it."""
    from sloguard.families import declare

    stray = declare("sloguard_stray_test_ratio", "gauge", "declared by a test module")
    fam = stray.gauge()
    fam.add_metric([], 1.0)
    assert unknown_to_check([fam]) == ["sloguard_stray_test_ratio: not declared (sloguard.families.declare)"]


def test_check_exits_2_and_names_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {**BASE, "state_dir": str(tmp_path / "state"),
           "alerts": [{"name": "A", "expr": 'sloguard_slo_burn_rate{slo_name="chat-latency"} > 1'}]}
    path = tmp_path / "sloguard.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["check", "-c", str(path)]) == 2
    assert "has no label slo_name; did you mean slo?" in capsys.readouterr().err


def test_every_rule_sloguard_builds_selects_declared_series() -> None:
    """Built-in, guardrail, check, stage-budget and burn-rate rules are held to the same names as a user's."""
    from sloguard.alerts.rules import rules_from_config
    from sloguard.config.labels import unknown_names

    doc = {**BASE, "slos": [{**BASE["slos"][0], "goodput": {"ttft": "1s", "target": 0.99},
                             "error_rate": {"target": 0.99}, "budgets": {"queue": "100ms"}}],
           "targets": [{**BASE["targets"][0], "guardrails": {"prefix_cache_hit_ratio": {},
                                                             "busy_gpu_empty_queue": {}}}],
           "probes": [*BASE["probes"], {"name": "abort", "target": "chat", "kind": "abort", "interval": "5m",
                                        "timeout": "20s"}]}
    rules = rules_from_config(parse_config(doc))
    series = catalog.series()
    assert len(rules) > 10
    problems = [f"{r.name}: {line}" for r in rules for e in r.exprs for line in unknown_names(e.metric, e.matchers,
                                                                                               series)]
    assert problems == []


def test_producers_lists_every_module_that_declares() -> None:
    import sloguard.daemon
    import sloguard.gpu.dcgm_source
    import sloguard.gpu.nvml
    import sloguard.gpu.verdict  # noqa: F401
    from sloguard.families import ORIGINS

    declaring = set().union(*ORIGINS.values()) - {__name__}
    assert declaring == set(catalog.PRODUCERS)
