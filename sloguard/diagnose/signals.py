"""Build the diagnosis signals of one target (rules.py names them) from what sloguard already collects.

Engine signals come from the server windows (counters over the diagnosis window, resets handled) and the
gauges of its scrapes; host and GPU signals from the evaluated samples (`sloguard_process_*`,
`sloguard_gpu_*` from NVML or a dcgm-exporter source, `sloguard_canary_degraded`). A signal whose inputs
are absent is left out: "not available", never 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence

from sloguard.diagnose.arrivals import ProbeLoad, arrivals, users
from sloguard.diagnose.history import Series
from sloguard.diagnose.model import ServerLike
from sloguard.diagnose.prompts import prompt_length
from sloguard.model import Sample

# Clock-event reasons that slow a busy GPU (gpu_idle, application clocks, sync boost and display do not),
# and the NVML/dcgm health reasons that are throttling rather than a sick GPU.
THROTTLE_REASONS = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                              "hw_power_brake"})
THROTTLE_PROBLEMS = frozenset({"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake", "clocks_below_max"})
GAUGES = ("requests_waiting", "requests_running", "kv_cache_usage_ratio", "requests_waiting_capacity")
KV_Q = 0.9  # kv_cache_usage_p90: the usage reached at ≥ 10% of the window's scrapes (history.Series.quantile)
# Gauges (waiting and running requests, KV usage) are read over the window's most recent quarter, like the
# serving CPU: a mean over the whole window reaches its threshold only once the state has filled a large part of
# it, i.e. several evaluations after the latency that the state causes breached (a queue that has just formed
# is a queue). Rates and means over requests (arrivals, prompt lengths) stay over the whole window: over a
# quarter, healthy bursts reach the thresholds. The baselines are learned from the same reads.
RECENT = 0.25


def record_engine(series: Series, server: ServerLike, target: str) -> None:
    """Remember the target's gauges from its newest scrape, and its restart count."""
    view = server.latest(target)
    if view is None:
        return
    for gauge in GAUGES:
        values = [mv.gauges[gauge] for mv in view.models.values() if gauge in mv.gauges]
        if values:
            series.add(f"{target}/{gauge}", view.ts, max(values) if gauge.endswith("ratio") else sum(values))
    series.add(f"{target}/restarts", view.ts, float(server.restarts().get(target, 0)))


def _rate(server: ServerLike, target: str, names: Collection[str], window: float, now: float) -> float | None:
    got = server.increase(target, names, window, now)
    return None if got is None or got[1] <= 0 else got[0] / got[1]


def _queued(server: ServerLike, target: str, window: float, now: float) -> float | None:
    """Return the requests waiting on average over the window: seconds queued per second (Little's law).

    From the engine's queue-time histogram (observed as requests finish), so a queue that forms and drains between
    two scrapes counts for the time it held, where the scraped `requests_waiting` gauge may never see it.
    """
    hist = server.histogram(target, None, "queue", window, now)
    span = server.span(target, "queue", window, now)
    # A page whose sum fell while its count did not (no reset seen) reads as no queue, never a negative one.
    return None if hist is None or span <= 0 else max(0.0, hist.sum / span)


def engine_signals(series: Series, server: ServerLike, target: str, window: float, hold: float, now: float,
                   probes: ProbeLoad | None = None, user_rate: tuple[float, float] | None = None) -> dict[str, float]:
    """Return the engine signals of a target over the diagnosis window (restarts over `hold`).

    `probes` (sloguard's own requests) adds the users' arrivals and makes the prompt mean theirs; `user_rate`
    (their healthy baseline and the seconds it was learned over) their surge z.
    """
    out: dict[str, float] = {}
    for gauge in GAUGES:
        value = series.mean(f"{target}/{gauge}", window * RECENT, now)
        if value is not None:
            out[gauge] = value
    # A queue that forms and drains between scrapes (a cache that holds one or two requests) shows at a scrape or
    # two of the quarter: its mean reads 0.2-0.6 waiting while requests wait at every arrival.
    waiting_peak = series.max(f"{target}/requests_waiting", window * RECENT, now)
    if waiting_peak is not None:
        out["requests_waiting_peak"] = waiting_peak
    if (queued := _queued(server, target, window * RECENT, now)) is not None:
        out["queue_seconds_per_second"] = queued
    kv_high = series.quantile(f"{target}/kv_cache_usage_ratio", KV_Q, window, now)
    if kv_high is not None:
        out["kv_cache_usage_p90"] = kv_high
    # The recent peak: a cache that just ran out shows at once, where the window's p90 waits for a tenth of it.
    kv_peak = series.max(f"{target}/kv_cache_usage_ratio", window * RECENT, now)
    if kv_peak is not None:
        out["kv_cache_usage_peak"] = kv_peak
    names = server.counter_names(target)
    finished = {n for n in names if n.startswith("finished:")}
    if "preemptions" in names and (v := _rate(server, target, ("preemptions",), window, now)) is not None:
        out["preemptions_per_second"] = v
    if (arriving := arrivals(series, server, target, finished, window, now)) is not None:
        out["request_rate"] = arriving[0] / arriving[1]
    if probes is not None:
        out |= users(series, server, target, finished, window, now, probes, user_rate)
    out |= prompt_length(series, server, target, names, finished, window, now, probes)
    out |= token_mix(server, target, window, now)
    decode = server.histogram(target, None, "tpot", window, now)  # the engine's own seconds per generated token
    if decode is not None and decode.count > 0:
        out["engine_token_seconds"] = decode.sum / decode.count
    hits = server.increase(target, ("prefix_cache_hits",), window, now)
    queries = server.increase(target, ("prefix_cache_queries",), window, now)
    if hits is not None and queries is not None and queries[0] > 0:
        out["prefix_cache_hit_ratio"] = hits[0] / queries[0]
    restarts = series.increase(f"{target}/restarts", hold, now)
    if restarts is not None:
        out["engine_restarts"] = restarts[0]
    return out


