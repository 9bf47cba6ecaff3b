"""Exported families: each declared once (name, type, help, label names) where it is produced, and a builder.

A producer declares its families at import (`declare`) and builds them from the declaration (`FamilyDef.new`),
so the names and labels `sloguard check` accepts in alert expressions (sloguard.catalog) are the ones
the exporter uses. A label name ending in `*` stands for every label with that prefix (`label_*`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
)
from prometheus_client.metrics_core import Metric

KINDS = ("gauge", "counter", "histogram", "summary", "info")


@dataclass(frozen=True, slots=True)
class FamilyDef:
    """One exported family: name (a counter's without `_total`, an info's without `_info`), type, help, labels."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...] = ()

    def new(self, labels: Sequence[str] | None = None) -> Metric:
        """Return an empty family; `labels` replaces the declared names where they vary (`label_<key>`)."""
        names = list(self.labels if labels is None else labels)
        if self.kind == "counter":
            return CounterMetricFamily(self.name, self.help, labels=names)
        if self.kind == "histogram":
            return HistogramMetricFamily(self.name, self.help, labels=names)
        if self.kind == "info":
            return InfoMetricFamily(self.name, self.help, labels=names)
        if self.kind == "summary":
            return Metric(self.name, self.help, "summary")
        return GaugeMetricFamily(self.name, self.help, labels=names)

    def gauge(self, labels: Sequence[str] | None = None) -> GaugeMetricFamily:
        """Return an empty gauge family (the declaration's kind must be gauge)."""
        assert self.kind == "gauge", self.name
        return GaugeMetricFamily(self.name, self.help, labels=list(self.labels if labels is None else labels))

    def counter(self, labels: Sequence[str] | None = None) -> CounterMetricFamily:
        """Return an empty counter family (the declaration's kind must be counter)."""
        assert self.kind == "counter", self.name
        return CounterMetricFamily(self.name, self.help, labels=list(self.labels if labels is None else labels))

    def histogram(self) -> HistogramMetricFamily:
        """Return an empty histogram family (the declaration's kind must be histogram)."""
        assert self.kind == "histogram", self.name
        return HistogramMetricFamily(self.name, self.help, labels=list(self.labels))

    def samples(self) -> dict[str, tuple[str, ...]]:
        """Return the sample names this family exposes, each with its label names (le, quantile included)."""
        if self.kind == "counter":
            return {f"{self.name}_total": self.labels}
        if self.kind == "info":
            return {f"{self.name}_info": self.labels}
        if self.kind == "histogram":
            return {f"{self.name}_bucket": (*self.labels, "le"), f"{self.name}_sum": self.labels,
                    f"{self.name}_count": self.labels}
        if self.kind == "summary":
            return {self.name: (*self.labels, "quantile")}
        return {self.name: self.labels}


DECLARED: dict[str, FamilyDef] = {}
ORIGINS: dict[str, set[str]] = {}  # family name -> the modules that declared it (catalog.PRODUCERS must list them)


def declare(name: str, kind: str, help: str, labels: Sequence[str] = ()) -> FamilyDef:
    """Register one family and return it (registered twice: the first help, the union of both label sets)."""
    assert kind in KINDS, kind
    ORIGINS.setdefault(name, set()).add(str(sys._getframe(1).f_globals.get("__name__", "")))
    own = FamilyDef(name, kind, help, tuple(labels))
    prev = DECLARED.get(name)
    if prev is None:
        DECLARED[name] = own
    else:
        assert prev.kind == kind, f"{name}: declared as {prev.kind} and {kind}"
        DECLARED[name] = FamilyDef(name, kind, prev.help, (*prev.labels, *(n for n in labels if n not in prev.labels)))
    return own


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

    def put(self, fd: FamilyDef, labels: dict[str, str], value: float) -> None:
        """Add one sample of a declared family."""
        self.add(fd.name, fd.kind, fd.help, labels, value)

    def all(self) -> list[Metric]:
        """Return the families in insertion order."""
        return list(self._fams.values())
