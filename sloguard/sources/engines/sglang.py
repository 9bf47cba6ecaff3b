"""SGLang: `sglang:*` families; the old per-request `time_per_output_token_seconds` as the TPOT alias."""

from __future__ import annotations

from sloguard.sources.engines.schema import Alias, EngineMap, counter, gauge, hist, ratio

SGLANG = EngineMap(
    name="sglang",
    prefixes=("sglang:",),
    model_label="model_name",
    histograms={
        "ttft": hist("sglang:time_to_first_token_seconds"),
        "itl": hist("sglang:inter_token_latency_seconds"),
        # Old SGLang observed (now - first_token_time) / (tokens - 1) per streamed chunk: a TPOT.
        "tpot": hist("sglang:request_time_per_output_token_seconds", "sglang:time_per_output_token_seconds"),
        "e2e": hist("sglang:e2e_request_latency_seconds"),
        "queue": hist("sglang:queue_time_seconds", "sglang:request_queue_time_seconds"),
        # Newer releases: one histogram per stage (req_time_stats.py RequestStage); prefill_forward is the prefill.
        "prefill": (*hist("sglang:request_prefill_time_seconds"),
                    Alias("sglang:per_stage_req_latency_seconds", "histogram", match={"stage": "prefill_forward"})),
        "decode": hist("sglang:request_decode_time_seconds"),
        "inference": hist("sglang:request_inference_time_seconds"),
    },
    gauges={
        "requests_running": gauge("sglang:num_running_reqs"),
        "requests_waiting": gauge("sglang:num_queue_reqs"),
        # token_usage is num_used_tokens / max_total_num_tokens; derived from the parts where it is missing.
        "kv_cache_usage_ratio": (*gauge("sglang:token_usage", agg="mean"),
                                 ratio("sglang:num_used_tokens", {}, "sglang:max_total_num_tokens", {})),
        # Speculative decoding: gauges of the last logging interval (0 while speculative decoding is off).
        "spec_acceptance_ratio": gauge("sglang:spec_accept_rate", agg="mean"),
        "spec_acceptance_length": gauge("sglang:spec_accept_length", agg="mean"),
    },
    counters={
        "prompt_tokens": counter("sglang:prompt_tokens"),
        "generation_tokens": counter("sglang:generation_tokens"),
        # Hit ratio = cached prompt tokens / all prompt tokens.
        "prefix_cache_queries": counter("sglang:prompt_tokens"),
        "prefix_cache_hits": counter("sglang:cached_tokens"),
        "preemptions": (Alias("sglang:num_retractions", "histogram_sum"),),
        "requests_aborted": counter("sglang:num_aborted_requests"),
    },
    finished=(Alias("sglang:num_requests", "counter", reason="any"),),
)
