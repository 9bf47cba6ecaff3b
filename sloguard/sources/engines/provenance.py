"""Which raw families fed each canonical signal of a scrape, and which signals it cannot give ("not available").

Follows exactly the alias choice of `apply_map` (the first alias with data wins), so what `inspect-metrics`
prints is what the daemon reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sloguard.model import Sample
from sloguard.sources.engines.normalise import _counters, _finished, _gauges, _histograms, index
from sloguard.sources.engines.schema import Alias, EngineMap

Reader = Callable[[Alias, Mapping[str, Sequence[Sample]], Callable[[Sample], str]], Mapping[str, object]]

# exported signal (sloguard_server_<name>) -> (engine map table, internal signals it is computed from)
CANONICAL: dict[str, tuple[str, tuple[str, ...]]] = {
    **{f"{s}_seconds": ("histograms", (s,)) for s in
       ("ttft", "itl", "tpot", "e2e", "queue", "prefill", "decode", "inference")},
    "requests_running": ("gauges", ("requests_running",)),
    "requests_waiting": ("gauges", ("requests_waiting",)),
    "kv_cache_usage_ratio": ("gauges", ("kv_cache_usage_ratio",)),
    "prefix_cache_hit_ratio": ("counters", ("prefix_cache_hits", "prefix_cache_queries")),
    "prompt_tokens_per_second": ("counters", ("prompt_tokens",)),
    "generation_tokens_per_second": ("counters", ("generation_tokens",)),
    "requests_finished_per_second": ("finished", ()),
    "preemptions_per_second": ("counters", ("preemptions",)),
}
_READERS: dict[str, Reader] = {"histograms": _histograms, "gauges": _gauges, "counters": _counters}


@dataclass(frozen=True, slots=True)
class Fed:
    """One canonical signal: the raw series it was computed from (empty: not available) and how."""

    signal: str
    sources: tuple[str, ...]
    how: str = ""

    @property
    def available(self) -> bool:
        return bool(self.sources)


def provenance(emap: EngineMap, samples: Sequence[Sample]) -> list[Fed]:
    """Return, for every canonical signal in CANONICAL order, the raw families that fed it in `samples`."""
    by_name = index(samples)

    def any_model(_: Sample) -> str:
        return ""

    out = []
    for signal, (table, parts) in CANONICAL.items():
        if table == "finished":
            present = [a for a in emap.finished if _finished(_only(emap, a), by_name, any_model)]
            out.append(Fed(signal, tuple(_describe(a, by_name) for a in present), "counter" if present else ""))
            continue
        chosen = [_chosen(getattr(emap, table).get(p, ()), _READERS[table], by_name, any_model) for p in parts]
        if any(c is None for c in chosen):
            out.append(Fed(signal, (), emap.notes.get(signal.removesuffix("_seconds"), "")))
            continue
        used = [c for c in chosen if c is not None]
        out.append(Fed(signal, tuple(dict.fromkeys(_describe(a, by_name) for a in used)), used[0].kind))
    return out


def _only(emap: EngineMap, alias: Alias) -> EngineMap:
    return EngineMap(emap.name, emap.prefixes, emap.model_label, finished=(alias,), reason_label=emap.reason_label)


def _chosen(aliases: Sequence[Alias], read: Reader, by_name: Mapping[str, Sequence[Sample]],
            model_of: Callable[[Sample], str]) -> Alias | None:
    return next((a for a in aliases if read(a, by_name, model_of)), None)


def _selector(family: str, match: Mapping[str, str]) -> str:
    labels = ",".join(f'{k}="{v}"' for k, v in sorted(match.items()))
    return f"{family}{{{labels}}}" if labels else family


def _describe(a: Alias, by_name: Mapping[str, Sequence[Sample]]) -> str:
    """Render an alias as the raw series it reads (the optional second part of a sum only when present)."""
    one = _selector(a.family, a.match)
    if a.kind == "histogram":
        return f"{one} (histogram)"
    if a.kind == "histogram_sum":
        return f"{a.family}_sum"
    if a.kind == "mean":
        return f"{a.family} / {a.count_family}"
    if a.kind == "ratio":
        return f"{one} / {_selector(a.other, a.other_match)}"
    if a.kind == "difference":
        return f"{one} - {_selector(a.other, a.other_match)}"
    if a.other and (a.other in by_name or f"{a.other}_total" in by_name):
        return f"{one} + {_selector(a.other, a.other_match)}"
    return one
