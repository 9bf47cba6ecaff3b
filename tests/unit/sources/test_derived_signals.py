"""Signals derived from parts where an engine exposes no direct one; `provenance` names what fed each signal."""

from __future__ import annotations

import pytest
from metrics_fixtures import OWN, SHARED

from sloguard.model import Sample
from sloguard.sources.engines import ENGINES, normalise
from sloguard.sources.engines.provenance import CANONICAL, provenance
from sloguard.sources.parse import parse_text

REQ, KV = "nv_trt_llm_request_metrics", "nv_trt_llm_kv_cache_block_metrics"


def _gauges(samples: list[Sample], engine: str = "triton") -> dict[str, float]:
    return dict(normalise(samples, engine, "t", 0.0, "m").models["m"].gauges)


def _req(kind: str, value: float) -> Sample:
    return Sample(REQ, {"model": "m", "request_type": kind}, value)


def _kv(kind: str, value: float) -> Sample:
    return Sample(KV, {"model": "m", "kv_cache_block_type": kind}, value)


@pytest.mark.parametrize(("samples", "expected"), [
    # older TRT-LLM backend: blocks used / max, waiting = active - scheduled
    ([_kv("used", 25), _kv("max", 100), _kv("free", 75)], {"kv_cache_usage_ratio": 0.25}),
    ([_req("active", 9), _req("scheduled", 6), _req("context", 1)], {"requests_waiting": 3, "requests_running": 6}),
    ([_req("active", 2), _req("scheduled", 4)], {"requests_waiting": 0, "requests_running": 4}),  # floored at 0
    ([_kv("used", 5), _kv("max", 0)], {}),  # no capacity, no ratio
    # newer backend: the direct series win over the derivation
    ([_kv("fraction", 0.5), _kv("used", 1), _kv("max", 100)], {"kv_cache_usage_ratio": 0.5}),
    ([_req("waiting", 7), _req("active", 9), _req("scheduled", 6)], {"requests_waiting": 7, "requests_running": 6}),
    # only `active` (no `scheduled`): running falls back to it, waiting cannot be derived
    ([_req("active", 4)], {"requests_running": 4}),
])
def test_triton_trtllm_derivations(samples: list[Sample], expected: dict[str, float]) -> None:
    got = _gauges([*samples, Sample("nv_inference_request_success", {"model": "m"}, 1.0)])
    assert got == pytest.approx(expected)


def test_sglang_kv_usage_from_used_and_max_tokens_when_token_usage_is_missing() -> None:
    page = (SHARED / "sglang-dynamo-2026-01.txt").read_text()
    without = [s for s in parse_text(page) if s.name != "sglang:token_usage"]
    used = [s for s in without if s.name != "sglang:num_used_tokens"] + [
        Sample("sglang:num_used_tokens", {"model_name": "Qwen/Qwen3-0.6B"}, 23240.5)]
    mv = normalise(used, "sglang", "t", 0.0).models["Qwen/Qwen3-0.6B"]
    assert mv.gauges["kv_cache_usage_ratio"] == pytest.approx(23240.5 / 92962.0)


def test_llamacpp_prompt_tokens_include_cached_ones_and_give_the_hit_ratio() -> None:
    mv = normalise(parse_text((OWN / "llamacpp-pypi-0.3.36-server.txt").read_text()), "auto", "t", 0.0, "m").models
    counters = mv["m"].counters
    assert counters["prompt_tokens"] == 10 + 8  # processed + cached, as vLLM counts prompt tokens
    assert counters["prefix_cache_hits"] == 8 and counters["prefix_cache_queries"] == 18


def test_provenance_names_the_derivation_and_what_is_missing() -> None:
    samples = parse_text((OWN / "triton-trtllm-23.x-blocks.txt").read_text())
    fed = {f.signal: f for f in provenance(ENGINES["triton"], samples)}
    assert list(fed) == list(CANONICAL)
    assert fed["kv_cache_usage_ratio"].sources == (
        f'{KV}{{kv_cache_block_type="used"}} / {KV}{{kv_cache_block_type="max"}}',)
    assert fed["requests_waiting"].sources == (f'{REQ}{{request_type="active"}} - {REQ}{{request_type="scheduled"}}',)
    assert fed["e2e_seconds"].how == "mean"
    assert not fed["ttft_seconds"].available and not fed["prompt_tokens_per_second"].available
    assert fed["requests_finished_per_second"].sources == ("nv_inference_request_success",
                                                           "nv_inference_request_failure")


def test_provenance_agrees_with_the_view_for_every_fixture() -> None:
    from metrics_fixtures import exposition_files

    for path in exposition_files():
        samples = parse_text(path.read_text())
        view = normalise(samples, "auto", "t", 0.0, "m")
        emap = ENGINES[view.engine]
        signals: set[str] = set()
        for mv in view.models.values():
            signals |= {*mv.histograms, *mv.gauges, *mv.counters}
            signals |= {"requests_finished"} if mv.finished_by_reason else set()
        for fed in provenance(emap, samples):
            _, parts = CANONICAL[fed.signal]
            internal = set(parts) if parts else {"requests_finished"}
            assert fed.available == (internal <= signals), (path.name, fed)
