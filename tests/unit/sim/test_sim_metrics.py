"""vLLM-format exposition: names, types, labels and buckets as real vLLM; values from the engine timeline."""

from __future__ import annotations

import random
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from sim_fakes import PROFILE, request, run_step
from support.fixtures import captured_metrics_dir

from sloguard.clock import FakeClock
from sloguard.sim.engine import Engine
from sloguard.sim.metrics import SimMetrics

FIXTURES = captured_metrics_dir()
MODEL = "sim-llama-3-8b"


def families(metrics: SimMetrics) -> dict[str, list[Sample]]:
    return {f.name: f.samples for f in text_string_to_metric_families(metrics.render().decode())}


def value(fams: dict[str, list[Sample]], family: str, sample: str, **labels: str) -> float:
    matches = [s.value for s in fams[family] if s.name == sample and labels.items() <= s.labels.items()]
    assert len(matches) == 1, (sample, labels)
    return matches[0]


def fixture_buckets() -> dict[str, list[str]]:
    text = (FIXTURES / "vllm-v1-dynamo-2026-01.txt").read_text()
    out: dict[str, list[str]] = {}
    for name, le in re.findall(r'^(vllm:\S+)_bucket\{.*?le="([^"]+)"', text, re.M):
        out.setdefault(name, []).append(le)
    return out


@pytest.fixture
def served() -> tuple[SimMetrics, FakeClock]:
    """Metrics after one 100-token prompt, 3 output tokens, behind a 1-slot queue."""
    clock = FakeClock()
    metrics = SimMetrics(MODEL, max_batched_tokens=1000, block_size=16, kv_blocks=1000)
    engine = Engine(PROFILE, random.Random(0), metrics, clock.monotonic)
    req = request("a", clock, prompt=100, tokens=3, cached=20)
    clock.advance(0.5)  # received 0.5 s before it reaches the engine (a stall)
    engine.submit(req)
    while run_step(engine, clock)[0] is not None:
        pass
    return metrics, clock


def test_family_types_match_vllm_v0_26() -> None:
    listed = dict(line.split() for line in (FIXTURES / "vllm-v0.26.0-family-list.txt").read_text().splitlines()
                  if line and not line.startswith("#"))
    ours = {f.name: f.type for f in text_string_to_metric_families(
        SimMetrics(MODEL, 8192, 16, 100).render().decode())}
    for name, kind in ours.items():
        if name.endswith("_created"):  # prometheus_client's companion gauges, present in real vLLM too
            continue
        full = name + "_total" if kind == "counter" else name
        assert listed.get(full) == kind, name


def test_bucket_edges_match_real_capture() -> None:
    real = fixture_buckets()
    text = SimMetrics(MODEL, 16384, 16, 100).render().decode()
    ours: dict[str, list[str]] = {}
    for name, le in re.findall(r'^(vllm:\S+)_bucket\{.*?le="([^"]+)"', text, re.M):
        ours.setdefault(name, []).append(le)
    shared = real.keys() & ours.keys()
    assert len(shared) >= 14
    for name in shared:
        assert ours[name] == real[name], name


def test_latency_histograms_follow_vllm_definitions(served: tuple[SimMetrics, FakeClock]) -> None:
    fams = families(served[0])
    ttft = 0.5 + 0.010 + 0.001 * 80  # stall + prefill of the 80 uncached tokens
    step = 0.005 + 0.001
    for family, expected in [("vllm:time_to_first_token_seconds", ttft),
                             ("vllm:request_prefill_time_seconds", ttft - 0.5),
                             ("vllm:request_decode_time_seconds", 2 * step),
                             ("vllm:request_inference_time_seconds", ttft - 0.5 + 2 * step),
                             ("vllm:e2e_request_latency_seconds", ttft + 2 * step),
                             ("vllm:request_queue_time_seconds", 0.0),
                             ("vllm:inter_token_latency_seconds", 2 * step),
                             ("vllm:request_time_per_output_token_seconds", step)]:
        assert value(fams, family, family + "_sum") == pytest.approx(expected), family
    assert value(fams, "vllm:inter_token_latency_seconds", "vllm:inter_token_latency_seconds_count") == 2


def test_counters_and_labels(served: tuple[SimMetrics, FakeClock]) -> None:
    fams = families(served[0])
    labels = {"engine": "0", "model_name": MODEL}
    assert value(fams, "vllm:prompt_tokens", "vllm:prompt_tokens_total", **labels) == 100
    assert value(fams, "vllm:generation_tokens", "vllm:generation_tokens_total") == 3
    assert value(fams, "vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total") == 20
    assert value(fams, "vllm:request_success", "vllm:request_success_total", finished_reason="length") == 1
    assert value(fams, "vllm:request_success", "vllm:request_success_total", finished_reason="abort") == 0
    assert value(fams, "vllm:num_requests_running", "vllm:num_requests_running") == 0  # idle after it finished
    assert value(fams, "vllm:kv_cache_usage_perc", "vllm:kv_cache_usage_perc") == 0
