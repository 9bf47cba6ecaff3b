"""The sample report of docs/: two bench runs from the simulator's model (virtual time), v0.12 25 % slower."""

from __future__ import annotations

from typing import Any

from sloguard.reports.bench import side_from_records
from sloguard.reports.regression import Settings
from sloguard.reports.report import make
from sloguard.sim.benchfile import closed_run


def sample_doc() -> dict[str, Any]:
    """Return the sample report document (deterministic: fixed seeds, fixed generation time)."""
    base = side_from_records(closed_run(11, [1, 4, 8], 400, labels={"release": "v0.11"}, background_rps=0.0),
                             "baseline", "bench-v0.11.jsonl")
    cand = side_from_records(closed_run(12, [1, 4, 8], 400, time_scale=1.25, labels={"release": "v0.12"},
                                        background_rps=0.0), "candidate", "bench-v0.12.jsonl")
    doc = make(base, cand, Settings())
    doc["generated"] = "2026-11-24T12:00:00Z"
    return doc
