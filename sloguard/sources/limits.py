"""Per-target scrape limits and the bounded digest of one page: parse, normalise, count what it would export.

A page over a limit is rejected whole (nothing of it is kept) with the limit's name as the failure reason,
as Prometheus does: `sample_limit`, `label_limit`, `label_value_length_limit`, and `series_limit` (the
`sloguard_server_*` series the normalised page would add, so one target's exported series stay bounded).
"""

from __future__ import annotations

from dataclasses import dataclass

from sloguard.config.spec import TargetSpec
from sloguard.model import SERVER_QUANTILES, SERVER_WINDOWS, ServerView
from sloguard.sources.base import SourceError
from sloguard.sources.engines import ENGINES, normalise
from sloguard.sources.parse import LimitExceeded, ParseLimits, parse_page


@dataclass(frozen=True, slots=True)
class ScrapeLimits:
    """The limits of one target; 0 means no limit."""

    samples: int = 50_000
    labels: int = 64
    label_value_length: int = 1024
    series: int = 5_000

    @classmethod
    def of(cls, spec: TargetSpec) -> ScrapeLimits:
        """Return the limits a target's config sets."""
        return cls(spec.sample_limit, spec.label_limit, spec.label_value_length_limit, spec.series_limit)

    def parse(self) -> ParseLimits:
        """Return the parser's share of the limits."""
        return ParseLimits(self.samples, self.labels, self.label_value_length)


def exported_series(view: ServerView) -> int:
    """Return an upper bound of the `sloguard_server_*` series `view` adds to the exposition."""
    total = 0
    for mv in view.models.values():
        total += len(mv.histograms) * (len(SERVER_QUANTILES) + 1) * len(SERVER_WINDOWS)
        total += len(mv.gauges)
        total += (len(mv.counters) + len(mv.finished_by_reason)) * len(SERVER_WINDOWS)
    return total


@dataclass(frozen=True, slots=True)
class Digest:
    """What one page yields: the normalised view and how many samples it held."""

    view: ServerView
    samples: int


def digest(text: str, spec: TargetSpec, ts: float, limits: ScrapeLimits) -> Digest:
    """Parse and normalise one page under `limits`; raise SourceError(limit name) or ParseError.

    Pure and thread-safe: the scrape source runs it off the event loop.
    """
    try:
        samples, count = parse_page(text, limits.parse(), _prefixes(spec.engine))
    except LimitExceeded as exc:
        raise SourceError(exc.reason, str(exc)) from None
    view = normalise(samples, spec.engine, spec.name, ts, spec.model or "default")
    if not view.models:
        raise SourceError("no_known_metrics", f"no {spec.engine} engine metrics in {count} samples")
    series = exported_series(view)
    if limits.series and series > limits.series:
        raise SourceError("series_limit", f"{len(view.models)} models would export about {series} series, more "
                                          f"than series_limit {limits.series}")
    return Digest(view, count)


def _prefixes(engine: str) -> tuple[str, ...] | None:
    """Return the name prefixes normalisation can use (others are validated and counted, never kept)."""
    if engine == "auto":
        return tuple(p for m in ENGINES.values() for p in m.prefixes)
    return ENGINES[engine].prefixes if engine in ENGINES else None
