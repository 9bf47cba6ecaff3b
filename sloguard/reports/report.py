"""From two sides to a rendered report: check they compare, compute every cell, assemble, render."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sloguard.reports import compat
from sloguard.reports.bench import NEEDS_CONFIG
from sloguard.reports.bottlenecks import bottlenecks
from sloguard.reports.build import document
from sloguard.reports.data import Side
from sloguard.reports.regression import Settings, compare

# The sample size the power claim is made at (benchmarks/report_power.py; docs/reports.md).
DEFAULT_REQUESTS = 5000


def make(base: Side, cand: Side, settings: Settings, allow_mismatch: bool = False,
         slos: list[dict[str, Any]] | None = None, verdicts: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Return the report document; DataError when the sides cannot be compared. `verdicts`: the daemon's
    bottleneck verdicts (its /api/v1/slos `diagnosis`) for the bottlenecks section."""
    warnings = compat.check(base, cand, allow_mismatch)
    if slos is not None:  # a config given on the command line: judge against its SLOs
        base.slos = cand.slos = slos
    warnings += [n for n in (*base.notes, *cand.notes) if slos is None or not n.endswith(NEEDS_CONFIG)]
    if base.kind == "prom":
        from sloguard.reports.histstats import RESOLUTION, compare_histograms

        cells = compare_histograms(base, cand, settings)
        return document(base, cand, cells, settings, warnings, bottlenecks(cells, verdicts), resolution=RESOLUTION)
    cells = compare(base, cand, settings)
    return document(base, cand, cells, settings, warnings, bottlenecks(cells, verdicts))


def render(doc: dict[str, Any], fmt: str) -> str:
    """Return the document as md, html or json."""
    if fmt == "json":
        return json.dumps(doc, indent=1, allow_nan=False) + "\n"
    if fmt == "html":
        from sloguard.reports.render_html import render as html

        return html(doc)
    from sloguard.reports.render_md import render as md

    return md(doc)
