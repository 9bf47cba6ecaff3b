"""The server's own view of one stage, from the scrapes taken while it ran (pure).

Histogram signals (queue, prefill, decode, TTFT, ITL, E2E, ...) are read over the stage as the delta
between the last scrape before the measured window and the last scrape after it: p50/p95/p99 with
Prometheus `histogram_quantile` maths (bucket resolution, sloguard.histogram), count and mean. Gauges
(running, waiting, KV-cache usage) are averaged and maximised over the scrapes inside the window;
counters (preemptions, tokens, finished requests) as their increase. Every model of the target is
summed; the engine's own view includes traffic that is not the bench's (say so when comparing).
GPU gauges (NVML, where present) are averaged and maximised per GPU uuid the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sloguard import histogram
from sloguard.model import Histogram, ModelView, ServerView

QS = (0.5, 0.95, 0.99)
GPU_GAUGES = ("sloguard_gpu_utilization_ratio", "sloguard_gpu_sm_active_ratio", "sloguard_gpu_memory_used_bytes",
              "sloguard_gpu_power_watts")
GpuSample = tuple[float, Mapping[tuple[str, str], float]]  # (ts, {(family, uuid): value})


def _hist_summary(h: Histogram) -> dict[str, float | None]:
    out: dict[str, float | None] = {"count": h.count, "mean": h.sum / h.count if h.count else None}
    for q in QS:
        out[f"p{round(q * 100)}"] = histogram.quantile(q, h) if h.count else None
    return out


def _models(view: ServerView) -> Sequence[ModelView]:
    return list(view.models.values())


def _histograms(view: ServerView) -> dict[str, Histogram]:
    names = {n for m in _models(view) for n in m.histograms}
    merged = {n: histogram.merge(m.histograms[n] for m in _models(view) if n in m.histograms) for n in names}
    return {n: h for n, h in merged.items() if h is not None}


def _sum(view: ServerView, kind: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in _models(view):
        for name, value in (m.gauges if kind == "gauges" else m.counters).items():
            out[name] = out.get(name, 0.0) + value
    return out


def summarise_server(views: Sequence[ServerView], start: float) -> dict[str, Any] | None:
    """Summarise one stage's scrapes, the last one taken after it ended; its measured window began at `start`."""
    before = [v for v in views if v.ts <= start]
    inside = [v for v in views if start < v.ts]
    if not inside:
        return None
    first = before[-1] if before else inside[0]
    last = inside[-1]
    h0, h1 = _histograms(first), _histograms(last)
    histograms = {n: _hist_summary(histogram.delta(h0[n], h1[n]) if n in h0 else h1[n]) for n in sorted(h1)}
    c0, c1 = _sum(first, "counters"), _sum(last, "counters")
    counters = {n: c1[n] - c0.get(n, 0.0) if c1[n] >= c0.get(n, 0.0) else c1[n] for n in sorted(c1)}
    per_scrape = [_sum(v, "gauges") for v in inside]
    gauges: dict[str, dict[str, float]] = {}
    for name in sorted({g for scrape in per_scrape for g in scrape}):
        values = [scrape[name] for scrape in per_scrape if name in scrape]
        gauges[name] = {"mean": sum(values) / len(values), "max": max(values)}
    return {"engine": last.engine, "scrapes": len(inside) + (1 if before else 0), "seconds": last.ts - first.ts,
            "histograms": histograms, "gauges": gauges, "counters": counters}


def summarise_gpu(samples: Sequence[GpuSample], start: float, end: float) -> dict[str, Any] | None:
    """Average and maximise GPU gauges per uuid over the samples inside [start, end]."""
    inside = [values for ts, values in samples if start <= ts <= end]
    if not inside:
        return None
    series: dict[str, dict[str, list[float]]] = {}
    for values in inside:
        for (family, uuid), v in values.items():
            series.setdefault(uuid, {}).setdefault(family.removeprefix("sloguard_gpu_"), []).append(v)
    return {uuid: {name: {"mean": sum(vs) / len(vs), "max": max(vs)} for name, vs in sorted(fams.items())}
            for uuid, fams in sorted(series.items())}


CACHE_SERVED = 0.5  # a stage whose prompts came from the engine's cache at least this much measured the cache


def cache_share(server: Mapping[str, Any] | None) -> float | None:
    """Return the share of a stage's prompt tokens the engine served from its prompt cache (None: not reported).

    vLLM and SGLang count prefix-cache hits and queries in tokens; llama.cpp counts cached prompt tokens apart from
    processed ones (`prompt_tokens_cached_total`, the `cache_n` of its timings); vLLM 0.32 also splits prompt tokens
    by source (`prompt_tokens_by_source`): all give hits ÷ all prompt tokens.
    """
    counters = (server or {}).get("counters", {})
    hits, queries = counters.get("prefix_cache_hits"), counters.get("prefix_cache_queries")
    if hits is None or not queries:
        computed, total = counters.get("prompt_tokens_computed"), counters.get("prompt_tokens")
        if computed is None or not total:
            return None
        return max(0.0, 1.0 - float(computed) / float(total))
    return float(hits) / float(queries)


def cache_warnings(stages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Return one warning per stage that the engine's prompt cache served (rows: the runner's stage rows)."""
    out = []
    for row in stages:
        share = cache_share(row.get("server"))
        if share is not None and share >= CACHE_SERVED:
            out.append(f"sloguard bench: warning: stage {row.get('stage', '?')}: {share:.0%} of its prompt tokens "
                       "came from the engine's prompt cache: it measured the cache, not prefill (a rerun with "
                       "--same-prompts, or repeated dataset rows); rerun without --same-prompts")
    return out
