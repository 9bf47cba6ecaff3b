"""A small builder for exported families: created on first sample, so empty families are never exported."""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric


class Families:
    """Collect samples into families created on first use, so empty families are never exported."""

    def __init__(self) -> None:
        self._fams: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}

    def add(self, name: str, kind: str, doc: str, labels: dict[str, str], value: float) -> None:
        """Add one sample; the family's label names come from the first sample's keys."""
        fam = self._fams.get(name)
        if fam is None:
            cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            fam = self._fams[name] = cls(name, doc, labels=list(labels))
        fam.add_metric(list(labels.values()), value)

    def all(self) -> list[Metric]:
        """Return the families in insertion order."""
        return list(self._fams.values())
