"""Hugging Face TGI: `tgi_*` families (seconds), counters without `_total`, no model label."""

from __future__ import annotations

from sloguard.sources.engines.schema import Alias, EngineMap, gauge, hist

TGI = EngineMap(
    name="tgi",
    prefixes=("tgi_",),
    model_label=None,
    histograms={
        "e2e": hist("tgi_request_duration"),
        "queue": hist("tgi_request_queue_duration"),
        # Mean time per token of each request: a per-request TPOT, not per-gap ITL.
        "tpot": hist("tgi_request_mean_time_per_token_duration"),
        "inference": hist("tgi_request_inference_duration"),
    },
    gauges={
        "requests_running": gauge("tgi_batch_current_size"),
        "requests_waiting": gauge("tgi_queue_size"),
    },
    counters={
        "prompt_tokens": (Alias("tgi_request_input_length", "histogram_sum"),),
        "generation_tokens": (Alias("tgi_request_generated_tokens", "histogram_sum"),),
    },
    finished=(
        Alias("tgi_request_success", "counter", reason="success"),
        Alias("tgi_request_failure", "counter", reason="error"),
    ),
    notes={"ttft": "no TTFT histogram", "itl": "no per-gap histogram", "kv_cache_usage_ratio": "not exposed"},
)
