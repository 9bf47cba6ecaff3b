"""The sample report of docs/: two bench runs from the simulator's model (virtual time), v0.12 25 % slower."""

from __future__ import annotations

from typing import Any

from sloguard.reports.bench import side_from_records
from sloguard.reports.regression import Settings
from sloguard.reports.report import make
from sloguard.sim.benchfile import closed_run

# What `-c sloguard.yaml` would give (sloguard.reports.slos.slo_json of the example's chat SLO, with goodput)
SLOS = [{"name": "chat-latency", "objectives": [{"metric": "ttft", "percentile": 95, "threshold_s": 1.0},
                                                {"metric": "tpot", "percentile": 50, "threshold_s": 0.1}],
         "goodput": {"target": 0.99, "ttft": 0.5, "tpot": 0.1}, "error_rate": 0.995}]


def sample_doc() -> dict[str, Any]:
    """Return the sample report document (deterministic: fixed seeds, fixed generation time)."""
    base = side_from_records(closed_run(11, [1, 4, 8], 400, labels={"release": "v0.11"}, background_rps=0.0,
                                        workload_seed=1),
                             "baseline", "bench-v0.11.jsonl")
    cand = side_from_records(closed_run(12, [1, 4, 8], 400, time_scale=1.25, labels={"release": "v0.12"},
                                        background_rps=0.0, workload_seed=1), "candidate", "bench-v0.12.jsonl")
    doc = make(base, cand, Settings(), slos=SLOS)
    doc["generated"] = "2026-11-24T12:00:00Z"
    return doc
