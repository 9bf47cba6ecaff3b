"""Every ratio field (bounded by 1) written as a percentage gets "did you mean 0.95?", as `percentile` does its hint
(issue 46 found 6: `goodput.target: 95` said only `must be < 1`)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from annotated_types import Le, Lt
from pydantic import BaseModel

from sloguard.config.load import ConfigError, parse_config
from sloguard.config.spec import Config
from sloguard.config.suggest import models_in

BASE: dict[str, Any] = {
    "version": "sloguard/v1",
    "targets": [{"name": "chat", "engine": "vllm", "metrics_url": "http://127.0.0.1:8000/metrics",
                 "api_url": "http://127.0.0.1:8000", "model": "m"}],
    "probes": [{"name": "p", "target": "chat", "interval": "30s", "timeout": "20s"}],
    "slos": [{"name": "s", "target": "chat", "objectives": [{"metric": "ttft", "percentile": 95, "threshold": "1s"}],
              "goodput": {"ttft": "1s", "target": 0.99}, "error_rate": {"target": 0.999}}],
}
# Where each model holding a ratio sits in BASE (a model the table misses fails the coverage test below).
PLACES: dict[str, tuple[str, dict[str, Any]]] = {
    "GoodputSpec": ("slos.0.goodput", {}), "ErrorRateSpec": ("slos.0.error_rate", {}),
    "CanarySpec": ("gpu.canary", {}), "SpanExportSpec": ("traces.export", {"endpoint": "http://c:4318/v1/traces"}),
    "PrefixCacheGuard": ("targets.0.guardrails.prefix_cache_hit_ratio", {}),
    "SpecDecodeGuard": ("targets.0.guardrails.spec_decode_acceptance", {}),
    "BusyGpuEmptyQueueGuard": ("targets.0.guardrails.busy_gpu_empty_queue", {}),
    "IdleGpuDeepQueueGuard": ("targets.0.guardrails.idle_gpu_deep_queue", {}),
}


def _ratio_fields(model: type[BaseModel], seen: set[type[BaseModel]]) -> Iterator[tuple[str, str]]:
    """Yield (model name, key) for every field bounded above by 1, walking every nested model."""
    if model in seen:
        return
    seen.add(model)
    for name, f in model.model_fields.items():
        if any((isinstance(m, Lt) and m.lt == 1) or (isinstance(m, Le) and m.le == 1) for m in f.metadata):
            yield model.__name__, f.alias or name
        for sub in models_in(f.annotation):
            yield from _ratio_fields(sub, seen)


RATIOS = sorted(set(_ratio_fields(Config, set())))


def _errors(place: str, extra: dict[str, Any], key: str, value: float) -> list[str]:
    doc = copy.deepcopy(BASE)
    node: Any = doc
    parts = place.split(".")
    for p in parts[:-1]:
        node = node[int(p)] if p.isdigit() else node.setdefault(p, {})
    node[parts[-1]] = {**node.get(parts[-1], {}), **extra, key: value}
    try:
        parse_config(doc)
    except ConfigError as exc:
        return exc.errors
    return []


def test_the_walk_finds_the_ratio_fields() -> None:
    assert ("GoodputSpec", "target") in RATIOS and ("ErrorRateSpec", "target") in RATIOS
    assert {m for m, _ in RATIOS} <= PLACES.keys(), "a new ratio field: add its model to PLACES"


@pytest.mark.parametrize(("model", "key"), RATIOS)
def test_a_percentage_in_a_ratio_field_gets_the_ratio(model: str, key: str) -> None:
    place, extra = PLACES[model]
    (got,) = _errors(place, extra, key, 95)
    assert got.endswith(f".{key}: must be < 1 (a ratio, not a percentage): did you mean 0.95?") or \
        got.endswith(f".{key}: must be <= 1 (a ratio, not a percentage): did you mean 0.95?"), got


@pytest.mark.parametrize(("path", "value", "want"), [
    ("goodput", 95, "slos[0].goodput.target: must be < 1 (a ratio, not a percentage): did you mean 0.95?"),
    ("error_rate", 99.9, "slos[0].error_rate.target: must be < 1 (a ratio, not a percentage): did you mean 0.999?"),
    ("goodput", 1, "slos[0].goodput.target: must be < 1"),
    ("goodput", 950, "slos[0].goodput.target: must be < 1 (a ratio, e.g. 0.99)"),
])
def test_slo_targets(path: str, value: float, want: str) -> None:
    assert _errors(f"slos.0.{path}", {}, "target", value) == [want]
