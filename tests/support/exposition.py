"""Exposition helpers for tests: flatten families, list names, ask promtool whether they are clean, and whether
`sloguard check` knows every name and label rendered (sloguard.catalog)."""

from __future__ import annotations

import subprocess
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from sloguard import catalog


def samples(families: list[Metric]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Flatten families to {(sample name, labels): value}."""
    return {(s.name, frozenset(s.labels.items())): s.value for f in families for s in f.samples}


def names(families: list[Metric]) -> set[str]:
    """Return the sample names present."""
    return {s.name for f in families for s in f.samples}


def unknown_to_check(families: list[Metric]) -> list[str]:
    """Return each rendered sample name or label name that `sloguard check` would reject in an alert expression."""
    known = catalog.series()
    out = set()
    for f in families:
        for s in f.samples:
            labels = known.get(s.name)
            if labels is None:
                out.add(f"{s.name}: not declared (sloguard.families.declare)")
                continue
            out |= {f"{s.name}: label {k} not declared" for k in s.labels if not catalog.label_known(k, labels)}
    return sorted(out)


def unknown_in_text(exposition: str) -> list[str]:
    """Return unknown_to_check() of a text exposition."""
    return unknown_to_check(list(text_string_to_metric_families(exposition)))


def promtool_check(families: list[Metric]) -> str:
    """Render the families and return promtool's complaints ("" when clean)."""
    class Fixed:
        def collect(self) -> Any:
            return iter(families)

    reg = CollectorRegistry()
    reg.register(Fixed())
    out = subprocess.run(["promtool", "check", "metrics"], input=generate_latest(reg), capture_output=True,
                         check=False)
    unknown = "\n".join(unknown_to_check(families))
    return ((out.stdout + out.stderr).decode() if out.returncode else "") + unknown
