"""vLLM (V1 engine): current names first, names deprecated in 0.11 and hidden/removed in 0.12+ as aliases."""

from __future__ import annotations

from sloguard.sources.engines.schema import Alias, EngineMap, counter, gauge, hist

VLLM = EngineMap(
    name="vllm",
    prefixes=("vllm:",),
    model_label="model_name",
    histograms={
        "ttft": hist("vllm:time_to_first_token_seconds"),
        # vllm:time_per_output_token_seconds was the per-token gap (same buckets), renamed in 0.11.
        "itl": hist("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "tpot": hist("vllm:request_time_per_output_token_seconds"),
        "e2e": hist("vllm:e2e_request_latency_seconds"),
        "queue": hist("vllm:request_queue_time_seconds"),
        "prefill": hist("vllm:request_prefill_time_seconds"),
        "decode": hist("vllm:request_decode_time_seconds"),
        "inference": hist("vllm:request_inference_time_seconds"),
        # Prompt tokens per finished request (tokens, not seconds: not exported; sloguard.diagnose reads it).
        "prompt_length": hist("vllm:request_prompt_tokens"),
    },
    gauges={
        "requests_running": gauge("vllm:num_requests_running"),
        "requests_waiting": gauge("vllm:num_requests_waiting"),
        # Both are already 0..1 despite the `perc` suffix; averaged across data-parallel engines.
        "kv_cache_usage_ratio": gauge("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", agg="mean"),
        # 0.32+: the waiting split by reason; "capacity" = waiting for scheduling capacity (KV blocks, batch),
        # "deferred" = held by LoRA budget, KV transfer or a blocked status (not capacity).
        "requests_waiting_capacity": (Alias("vllm:num_requests_waiting_by_reason", "gauge",
                                            match={"reason": "capacity"}),),
    },
    counters={
        "prompt_tokens": counter("vllm:prompt_tokens"),
        # 0.32+: prompt tokens prefilled here, apart from those served by the prefix cache or a KV transfer
        "prompt_tokens_computed": (Alias("vllm:prompt_tokens_by_source", "counter",
                                         match={"source": "local_compute"}),),
        "generation_tokens": counter("vllm:generation_tokens"),
        "prefix_cache_queries": counter("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
        "prefix_cache_hits": counter("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
        "preemptions": counter("vllm:num_preemptions"),
        # Speculative decoding (only with --speculative-config): acceptance = accepted / draft tokens, mean
        # acceptance length = 1 + accepted / drafts (the bonus token included, as vLLM's own log line says).
        "spec_drafts": counter("vllm:spec_decode_num_drafts"),
        "spec_draft_tokens": counter("vllm:spec_decode_num_draft_tokens"),
        "spec_accepted_tokens": counter("vllm:spec_decode_num_accepted_tokens"),
    },
    finished=counter("vllm:request_success"),
)
