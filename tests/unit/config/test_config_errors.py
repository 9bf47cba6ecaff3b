"""Every invalid config gets exact `PATH: message` lines; all errors are reported at once."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from sloguard.config.load import ConfigError, format_path, parse_config

ROOT = Path(__file__).resolve().parents[3]

BASE: dict[str, Any] = {
    "version": "sloguard/v1",
    "targets": [{"name": "chat", "engine": "vllm", "metrics_url": "http://127.0.0.1:8000/metrics",
                 "api_url": "http://127.0.0.1:8000", "model": "m"}],
    "probes": [{"name": "p", "target": "chat", "interval": "30s", "timeout": "20s"}],
    "slos": [
        {"name": "s0", "target": "chat", "objectives": [{"metric": "ttft", "percentile": 95, "threshold": "1s"}]},
        {"name": "s1", "target": "chat", "objectives": [{"metric": "tpot", "percentile": 50, "threshold": "100ms"}]},
    ],
    "notifiers": [{"name": "console", "type": "log"}],
}


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    parts = path.replace("]", "").replace("[", ".").split(".")
    node: Any = doc
    for p in parts[:-1]:
        node = node[int(p)] if p.isdigit() else node[p]
    last = parts[-1]
    if value is _DELETE:
        del node[int(last) if last.isdigit() else last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value


class _Delete:
    """Marker: remove the key (a stable repr keeps test ids identical across pytest-xdist workers)."""

    def __repr__(self) -> str:
        return "<delete>"


_DELETE = _Delete()

CASES: list[tuple[str, Any, list[str]]] = [
    ("slos[1].objectives[0].threshold", "0s", ["slos[1].objectives[0].threshold: must be > 0"]),
    ("slos[1].objectives[0].threshold", "-5ms", [
        "slos[1].objectives[0].threshold: invalid duration '-5ms': use a number and a unit "
        "(ms, s, m, h, d, w, y), e.g. '250ms' or '5m'"]),
    ("slos[0].objectives[0].threshold", 1, [
        "slos[0].objectives[0].threshold: ambiguous bare number 1: write a unit, e.g. '1s' or '1ms'"]),
    ("slos[0].objectives[0].percentile", 100, ["slos[0].objectives[0].percentile: must be < 100"]),
    ("slos[0].objectives[0].percentile", 0, ["slos[0].objectives[0].percentile: must be > 0"]),
    ("slos[0].objectives[0].percentile", 0.95, [
        "slos[0].objectives[0].percentile: 0.95 is a percentile in (0, 100), not a quantile: did you mean 95?"]),
    ("slos[0].objectives[0].percentile", 0.999, [
        "slos[0].objectives[0].percentile: 0.999 is a percentile in (0, 100), not a quantile: did you mean 99.9?"]),
    ("slos[0].objectives[0].percentile", 1, [
        "slos[0].objectives[0].percentile: 1 is a percentile in (0, 100), not a quantile: did you mean 99?"]),
    ("slos[0].objectives[0].percentile", 1.5, []),  # the 1.5th percentile is a percentile
    ("slos[0].objectives", [{"metric": "ttft", "percentile": 50 + i, "threshold": "1s"} for i in range(15)], [
        "slos[0].objectives: at most 14 objectives per probe SLO"]),
    ("alerts", [{"name": "A", "expr": 'sloguard_slo_quantile_seconds{slo="chat_ux",window="7m"} > 1'}], [
        'alerts[0].expr: slo="chat_ux" matches no series: sloguard exports slo values s0, s1',
        'alerts[0].expr: window="7m" matches no series: sloguard exports window values 1d, 1h, 1m, 28d, '
        "2h, 30m, 3d, 5m, 6h"]),
    ("alerts", [{"name": "A", "expr": 'sloguard_slo_burn_rate{slo="s0",sli="latncy",window="1h"} > 1'}], [
        'alerts[0].expr: sli="latncy" matches no series: sloguard exports sli values availability, latency']),
    ("alerts", [{"name": "A", "expr": 'sloguard_probe_requests_total{probe="q",target="chat"} > 1'},
                {"name": "B", "expr": 'sloguard_slo_quantile_seconds{metric="e2e",quantile="0.9"} > 1'}], [
        'alerts[0].expr: probe="q" matches no series: sloguard exports probe values p',
        'alerts[1].expr: metric="e2e" matches no series: sloguard exports metric values tpot, ttft']),
    ("alerts", [{"name": "A", "expr": 'sloguard_slo_quantile_seconds{slo="s0",metric="ttft",quantile="0.95",'
                                      'window="5m",prompt_bucket=""} > 1'},
                {"name": "B", "expr": 'sloguard_slo_burn_rate{slo=~"chat_.*",sli!="x"} > 1'}], []),  # regex, negative
    ("slos[0].objectives[0].metric", "latency", [
        "slos[0].objectives[0].metric: must be one of 'ttft', 'ttfot', 'itl', 'tpot', 'e2e', 'queue', "
        "'prefill' or 'decode', got 'latency'"]),
    ("slos[0].objectives[0].unit", "s", ["slos[0].objectives[0].unit: unknown key"]),
    ("version", "sloguard/v2", ["version: must be one of 'sloguard/v1', got 'sloguard/v2'"]),
    ("version", _DELETE, ["version: required key is missing"]),
    ("scrape_everything", True, ["scrape_everything: unknown key"]),
    ("probes[0].target", "nope", ["probes[0].target: unknown target 'nope'"]),
    ("probes[0].timeout", "30s", ["probes[0].timeout: must be < interval (30s >= 30s)"]),
    ("probes[0].interval", "soon", [
        "probes[0].interval: invalid duration 'soon': use a number and a unit (ms, s, m, h, d, w, y), "
        "e.g. '250ms' or '5m'"]),
    ("probes[0].prompts", [], ["probes[0].prompts: must have at least 1 item(s)"]),
    ("probes[0].api", "grpc", [
        "probes[0].api: must be one of 'chat', 'completions', 'tgi' or 'triton', got 'grpc'"]),
    ("slos[1].name", "s0", ["slos[1].name: duplicate name 's0' (first used at slos[0])"]),
    ("slos[1].target", "other", ["slos[1].target: unknown target 'other'"]),
    ("slos[0].probe", "ghost", ["slos[0].probe: unknown probe 'ghost'"]),
    ("slos[0].goodput", {"target": 0.99}, [
        "slos[0].goodput: needs at least one latency threshold (ttft, tpot, e2e, itl)"]),
    ("slos[0].goodput", {"ttft": "1s", "target": 1.5}, [
        "slos[0].goodput.target: must be < 1 (a ratio, not a percentage): did you mean 0.015?"]),
    ("slos[0].source", "server", []),  # valid on its own: guards against over-eager checks
    ("slos[0]", {"name": "s0", "target": "chat", "source": "server", "error_rate": {"target": 0.99},
                 "objectives": [{"metric": "ttft", "percentile": 95, "threshold": "1s"}]}, [
        "slos[0].error_rate: needs per-request outcomes, only available with source: probe"]),
    ("probe_settings", {"retention": "27d"}, [  # the default error_budget_window is 28d
        "probe_settings.retention: must be >= the longest error_budget_window (28d) so a restart keeps the "
        "error budget"]),
    ("slos[1].error_budget_window", "40d", [
        "probe_settings.retention: must be >= the longest error_budget_window (40d) so a restart keeps the "
        "error budget"]),
    ("probe_settings", {"retention": "28d"}, []),  # equal is enough
    ("slos[1]", {"name": "s1", "target": "chat", "source": "server", "error_budget_window": "40d",
                 "objectives": [{"metric": "ttft", "percentile": 95, "threshold": "1s"}]}, []),  # not stored
    ("slos[0].objectives[0].metric", "queue", [
        "slos[0].objectives[0].metric: queue is only known server-side (source: server)"]),
    ("slos[0].budgets", {"gpu": "1s"}, [
        "slos[0].budgets.gpu: must be one of 'connect', 'ttft', 'queue', 'prefill', 'decode', 'network' "
        "or 'e2e', got 'gpu'"]),
    ("targets[0].api_key", "sk-live-123", [
        "targets[0]: inline 'api_key' is not allowed: use api_key_file or api_key_env"]),
    ("targets[0].engine", "ollama", [
        "targets[0].engine: must be one of 'auto', 'vllm', 'sglang', 'tgi', 'triton', 'llamacpp', 'trtllm' "
        "or 'openai', got 'ollama'"]),
    ("targets[0].metrics_url", "ftp://x/metrics", [
        "targets[0].metrics_url: does not match the pattern ^(https?://|file://).+"]),
    ("targets[0].scrape_timeout", "20s", [
        "targets[0].scrape_timeout: must be < scrape_interval (20s >= 15s)"]),
    ("notifiers[0]", {"name": "n", "type": "pager"}, [
        "notifiers[0]: unknown type 'pager': expected one of 'slack', 'alertmanager', 'webhook', 'log', "
        "'console'"]),
    ("notifiers[0]", {"name": "n", "type": "slack", "token": "xoxb-secret", "channel": "#x"}, [
        "notifiers[0]: inline 'token' is not allowed: use token_file or token_env"]),
    ("notifiers[0]", {"name": "n", "type": "slack", "token_env": "T"}, [
        "notifiers[0].channel: required with a bot token"]),
    ("notifiers[0]", {"name": "n", "type": "slack", "token_env": "T", "channel": "#c", "colour": "red"}, [
        "notifiers[0].colour: unknown key"]),
    ("notifiers[0]", {"name": "am", "type": "alertmanager"}, ["notifiers[0].url: required key is missing"]),
    ("listen", "9478", ["listen: does not match the pattern ^(\\[[0-9a-fA-F:]+\\]|[A-Za-z0-9.-]*):\\d{1,5}$"]),
    ("gpu", {"canary": {"device": "tpu"}}, ["gpu.canary.device: does not match the pattern ^(auto|cpu|cuda(:\\d+)?)$"]),
    ("host", {"processes": [{"name": "v", "cmdline_regex": "("}]}, [
        "host.processes[0].cmdline_regex: invalid regex: missing ), unterminated subpattern at position 0"]),
]


@pytest.mark.parametrize(("path", "value", "expected"), CASES, ids=[f"{c[0]}={c[1]!r}"[:60] for c in CASES])
def test_invalid_config_reports_exact_path_and_message(path: str, value: Any, expected: list[str]) -> None:
    doc = copy.deepcopy(BASE)
    _set(doc, path, value)
    if not expected:
        parse_config(doc)
        return
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    assert info.value.errors == expected


def test_all_errors_are_reported_at_once() -> None:
    doc = copy.deepcopy(BASE)
    doc["slos"][1]["objectives"][0]["threshold"] = "0s"
    doc["targets"][0]["engine"] = "x"
    doc["bogus"] = 1
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    assert len(info.value.errors) == 3
    assert "slos[1].objectives[0].threshold: must be > 0" in info.value.errors


def test_cross_field_errors_are_all_reported() -> None:
    doc = copy.deepcopy(BASE)
    doc["probes"][0]["target"] = "nope"
    doc["slos"][1]["target"] = "gone"
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    assert info.value.errors == ["probes[0].target: unknown target 'nope'", "slos[1].target: unknown target 'gone'"]


def test_secret_values_never_appear_in_errors() -> None:
    doc = copy.deepcopy(BASE)
    doc["targets"][0]["api_key"] = "sk-live-very-secret"
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    assert "sk-live-very-secret" not in str(info.value)


def test_pydantic_location_rendering() -> None:
    assert format_path(("notifiers", 2, "slack", "channel")) == "notifiers[2].channel"
    assert format_path(("slos", 1, "objectives", 0, "threshold")) == "slos[1].objectives[0].threshold"
    assert format_path(()) == "(root)"


@pytest.mark.parametrize("name", ["sloguard.example.yaml", "systemd/sloguard.yaml"])
def test_shipped_configs_are_valid(name: str) -> None:
    path = ROOT / name
    if not path.exists():
        pytest.fail(f"{name} is missing")
    parse_config(yaml.safe_load(path.read_text()))


def test_demo_config_is_valid() -> None:
    from sloguard.demo import demo_config

    parse_config(yaml.safe_load(demo_config(8000, "127.0.0.1:9478", "/tmp/state")))


def test_cross_field_errors_are_reported_alongside_schema_errors() -> None:
    doc = copy.deepcopy(BASE)
    doc["slos"][1]["objectives"][0]["threshold"] = "0s"  # schema error in slos[1]
    doc["probes"][0]["target"] = "nope"  # cross-field error elsewhere
    doc["probes"][0]["timeout"] = "40s"
    doc["slos"].append({"name": "s2", "target": "chat", "probe": "p"})  # refers to a valid probe, needs objectives
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    assert info.value.errors == [
        "slos[1].objectives[0].threshold: must be > 0",
        "probes[0].target: unknown target 'nope'",
        "slos[2].probe: probe 'p' targets 'nope', not 'chat'",
        "probes[0].timeout: must be < interval (40s >= 30s)",
        "slos[2]: needs at least one of objectives, goodput, error_rate",
    ]


def test_references_to_an_invalid_item_are_not_reported_twice() -> None:
    doc = copy.deepcopy(BASE)
    doc["targets"][0]["engine"] = "bogus"  # the target is invalid, but it exists: no 'unknown target' noise
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    assert [e.split(":")[0] for e in info.value.errors] == ["targets[0].engine"]


@pytest.mark.parametrize(("target", "expected"), [
    ({"metrics_url": "http://user:pw@10.0.0.5:8000/metrics"},
     "targets[0].metrics_url: credentials in the URL are not allowed (they would reach logs): use api_key_file"),
    ({"api_url": "https://sk-token@gateway.example"},
     "targets[0].api_url: credentials in the URL are not allowed (they would reach logs): use api_key_file"),
    ({"engine": "openai", "metrics_url": "http://127.0.0.1:8000/metrics"},
     "targets[0]: engine 'openai' is probe-only and has no /metrics format: remove metrics_url or name the "
     "engine (or auto)"),
])
def test_target_url_and_engine_errors(target: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"version": "sloguard/v1", "targets": [{"name": "t", **target}]})
    assert info.value.errors == [expected]
    assert "pw@" not in str(info.value) and "sk-token" not in str(info.value)
