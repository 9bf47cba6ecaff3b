"""Plain value types that flow from sources through windows and SLO evaluation to the outputs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

# Canonical server-side latency signals (sloguard_server_<signal>_seconds) and other engine signals.
HistogramSignal = Literal["ttft", "itl", "tpot", "e2e", "queue", "prefill", "decode", "inference"]
GaugeSignal = Literal[
    "requests_running", "requests_waiting", "kv_cache_usage_ratio",
    # speculative decoding where an engine reports it as a gauge (SGLang, TensorRT-LLM): sloguard.guardrails
    "spec_acceptance_ratio", "spec_acceptance_length",
]
CounterSignal = Literal[
    "prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits", "preemptions",
    "requests_finished",
    # speculative decoding counters (vLLM, TensorRT-LLM, llama.cpp) and a dedicated abort counter (SGLang)
    "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens", "requests_aborted",
]


@dataclass(frozen=True, slots=True)
class Sample:
    """One parsed exposition sample; labels as a mapping, order irrelevant."""

    name: str
    labels: Mapping[str, str]
    value: float
    timestamp: float | None = None


@dataclass(frozen=True, slots=True)
class Histogram:
    """A cumulative histogram at one scrape: (upper bound, cumulative count) sorted, +Inf last."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    sum: float


@dataclass(frozen=True, slots=True)
class ModelView:
    """Normalised signals of one model served by one target, at one scrape; absent signals are omitted."""

    model: str
    histograms: Mapping[str, Histogram] = field(default_factory=dict)
    gauges: Mapping[str, float] = field(default_factory=dict)
    counters: Mapping[str, float] = field(default_factory=dict)
    finished_by_reason: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ServerView:
    """One target's normalised scrape: engine detected, per-model signals, scrape time."""

    target: str
    engine: str
    ts: float
    models: Mapping[str, ModelView]
    replica: str = ""  # which replica of a service (sloguard.fleet); a plain target's is its host:port


# What a ServerView becomes in the exposition: each windowed `sloguard_server_*` family over these windows (seconds),
# latency at these quantiles (sloguard.windows.server; scrape limits and `check` count and name them from here).
SERVER_WINDOWS: tuple[float, ...] = (60.0, 300.0)
SERVER_QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One synthetic request as the user saw it; times in seconds, None where undefined."""

    ts: float
    probe: str
    target: str
    model: str
    api: str
    ok: bool
    error: str | None = None
    status_code: int | None = None
    connect_s: float | None = None
    ttft_s: float | None = None
    ttfot_s: float | None = None
    e2e_s: float | None = None
    tpot_s: float | None = None
    itl_p50_s: float | None = None
    itl_p99_s: float | None = None
    itl_max_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    prompt_bucket: str = ""
    trace_id: str = ""
    # The server's own record of this request (sloguard.traces), joined by trace id: where it came from
    # ("otlp" | "inband" | "" = none), the server's own TTFT and the stages measured per request (≥ 0).
    record: str = ""
    server_ttft_s: float | None = None
    network_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    server_decode_s: float | None = None
    elapsed_s: float | None = None  # t0 to when the request ended (success, timeout, reset or error)
    # Guardrail checks (sloguard.guardrails): "" for a latency probe, else the check kind ("abort", "oversized_prompt"),
    # its outcome (released, leaked, rejected, truncated, ...) and what it measured: seconds from the client's
    # disconnect to the engine releasing the request, or from sending the oversized prompt to the answer.
    check_kind: str = ""
    check_outcome: str = ""
    check_s: float | None = None
    # Time to the response head (t0 → status line arrived): network both ways + the server's HTTP front
    # until it answers; per request, never negative (README "Exact definitions", network stage).
    head_s: float | None = None
    release: str = ""  # the target's release identity when this result was taken (sloguard.reports.identity)
    # Live only (never stored, kept last): this request's per-token ITL gaps counted per histogram bucket
    # (sloguard.probes.timing.ITL_BUCKETS, +Inf last) and their sum; bounded whatever the stream's length.
    itl_counts: tuple[int, ...] = ()
    itl_sum_s: float = 0.0
    t0_ns: int = 0  # t0 on this process's perf_counter_ns clock (0: unknown): lets a load generator join it
    # t0 → response head, whatever came after it: at slot start (llama-server) it measures the queue (traces.record)
    head_raw_s: float | None = None


# ProbeResult fields the store and JSON rows omit
LIVE_ONLY_FIELDS = frozenset({"itl_counts", "itl_sum_s", "t0_ns", "head_raw_s"})