def token_mix(server: ServerLike, target: str, window: float, now: float) -> dict[str, float]:
    """Return prompt tokens per generated token and generated tokens per second, from the token counters alone.

    For engines with no request counter (llama.cpp): the prompts' share of the work rises with longer prompts and
    not with more requests of the same shape; the tokens generated per second rise with more demand. Each is the
    larger of its value over the window and over its recent half, so a change shows before it fills the window.
    """
    out: dict[str, float] = {}
    for span in (window, window * 0.5):
        prompt = server.increase(target, ("prompt_tokens",), span, now)
        output = server.increase(target, ("generation_tokens",), span, now)
        if output is None or output[1] <= 0:
            continue
        if prompt is not None and output[0] > 0:
            out["prompt_tokens_per_output_token"] = max(out.get("prompt_tokens_per_output_token", 0.0),
                                                        prompt[0] / output[0])
        out["output_tokens_per_second"] = max(out.get("output_tokens_per_second", 0.0), output[0] / output[1])
    return out


def index(samples: Iterable[Sample]) -> dict[str, list[Sample]]:
    """Return the evaluated samples the signals read (process, cold-start, GPU and canary series) by name."""
    out: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.name.startswith(_READ):
            out[s.name].append(s)
    return out


_READ = ("sloguard_process_", "sloguard_server_cold_starts", "sloguard_gpu_", "sloguard_canary_")


def record_host(series: Series, idx: Mapping[str, Sequence[Sample]], now: float) -> None:
    """Remember every watched process's CPU seconds (user + system) and cold-start count (`idx`: index())."""
    cpu: dict[str, float] = defaultdict(float)
    for s in idx.get("sloguard_process_cpu_seconds_total", ()):
        cpu[s.labels.get("process", "")] += s.value
    for proc, value in cpu.items():
        series.add(f"process/{proc}/cpu", now, value)
    for s in idx.get("sloguard_process_cpu_wait_seconds_total", ()):
        series.add(f"process/{s.labels.get('process', '')}/wait", now, s.value)
    for s in idx.get("sloguard_process_up", ()):
        series.add(f"process/{s.labels.get('process', '')}/up", now, s.value)
    for s in idx.get("sloguard_server_cold_starts_total", ()):
        series.add(f"process/{s.labels.get('process', '')}/cold", now, s.value)


def _cpu(series: Series, key: str, recent: float, now: float) -> float | None:
    """Return a process's CPU cores: the higher of its rate over `recent` and over its newest read interval.

    A process that just became CPU-bound shows it at its first read: over the quarter alone, at the defaults (75 s of
    15 s reads), a pinned process read 0.12, 0.25, 0.48, 0.66 cores and passed the row's 0.35 at the third read,
    three evaluations after its breach (benchmark trace, seed set 21000). A steady level reads the same either way.
    """
    rates = [r for r in (series.rate(key, recent, now), series.newest_rate(key, recent, now)) if r is not None]
    return max(rates) if rates else None


