"""Engine profiles of the simulator: the same engine model seen through another engine's signals (pure).

`sloguard sim --engine-profile P` exposes only engine P's metrics (its names, labels and what it lacks), sends its
response head when P does and shapes its stream as P does, so tests cover the signal-poor paths too:
- vllm: every vLLM V1 family (sim.metrics), head on receipt, a role chunk then one token per event;
- llamacpp: llama-server's counters and two gauges, no histogram, no request counter, no KV usage (its
  server-task.cpp to_metrics()), head when a slot starts the task, `timings` with the usage chunk;
- sglang: `sglang:*` histograms (prefill as `per_stage_req_latency_seconds{stage="prefill_forward"}`), gauges
  and counters, no per-request decode histogram;
- tgi: `tgi_*` families without a model label and counters without `_total`, no TTFT or ITL histogram.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from sloguard.model import Sample
from sloguard.sources.parse import parse_text

PROFILES = ("vllm", "llamacpp", "sglang", "tgi")
HEAD_AT_SLOT_START = frozenset({"llamacpp"})  # the profiles whose head waits for the request to be scheduled


def _by_name(samples: Sequence[Sample]) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        out[s.name].append(s)
    return out


def _total(idx: Mapping[str, list[Sample]], name: str) -> float:
    return sum(s.value for s in idx.get(name, ()))


def _num(v: float) -> str:
    return repr(float(v))


def _llamacpp(idx: Mapping[str, list[Sample]]) -> list[str]:
    hits = _total(idx, "vllm:prefix_cache_hits_total")
    counters = {
        "prompt_tokens_total": _total(idx, "vllm:prompt_tokens_total") - hits,
        "prompt_tokens_cached_total": hits,
        "prompt_seconds_total": _total(idx, "vllm:request_prefill_time_seconds_sum"),
        "tokens_predicted_total": _total(idx, "vllm:generation_tokens_total"),
        "tokens_predicted_seconds_total": _total(idx, "vllm:request_decode_time_seconds_sum"),
        "n_decode_total": _total(idx, "vllm:iteration_tokens_total_count"),
    }
    gauges = {"requests_processing": _total(idx, "vllm:num_requests_running"),
              "requests_deferred": _total(idx, "vllm:num_requests_waiting")}
    out = []
    for kind, table in (("counter", counters), ("gauge", gauges)):
        for name, value in table.items():
            out += [f"# TYPE llamacpp:{name} {kind}", f"llamacpp:{name} {_num(value)}"]
    return out


def _histogram(idx: Mapping[str, list[Sample]], src: str, dst: str, labels: str) -> list[str]:
    """Return a vLLM histogram renamed, its buckets and sum/count summed over vLLM's label sets."""
    buckets: dict[str, float] = defaultdict(float)
    for s in idx.get(f"{src}_bucket", ()):
        buckets[s.labels.get("le", "+Inf")] += s.value
    if not buckets:
        return []
    sep = "," if labels else ""
    out = [f"# TYPE {dst} histogram"]
    for le, v in sorted(buckets.items(), key=lambda kv: float(kv[0])):
        out.append(f'{dst}_bucket{{{labels}{sep}le="{le}"}} {_num(v)}')
    out.append(f"{dst}_sum{{{labels}}} {_num(_total(idx, src + '_sum'))}" if labels else
               f"{dst}_sum {_num(_total(idx, src + '_sum'))}")
    out.append(f"{dst}_count{{{labels}}} {_num(_total(idx, src + '_count'))}" if labels else
               f"{dst}_count {_num(_total(idx, src + '_count'))}")
    return out


def _sglang(idx: Mapping[str, list[Sample]]) -> list[str]:
    model = next((s.labels.get("model_name", "") for s in idx.get("vllm:num_requests_running", ())), "")
    lab = f'model_name="{model}"'
    out: list[str] = []
    for src, dst in (("time_to_first_token_seconds", "time_to_first_token_seconds"),
                     ("inter_token_latency_seconds", "inter_token_latency_seconds"),
                     ("e2e_request_latency_seconds", "e2e_request_latency_seconds"),
                     ("request_queue_time_seconds", "queue_time_seconds")):
        out += _histogram(idx, f"vllm:{src}", f"sglang:{dst}", lab)
    out += _histogram(idx, "vllm:request_prefill_time_seconds", "sglang:per_stage_req_latency_seconds",
                      f'{lab},stage="prefill_forward"')
    for src, dst, kind in (("num_requests_running", "num_running_reqs", "gauge"),
                           ("num_requests_waiting", "num_queue_reqs", "gauge"),
                           ("kv_cache_usage_perc", "token_usage", "gauge"),
                           ("prompt_tokens_total", "prompt_tokens_total", "counter"),
                           ("generation_tokens_total", "generation_tokens_total", "counter"),
                           ("prefix_cache_hits_total", "cached_tokens_total", "counter"),
                           ("request_success_total", "num_requests_total", "counter")):
        out += [f"# TYPE sglang:{dst} {kind}", f"sglang:{dst}{{{lab}}} {_num(_total(idx, 'vllm:' + src))}"]
    return out


def _tgi(idx: Mapping[str, list[Sample]]) -> list[str]:
    out: list[str] = []
    for src, dst in (("e2e_request_latency_seconds", "tgi_request_duration"),
                     ("request_queue_time_seconds", "tgi_request_queue_duration"),
                     ("request_time_per_output_token_seconds", "tgi_request_mean_time_per_token_duration"),
                     ("request_prompt_tokens", "tgi_request_input_length"),
                     ("request_generation_tokens", "tgi_request_generated_tokens")):
        out += _histogram(idx, f"vllm:{src}", dst, "")
    for src, dst, kind in (("num_requests_running", "tgi_batch_current_size", "gauge"),
                           ("num_requests_waiting", "tgi_queue_size", "gauge"),
                           ("request_success_total", "tgi_request_success", "counter")):
        out += [f"# TYPE {dst} {kind}", f"{dst} {_num(_total(idx, 'vllm:' + src))}"]
    return out


RENDERERS: dict[str, Callable[[Mapping[str, list[Sample]]], list[str]]] = {
    "llamacpp": _llamacpp, "sglang": _sglang, "tgi": _tgi}


def render(profile: str, vllm_page: bytes) -> bytes:
    """Return the simulator's vLLM exposition as `profile` would expose the same engine state."""
    if profile == "vllm":
        return vllm_page
    lines = RENDERERS[profile](_by_name(parse_text(vllm_page.decode())))
    return ("\n".join(lines) + "\n").encode()


def timings(prompt_n: int, cache_n: int, prompt_ms: float, predicted_n: int, predicted_ms: float) -> dict[str, float]:
    """Return llama-server's `timings` object (server-common.cpp server_slot_stats::to_json)."""
    return {"cache_n": cache_n, "prompt_n": prompt_n, "prompt_ms": prompt_ms,
            "prompt_per_token_ms": prompt_ms / prompt_n if prompt_n else 0.0,
            "predicted_n": predicted_n, "predicted_ms": predicted_ms,
            "predicted_per_token_ms": predicted_ms / max(predicted_n - 1, 1)}
