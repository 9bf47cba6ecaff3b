"""llama.cpp server (`--metrics`): counters and gauges only, no labels, no histograms."""

from __future__ import annotations

from sloguard.sources.engines.schema import Alias, EngineMap, counter, gauge

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
        "prompt_tokens": counter("llamacpp:prompt_tokens"),
        "generation_tokens": counter("llamacpp:tokens_predicted"),
    },
)
