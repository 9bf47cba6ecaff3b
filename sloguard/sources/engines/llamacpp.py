"""llama.cpp server (`--metrics`): counters and gauges only, no labels, no histograms.

Newer builds dropped `kv_cache_usage_ratio`/`kv_cache_tokens` and added `prompt_tokens_cached_total`.
"""

from __future__ import annotations

from sloguard.sources.engines.schema import Alias, EngineMap, counter, gauge

_PROMPT_ALL = Alias("llamacpp:prompt_tokens", "counter", other="llamacpp:prompt_tokens_cached")

LLAMACPP = EngineMap(
    name="llamacpp",
    prefixes=("llamacpp:",),
    model_label=None,
    histograms={
        # Decode seconds per generated token, cumulative: a mean TPOT per window.
        "tpot": (Alias("llamacpp:tokens_predicted_seconds_total", "mean",
                       count_family="llamacpp:tokens_predicted_total"),),
    },
    gauges={
        "requests_running": gauge("llamacpp:requests_processing"),
        "requests_waiting": gauge("llamacpp:requests_deferred"),
        "kv_cache_usage_ratio": gauge("llamacpp:kv_cache_usage_ratio", agg="mean"),
    },
    counters={
        # prompt_tokens counts only the tokens processed; cached ones (newer builds) are counted apart. All
        # prompt tokens (as vLLM counts them) = processed + cached, and the cached share is the prefix-cache hit.
        "prompt_tokens": (_PROMPT_ALL,),
        "generation_tokens": counter("llamacpp:tokens_predicted"),
        # Primary part = the cached counter, so builds without it have no hit ratio (rather than a ratio of 0).
        "prefix_cache_queries": (Alias("llamacpp:prompt_tokens_cached", "counter", other="llamacpp:prompt_tokens"),),
        "prefix_cache_hits": counter("llamacpp:prompt_tokens_cached"),
        # `--model-draft` / speculative decoding (newer builds; 0 without a draft model)
        "spec_drafts": counter("llamacpp:spec_decode_num_drafts"),
        "spec_draft_tokens": counter("llamacpp:spec_decode_num_draft_tokens"),
        "spec_accepted_tokens": counter("llamacpp:spec_decode_num_accepted_tokens"),
    },
    notes={"kv_cache_usage_ratio": "newer llama-server builds dropped it and expose no capacity to derive it from",
           "prefill": "prompt_seconds_total has no request count to divide by: a per-token, not per-request, time"},
)
