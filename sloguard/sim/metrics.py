"""vLLM V1 `/metrics` exposition for the simulator, on a private prometheus_client registry.

Names, label sets (`engine`, `model_name`, and `finished_reason` on `request_success_total`) and
bucket edges are those of vLLM V1 (`vllm/v1/metrics/loggers.py`), checked against a real capture
(`fixtures/metrics/vllm-v1-dynamo-2026-01.txt`) and the v0.26.0 family list.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from sloguard.sim.engine import SimRequest

LABELS = ("engine", "model_name")
FINISHED_REASONS = ("stop", "length", "abort", "error")

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0)
REQUEST_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                           60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000)
N_BUCKETS = (1, 2, 5, 10, 20)


def iteration_buckets(max_batched_tokens: int) -> tuple[int, ...]:
    """Return vLLM's per-step token buckets: 1, 8, then doublings up to max_num_batched_tokens."""
    edges = [1, 8]
    while edges[-1] * 2 <= max_batched_tokens:
        edges.append(edges[-1] * 2)
    return tuple(edges)


# (attribute, vLLM name, help, buckets): one row per histogram family.
HISTOGRAMS: tuple[tuple[str, str, str, tuple[float, ...]], ...] = (
    ("prompt_hist", "vllm:request_prompt_tokens", "Number of prefill tokens processed.", TOKEN_BUCKETS),
    ("gen_hist", "vllm:request_generation_tokens", "Number of generation tokens processed.", TOKEN_BUCKETS),
    ("max_gen_hist", "vllm:request_max_num_generation_tokens",
     "Histogram of maximum number of requested generation tokens.", TOKEN_BUCKETS),
    ("params_n", "vllm:request_params_n", "Histogram of the n request parameter.", N_BUCKETS),
    ("params_max_tokens", "vllm:request_params_max_tokens",
     "Histogram of the max_tokens request parameter.", TOKEN_BUCKETS),
    ("ttft", "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS),
    ("itl", "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS),
    ("tpot", "vllm:request_time_per_output_token_seconds",
     "Histogram of time_per_output_token_seconds per request.", ITL_BUCKETS),
    ("e2e", "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
     REQUEST_LATENCY_BUCKETS),
    ("queue", "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
     REQUEST_LATENCY_BUCKETS),
    ("inference", "vllm:request_inference_time_seconds",
     "Histogram of time spent in RUNNING phase for request.", REQUEST_LATENCY_BUCKETS),
    ("prefill", "vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
     REQUEST_LATENCY_BUCKETS),
    ("decode", "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
     REQUEST_LATENCY_BUCKETS),
    ("kv_computed", "vllm:request_prefill_kv_computed_tokens",
     "Histogram of new KV tokens computed during prefill (excluding cached tokens).", TOKEN_BUCKETS),
)

# (attribute, vLLM name without _total, help): one row per counter family.
COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("prompt_tokens", "vllm:prompt_tokens", "Number of prefill tokens processed."),
    ("generation_tokens", "vllm:generation_tokens", "Number of generation tokens processed."),
    ("prefix_queries", "vllm:prefix_cache_queries",
     "Prefix cache queries, in terms of number of queried tokens."),
    ("prefix_hits", "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."),
    ("cached_tokens", "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external)."),
    ("preemptions", "vllm:num_preemptions", "Cumulative number of preemption from the engine."),
)


class SimMetrics:
    """The simulator's vLLM-format metrics; implements `engine.Recorder`."""

    def __init__(self, model: str, max_batched_tokens: int, block_size: int, kv_blocks: int) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.spec: Any = None  # sim.spec.SpecDecode with `--spec-tokens`: counted on every decode token
        lv = ("0", model)
        reg = self.registry
        self.running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                             LABELS, registry=reg).labels(*lv)
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                             LABELS, registry=reg).labels(*lv)
        self.kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                        LABELS, registry=reg).labels(*lv)
        self._hist = {attr: Histogram(name, doc, LABELS, buckets=b, registry=reg).labels(*lv)
                      for attr, name, doc, b in HISTOGRAMS}
        self.iteration = Histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                                   LABELS, buckets=iteration_buckets(max_batched_tokens),
                                   registry=reg).labels(*lv)
        self._count = {attr: Counter(name, doc, LABELS, registry=reg).labels(*lv) for attr, name, doc in COUNTERS}
        success = Counter("vllm:request_success", "Count of successfully processed requests.",
                          ("engine", "finished_reason", "model_name"), registry=reg)
        self.success = {r: success.labels("0", r, model) for r in FINISHED_REASONS}
        info = Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                     ("block_size", "enable_prefix_caching", "engine", "num_gpu_blocks"), registry=reg)
        info.labels(str(block_size), "True", "0", str(kv_blocks)).set(1)
        sleep = Gauge("vllm:engine_sleep_state", "Engine sleep state; awake = 0 means engine is sleeping; "
                      "awake = 1 means engine is awake.", ("engine", "model_name", "sleep_state"), registry=reg)
        for state, value in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
            sleep.labels("0", model, state).set(value)

    def render(self) -> bytes:
        """Return the text exposition (format 0.0.4)."""
        return generate_latest(self.registry)

    def step(self, running: int, waiting: int, kv_usage: float, tokens: int | None) -> None:
        """Record the scheduler state, and a step's batched tokens when `tokens` is not None."""
        self.running.set(running)
        self.waiting.set(waiting)
        self.kv.set(kv_usage)
        if tokens is not None:
            self.iteration.observe(tokens)

    def preempted(self) -> None:
        """Count one preemption."""
        self._count["preemptions"].inc()

    def token(self, req: SimRequest, gap: float | None) -> None:
        """Record one emitted token: TTFT and prompt counters on the first, the gap on later ones."""
        self._count["generation_tokens"].inc()
        if gap is not None:
            self._hist["itl"].observe(gap)
            if self.spec is not None:
                self.spec.draft()
            return
        if req.first_token is not None:
            self._hist["ttft"].observe(req.first_token - req.arrival)
        self._count["prompt_tokens"].inc(req.prompt_tokens)
        self._count["prefix_queries"].inc(req.prompt_tokens)
        self._count["prefix_hits"].inc(req.cached_tokens)
        self._count["cached_tokens"].inc(req.cached_tokens)

    def errored(self) -> None:
        """Count a request that failed before reaching the engine."""
        self.success["error"].inc()

    def finished(self, req: SimRequest, now: float) -> None:
        """Record a finished request's token counts and latency histograms (vLLM V1 definitions)."""
        self.success[req.finished or "abort"].inc()
        h = self._hist
        if req.scheduled is not None:
            h["queue"].observe(req.scheduled - (req.queued if req.queued is not None else req.arrival))
        if req.first_token is None or req.last_token is None or req.scheduled is None:
            return
        for attr, value in (("prompt_hist", req.prompt_tokens), ("gen_hist", req.generated),
                            ("max_gen_hist", req.max_tokens), ("params_n", 1),
                            ("params_max_tokens", req.max_tokens),
                            ("kv_computed", req.prompt_tokens - req.cached_tokens),
                            ("e2e", now - req.arrival),
                            ("inference", req.last_token - req.scheduled),
                            ("prefill", req.first_token - req.scheduled),
                            ("decode", req.last_token - req.first_token)):
            h[attr].observe(value)
        if req.generated > 1:
            h["tpot"].observe((req.last_token - req.first_token) / (req.generated - 1))
