"""Triton Inference Server: cumulative microsecond counters (means only), TTFT histogram, TRT-LLM gauges."""

from __future__ import annotations

from sloguard.sources.engines.schema import Alias, EngineMap, difference, ratio

_US = 1e-6
_REQ = "nv_trt_llm_request_metrics"
_KV = "nv_trt_llm_kv_cache_block_metrics"


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
        # TRT-LLM batch manager: `scheduled` = requests in this iteration's batch (vLLM's "running"); `active`
        # also counts admitted requests the scheduler had to leave out (no KV blocks, batch full).
        "requests_running": (
            Alias(_REQ, "gauge", match={"request_type": "scheduled"}),
            Alias(_REQ, "gauge", match={"request_type": "active"}),
        ),
        # Newer backends expose `waiting` (queued); older ones only active and scheduled: active - scheduled
        # are the admitted requests not running (a lower bound of the queue). Triton core's pending count last.
        "requests_waiting": (
            Alias(_REQ, "gauge", match={"request_type": "waiting"}),
            difference(_REQ, {"request_type": "active"}, _REQ, {"request_type": "scheduled"}),
            Alias("nv_inference_pending_request_count", "gauge"),
        ),
        # Newer backends give the `fraction`; older ones only block counts: used / max.
        "kv_cache_usage_ratio": (
            Alias(_KV, "gauge", agg="mean", match={"kv_cache_block_type": "fraction"}),
            ratio(_KV, {"kv_cache_block_type": "used"}, _KV, {"kv_cache_block_type": "max"}),
        ),
    },
    finished=(
        Alias("nv_inference_request_success", "counter", reason="success"),
        Alias("nv_inference_request_failure", "counter", reason="error"),
    ),
    notes={"e2e": "mean per window from *_duration_us / request_success, no quantiles"},
)
