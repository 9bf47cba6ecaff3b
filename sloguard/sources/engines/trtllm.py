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
    },
    finished=counter(*_both("request_success")),
)
