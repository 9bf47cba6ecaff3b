"""The Snapshot the exporter serves: immutable parts swapped in by sources and evaluation, rendered once per change."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from prometheus_client import exposition, openmetrics
from prometheus_client.metrics_core import Metric

from sloguard.model import Sample


class _Families:
    def __init__(self, families: Sequence[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def merge_families(parts: Iterable[Sequence[Metric]]) -> list[Metric]:
    """Merge families of the same name from different parts (e.g. two scrape targets) into one each."""
    merged: dict[str, Metric] = {}
    for fams in parts:
        for fam in fams:
            have = merged.get(fam.name)
            if have is None:
                copy = Metric(fam.name, fam.documentation, fam.type, fam.unit)
                copy.samples = list(fam.samples)
                merged[fam.name] = copy
            else:
                have.samples.extend(fam.samples)
    return list(merged.values())


class Snapshot:
    """Parts keyed by producer; `put` swaps one part (copy-on-write), renders are cached until the next put."""

    def __init__(self) -> None:
        self._parts: Mapping[str, tuple[Metric, ...]] = MappingProxyType({})
        self._lock = threading.Lock()
        self._cache: dict[bool, bytes] = {}
        self.version = 0
        self.last_render_seconds = 0.0

    def put(self, key: str, families: Sequence[Metric]) -> None:
        """Replace the families of one producer."""
        with self._lock:
            parts = dict(self._parts)
            parts[key] = tuple(families)
            self._parts = MappingProxyType(parts)
            self._cache = {}
            self.version += 1

    def drop(self, key: str) -> None:
        """Remove a producer's families (its source is down or gone), so stale values are not served."""
        with self._lock:
            if key in self._parts:
                parts = dict(self._parts)
                del parts[key]
                self._parts = MappingProxyType(parts)
                self._cache = {}
                self.version += 1

    def keys(self) -> list[str]:
        """Return the producers currently present."""
        return list(self._parts)

    def families(self) -> list[Metric]:
        """Return all families, same-named ones merged."""
        return merge_families(self._parts[k] for k in sorted(self._parts))

    def samples(self) -> list[Sample]:
        """Return every sample as a plain value (what the alert engine evaluates)."""
        return [Sample(s.name, s.labels, s.value) for fam in self.families() for s in fam.samples]

    def cached(self, openmetrics_format: bool = False) -> bytes | None:
        """Return the exposition bytes if rendered since the last change, else None."""
        return self._cache.get(openmetrics_format)

    def render(self, openmetrics_format: bool = False) -> bytes:
        """Return the exposition bytes; rendered at most once per change, so a scrape costs a dict lookup."""
        cache = self._cache
        body = cache.get(openmetrics_format)
        if body is None:
            start = time.perf_counter()
            fams = _Families(self.families())
            gen = openmetrics.exposition.generate_latest if openmetrics_format else exposition.generate_latest
            body = gen(fams)  # type: ignore[arg-type,unused-ignore]
            self.last_render_seconds = time.perf_counter() - start
            cache[openmetrics_format] = body
        return body