def host_signals(series: Series, processes: Sequence[str], window: float, hold: float,
                 now: float) -> tuple[dict[str, float], dict[str, str]]:
    """Return serving_cpu_cores/_wait/_demand (the most of the target's processes) and cold_starts, with which."""
    out: dict[str, float] = {}
    notes: dict[str, str] = {}
    rates = {p: r for p in processes if (r := _cpu(series, f"process/{p}/cpu", window * RECENT, now)) is not None}
    if rates:
        busiest = max(rates, key=lambda p: rates[p])
        out["serving_cpu_cores"], notes["serving_cpu_cores"] = rates[busiest], f"process {busiest}"
    waits = {p: r for p in processes if (r := _cpu(series, f"process/{p}/wait", window * RECENT, now)) is not None}
    if waits:
        starved = max(waits, key=lambda p: waits[p])
        out["serving_cpu_wait"], notes["serving_cpu_wait"] = waits[starved], f"process {starved}"
    # What a process asks of the CPU (running + runnable): a pinned process shows it whether or not it gets a core.
    demands = {p: rates[p] + waits[p] for p in rates.keys() & waits.keys()}
    if demands:
        hungriest = max(demands, key=lambda p: demands[p])
        out["serving_cpu_demand"], notes["serving_cpu_demand"] = demands[hungriest], f"process {hungriest}"
    # A watched process that ran within the hold and is gone at the newest read: the engine crashed or is restarting
    # (its requests fail before any counter can reset or a new process appear).
    down = [p for p in processes if series.max(f"process/{p}/up", hold, now) == 1.0
            and series.max(f"process/{p}/up", window * RECENT, now) is not None
            and _newest(series, f"process/{p}/up", now) == 0.0]
    if any(series.max(f"process/{p}/up", hold, now) is not None for p in processes):
        out["processes_down"] = float(len(down))
        if down:
            notes["processes_down"] = "process " + ", ".join(down)
    colds = {p: c[0] for p in processes if (c := series.increase(f"process/{p}/cold", hold, now)) is not None}
    if colds:
        out["cold_starts"] = sum(colds.values())
        restarted = [p for p, c in colds.items() if c > 0]
        if restarted:
            notes["cold_starts"] = "process " + ", ".join(restarted)
    return out, notes


def _newest(series: Series, key: str, now: float) -> float | None:
    """Return a series' newest value at or before `now`."""
    return series.last(key, now)


def _gpu_samples(idx: Mapping[str, Sequence[Sample]], target: str) -> dict[str, list[Sample]]:
    """Keep the target's own GPUs (dcgm source of that target) if it has any, else the node's (NVML)."""
    gpu = {n: v for n, v in idx.items() if n.startswith("sloguard_gpu_") or n.startswith("sloguard_canary_")}
    own = any(s.labels.get("target") == target for v in gpu.values() for s in v)
    return {n: [s for s in v if s.labels.get("target", "") == (target if own else "")] for n, v in gpu.items()}


def gpu_signals(samples: Mapping[str, Sequence[Sample]], target: str) -> tuple[dict[str, float], dict[str, str]]:
    """Return the GPU signals of a target with notes naming the GPUs and reasons behind them (`samples`: index())."""
    idx = _gpu_samples(samples, target)
    out: dict[str, float] = {}
    notes: dict[str, str] = {}
    events = idx.get("sloguard_gpu_clock_event_active", [])
    problems = idx.get("sloguard_gpu_health_problem", [])
    idle = {s.labels.get("uuid") for s in events if s.labels.get("reason") == "gpu_idle" and s.value >= 1}
    if events or problems:
        held = sorted({f"{s.labels.get('uuid')}:{s.labels.get('reason')}" for s in events
                       if s.labels.get("reason") in THROTTLE_REASONS and s.value >= 1}
                      | {f"{s.labels.get('uuid')}:{s.labels.get('reason')}" for s in problems
                         if s.labels.get("reason") in THROTTLE_PROBLEMS and s.value >= 1})
        out["gpu_throttle_reasons"] = float(len(held))
        if held:
            notes["gpu_throttle_reasons"] = ", ".join(held)
    if problems:
        sick = sorted(f"{s.labels.get('uuid')}:{s.labels.get('reason')}" for s in problems
                      if s.labels.get("reason") not in THROTTLE_PROBLEMS and s.value >= 1)
        out["gpu_health_problems"] = float(len(sick))
        if sick:
            notes["gpu_health_problems"] = ", ".join(sick)
    maxes = {s.labels.get("uuid"): s.value for s in idx.get("sloguard_gpu_sm_clock_max_hertz", []) if s.value > 0}
    ratios = {s.labels.get("uuid"): s.value / maxes[s.labels.get("uuid")]
              for s in idx.get("sloguard_gpu_sm_clock_hertz", []) if s.labels.get("uuid") in maxes
              and s.labels.get("uuid") not in idle}
    if ratios:
        low = min(ratios, key=lambda u: ratios[u])
        out["gpu_sm_clock_ratio"], notes["gpu_sm_clock_ratio"] = ratios[low], f"GPU {low}"
    util = [s.value for s in idx.get("sloguard_gpu_utilization_ratio", [])]
    if util:
        out["gpu_utilization_ratio"] = sum(util) / len(util)
    canary = [s.value for s in idx.get("sloguard_canary_degraded", [])]
    if canary:
        out["canary_degraded"] = max(canary)
    return out, notes
