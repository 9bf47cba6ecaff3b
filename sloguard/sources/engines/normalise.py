"""Apply an engine map to parsed samples: one pass to index, then pure lookups; never raises on odd data."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from sloguard.model import Histogram, ModelView, Sample, ServerView
from sloguard.sources.engines.schema import Alias, EngineMap

Index = Mapping[str, Sequence[Sample]]
ModelOf = Callable[[Sample], str]
INF = math.inf
T = TypeVar("T")
_AGGREGATES: dict[str, Callable[[list[float]], float]] = {
    "sum": lambda v: float(sum(v)),
    "max": max,
    "mean": lambda v: sum(v) / len(v),
}


def index(samples: Sequence[Sample]) -> dict[str, list[Sample]]:
    """Group samples by name; NaN values are dropped (they carry no count)."""
    out: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.value == s.value:
            out[s.name].append(s)
    return out


def apply_map(emap: EngineMap, by_name: Index, target: str, ts: float, default_model: str) -> ServerView:
    """Return the canonical view of one scrape; signals the scrape lacks are omitted."""
    label = emap.model_label

    def model_of(s: Sample) -> str:
        return s.labels.get(label, default_model) if label else default_model

    hists: dict[str, dict[str, Histogram]] = {
        sig: _first(aliases, lambda a: _histograms(a, by_name, model_of))
        for sig, aliases in emap.histograms.items()
    }
    gauges: dict[str, dict[str, float]] = {
        sig: _first(aliases, lambda a: _gauges(a, by_name, model_of)) for sig, aliases in emap.gauges.items()
    }
    counters: dict[str, dict[str, float]] = {
        sig: _first(aliases, lambda a: _counters(a, by_name, model_of)) for sig, aliases in emap.counters.items()
    }
    finished = _finished(emap, by_name, model_of)
    models = set(finished)
    for table in hists.values():
        models.update(table)
    for values in (*gauges.values(), *counters.values()):
        models.update(values)
    views = {
        m: ModelView(
            model=m,
            histograms={sig: t[m] for sig, t in hists.items() if m in t},
            gauges={sig: t[m] for sig, t in gauges.items() if m in t},
            counters={sig: t[m] for sig, t in counters.items() if m in t},
            finished_by_reason=finished.get(m, {}),
        )
        for m in sorted(models)
    }
    return ServerView(target=target, engine=emap.name, ts=ts, models=views)


def _first(aliases: Sequence[Alias], read: Callable[[Alias], dict[str, T]]) -> dict[str, T]:
    for alias in aliases:
        found = read(alias)
        if found:
            return found
    return {}


def _series(by_name: Index, name: str, alias: Alias) -> list[Sample]:
    got = by_name.get(name, ())
    if not alias.match:
        return list(got)
    items = alias.match.items()
    return [s for s in got if all(s.labels.get(k) == v for k, v in items)]


def _counter_series(by_name: Index, alias: Alias, family: str) -> list[Sample]:
    return _series(by_name, family + "_total", alias) or _series(by_name, family, alias)


def _sum(samples: Sequence[Sample], model_of: ModelOf, scale: float = 1.0) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for s in samples:
        out[model_of(s)] += s.value * scale
    return dict(out)


def _histograms(alias: Alias, by_name: Index, model_of: ModelOf) -> dict[str, Histogram]:
    if alias.kind == "mean":
        return _means(alias, by_name, model_of)
    if alias.kind != "histogram":
        return {}
    f, scale = alias.family, alias.scale
    buckets: dict[str, dict[float, float]] = defaultdict(dict)
    for s in _series(by_name, f + "_bucket", alias):
        try:
            bound = float(s.labels["le"]) * scale
        except (KeyError, ValueError):
            continue
        per = buckets[model_of(s)]
        per[bound] = per.get(bound, 0.0) + s.value
    counts = _sum(_series(by_name, f + "_count", alias), model_of)
    sums = _sum(_series(by_name, f + "_sum", alias), model_of, scale)
    out = {}
    for m in set(buckets) | set(counts):
        per = buckets.get(m, {})
        count = counts.get(m, per.get(INF, 0.0))
        per.setdefault(INF, count)
        out[m] = Histogram(tuple(sorted(per.items())), count, sums.get(m, 0.0))
    return out


def _means(alias: Alias, by_name: Index, model_of: ModelOf) -> dict[str, Histogram]:
    durations = _sum(_counter_series(by_name, alias, alias.family.removesuffix("_total")), model_of, alias.scale)
    counts = _sum(_counter_series(by_name, alias, alias.count_family.removesuffix("_total")), model_of)
    return {m: Histogram(((INF, counts[m]),), counts[m], d) for m, d in durations.items() if m in counts}


def _gauges(alias: Alias, by_name: Index, model_of: ModelOf) -> dict[str, float]:
    if alias.kind in ("ratio", "difference"):
        return _derived(alias, by_name, model_of)
    if alias.kind != "gauge":
        return {}
    groups: dict[str, list[float]] = defaultdict(list)
    for s in _series(by_name, alias.family, alias):
        groups[model_of(s)].append(s.value * alias.scale)
    return {m: _AGGREGATES[alias.agg](v) for m, v in groups.items()}


def _derived(alias: Alias, by_name: Index, model_of: ModelOf) -> dict[str, float]:
    """Combine two summed gauges per model: a ratio (denominator > 0 only) or a difference floored at 0."""
    part = _sum(_series(by_name, alias.family, alias), model_of)
    other_alias = Alias(alias.other, "gauge", match=alias.other_match)
    whole = _sum(_series(by_name, alias.other, other_alias), model_of)
    if alias.kind == "ratio":
        return {m: part[m] / whole[m] * alias.scale for m in part if whole.get(m, 0.0) > 0}
    return {m: max(0.0, part[m] - whole[m]) * alias.scale for m in part if m in whole}


def _counters(alias: Alias, by_name: Index, model_of: ModelOf) -> dict[str, float]:
    if alias.kind == "histogram_sum":
        return _sum(_series(by_name, alias.family + "_sum", alias), model_of, alias.scale)
    found = _sum(_counter_series(by_name, alias, alias.family), model_of, alias.scale)
    if alias.other and found:  # a counter that is the sum of two exposed parts (e.g. processed + cached tokens)
        part = Alias(alias.other, "counter", match=alias.other_match)
        for m, v in _sum(_counter_series(by_name, part, alias.other), model_of, alias.scale).items():
            found[m] = found.get(m, 0.0) + v
    return found


def _finished(emap: EngineMap, by_name: Index, model_of: ModelOf) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for alias in emap.finished:
        for s in _counter_series(by_name, alias, alias.family):
            reason = alias.reason or s.labels.get(emap.reason_label, "unknown")
            per = out[model_of(s)]
            per[reason] = per.get(reason, 0.0) + s.value
    return dict(out)
