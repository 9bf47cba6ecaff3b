"""Exposition helpers for tests: flatten families, list names, and ask promtool whether they are clean."""

from __future__ import annotations

import subprocess
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric


def samples(families: list[Metric]) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Flatten families to {(sample name, labels): value}."""
    return {(s.name, frozenset(s.labels.items())): s.value for f in families for s in f.samples}


def names(families: list[Metric]) -> set[str]:
    """Return the sample names present."""
    return {s.name for f in families for s in f.samples}


def promtool_check(families: list[Metric]) -> str:
    """Render the families and return promtool's complaints ("" when clean)."""
    class Fixed:
        def collect(self) -> Any:
            return iter(families)

    reg = CollectorRegistry()
    reg.register(Fixed())
    out = subprocess.run(["promtool", "check", "metrics"], input=generate_latest(reg), capture_output=True,
                         check=False)
    return (out.stdout + out.stderr).decode() if out.returncode else ""
