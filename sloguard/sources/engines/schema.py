"""The shape of an engine map: which exposed families feed each canonical signal, in what unit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

AliasKind = Literal["histogram", "gauge", "counter", "histogram_sum", "mean", "ratio", "difference"]
Aggregate = Literal["sum", "mean", "max"]


@dataclass(frozen=True, slots=True)
class Alias:
    """One exposed family that can feed a canonical signal.

    kind: `histogram` (family with _bucket/_sum/_count), `gauge`, `counter` (name with or without
    `_total`), `histogram_sum` (a counter read from a histogram's `_sum`), or `mean` (a cumulative
    duration counter `family` over a cumulative count counter `count_family`: yields a histogram with
    only the +Inf bucket, i.e. a mean per window and no quantiles), and two gauges derived from parts where
    an engine exposes no direct one: `ratio` (`family{match}` / `other{other_match}`, e.g. KV blocks used /
    max) and `difference` (`family{match}` - `other{other_match}`, floored at 0).
    scale multiplies values (bucket bounds, sums, gauge values) into base units (seconds, ratio 0..1).
    match keeps only series whose labels equal these values; agg combines series of one model.
    """

    family: str
    kind: AliasKind = "histogram"
    scale: float = 1.0
    match: Mapping[str, str] = field(default_factory=dict)
    agg: Aggregate = "sum"
    count_family: str = ""
    reason: str = ""
    other: str = ""
    other_match: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EngineMap:
    """Data that turns one engine's exposition into canonical signals; the first alias present wins."""

    name: str
    prefixes: tuple[str, ...]
    model_label: str | None
    histograms: Mapping[str, tuple[Alias, ...]] = field(default_factory=dict)
    gauges: Mapping[str, tuple[Alias, ...]] = field(default_factory=dict)
    counters: Mapping[str, tuple[Alias, ...]] = field(default_factory=dict)
    finished: tuple[Alias, ...] = ()
    reason_label: str = "finished_reason"
    notes: Mapping[str, str] = field(default_factory=dict)


def hist(*families: str, scale: float = 1.0) -> tuple[Alias, ...]:
    """Return histogram aliases in preference order."""
    return tuple(Alias(f, "histogram", scale) for f in families)


def gauge(*families: str, agg: Aggregate = "sum", scale: float = 1.0) -> tuple[Alias, ...]:
    """Return gauge aliases in preference order."""
    return tuple(Alias(f, "gauge", scale, agg=agg) for f in families)


def ratio(family: str, match: Mapping[str, str], other: str, other_match: Mapping[str, str]) -> Alias:
    """Return a gauge derived as family{match} / other{other_match} (sums per model; 0 denominators skipped)."""
    return Alias(family, "ratio", match=match, other=other, other_match=other_match)


def difference(family: str, match: Mapping[str, str], other: str, other_match: Mapping[str, str]) -> Alias:
    """Return a gauge derived as family{match} - other{other_match} per model, floored at 0."""
    return Alias(family, "difference", match=match, other=other, other_match=other_match)


def counter(*families: str) -> tuple[Alias, ...]:
    """Return counter aliases in preference order (each matches `name` and `name_total`)."""
    return tuple(Alias(f, "counter") for f in families)
