"""TensorRT-LLM `trtllm-serve` (and Dynamo's pass-through): `trtllm_*`, older `trtllm:*` spelling as alias."""

from __future__ import annotations

from sloguard.sources.engines.schema import EngineMap, counter, gauge, hist


def _both(name: str) -> tuple[str, str]:
    return f"trtllm_{name}", f"trtllm:{name}"


TRTLLM = EngineMap(
    name="trtllm",
    prefixes=("trtllm_", "trtllm:"),
    model_label="model_name",
    histograms={
        "ttft": hist(*_both("time_to_first_token_seconds")),
        # Observed once per request: (last token - first token) / (tokens - 1).
        "tpot": hist(*_both("time_per_output_token_seconds")),
        "e2e": hist(*_both("e2e_request_latency_seconds")),
        "queue": hist(*_both("request_queue_time_seconds")),
    },
    gauges={
        "requests_running": gauge(*_both("num_requests_running")),
        "requests_waiting": gauge(*_both("num_requests_waiting")),
        "kv_cache_usage_ratio": gauge(*_both("kv_cache_utilization"), agg="mean"),
        "spec_acceptance_length": gauge(*_both("spec_decode_acceptance_length"), agg="mean"),
    },
    # Newer trtllm-serve (tensorrt_llm/metrics/collector.py): token counters, prompt tokens served from the KV
    # cache, and iteration-level speculative-decoding counters (no count of drafts: the length is a gauge).
    counters={
        "prompt_tokens": counter(*_both("prompt_tokens")),
        "generation_tokens": counter(*_both("generation_tokens")),
        "prefix_cache_queries": counter(*_both("prompt_tokens")),
        "prefix_cache_hits": counter(*_both("prompt_cached_tokens")),
        "spec_draft_tokens": counter(*_both("spec_decode_num_draft_tokens")),
        "spec_accepted_tokens": counter(*_both("spec_decode_num_accepted_tokens")),
    },
    finished=counter(*_both("request_success")),
)
