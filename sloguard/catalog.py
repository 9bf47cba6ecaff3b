"""Every family sloguard exports, from the producers' own declarations (sloguard.families).

`sloguard check` reads it to reject alert expressions over names or labels sloguard never exports. PRODUCERS
lists the modules that declare families; a test renders the exporter and fails on a family missing here.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from sloguard.families import DECLARED, ORIGINS, FamilyDef

PRODUCERS = (
    "sloguard.slo.export", "sloguard.exporter.selfmetrics", "sloguard.untrusted", "sloguard.persistence",
    "sloguard.probes.metrics", "sloguard.traces.metrics", "sloguard.probes.checkmetrics",
    "sloguard.guardrails.stagebudget", "sloguard.guardrails.server", "sloguard.sources.runner",
    "sloguard.sources.host", "sloguard.sources.scrape", "sloguard.reports.service",
    "sloguard.alerts.service", "sloguard.diagnose.service", "sloguard.gpu.families", "sloguard.windows.serverexport",
    "sloguard.discovery.metrics", "sloguard.fleet.service", "sloguard.fleet.leader", "sloguard.incident.service",
    "sloguard.web.guard",
)


def families() -> Mapping[str, FamilyDef]:
    """Return family name -> declaration for every family the PRODUCERS declare (what a fresh `check` sees)."""
    for module in PRODUCERS:
        importlib.import_module(module)
    return {name: fd for name, fd in DECLARED.items() if ORIGINS[name] & set(PRODUCERS)}


def series() -> dict[str, tuple[str, ...]]:
    """Return every sample name sloguard can export (`_total`, `_bucket`, `_info` ...) with its label names."""
    out: dict[str, tuple[str, ...]] = {}
    for fd in families().values():
        for name, labels in fd.samples().items():
            out[name] = (*out.get(name, ()), *(n for n in labels if n not in out.get(name, ())))
    return out


def label_known(label: str, labels: tuple[str, ...]) -> bool:
    """Return whether a label name is one of `labels` (a `prefix*` entry admits every name with that prefix)."""
    return any(label == n or (n.endswith("*") and label.startswith(n[:-1])) for n in labels)
