"""Triton Inference Server: cumulative microsecond counters (means only), TTFT histogram, TRT-LLM gauges."""

from __future__ import annotations

from sloguard.sources.engines.schema import Alias, EngineMap

_US = 1e-6


def _mean(duration: str) -> tuple[Alias, ...]:
    return (Alias(duration, "mean", _US, count_family="nv_inference_request_success"),)


TRITON = EngineMap(
    name="triton",
    prefixes=("nv_inference_", "nv_trt_llm_"),
    model_label="model",
    histograms={
        # Decoupled (streaming) models only; milliseconds.
        "ttft": (Alias("nv_inference_first_response_histogram_ms", "histogram", 0.001),),
        "e2e": _mean("nv_inference_request_duration_us"),
        "queue": _mean("nv_inference_queue_duration_us"),
        "inference": _mean("nv_inference_compute_infer_duration_us"),
    },
    gauges={
        "requests_running": (
            Alias("nv_trt_llm_request_metrics", "gauge", match={"request_type": "active"}),
        ),
        "requests_waiting": (
            Alias("nv_trt_llm_request_metrics", "gauge", match={"request_type": "waiting"}),
            Alias("nv_inference_pending_request_count", "gauge"),
        ),
        "kv_cache_usage_ratio": (
            Alias("nv_trt_llm_kv_cache_block_metrics", "gauge", agg="mean",
                  match={"kv_cache_block_type": "fraction"}),
        ),
    },
    finished=(
        Alias("nv_inference_request_success", "counter", reason="success"),
        Alias("nv_inference_request_failure", "counter", reason="error"),
    ),
    notes={"e2e": "mean per window from *_duration_us / request_success, no quantiles"},
)
