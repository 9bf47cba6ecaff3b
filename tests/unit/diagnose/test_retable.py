"""benchmarks/diagnosis_retable.py: traced polls re-decided through the rule table, one evaluation at a time."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.benchmark_module import load


@pytest.fixture(scope="module")
def retable() -> ModuleType:
    return load("diagnosis_retable")


HEALTHY = {"kv_cache_usage_p90": (0.3, 0.3), "preemptions_per_second": (0.0, 0.0), "requests_waiting": (0.0, 0.0),
           "prompt_tokens_per_request": (400.0, 400.0), "prompt_tokens_p90": (1000.0, 1000.0)}
# a starved KV cache: the users' prefilled mean 2.2x and its p90 1.8x with the prompts unchanged
STARVED = {**HEALTHY, "kv_cache_usage_p90": (0.97, 0.3), "preemptions_per_second": (0.3, 0.0),
           "requests_waiting": (9.0, 0.0), "prompt_tokens_per_request": (880.0, 400.0),
           "prompt_tokens_p90": (1800.0, 1000.0)}


def _poll(t: float, signals: dict[str, tuple[float, float]], missing: bool, at: float) -> dict[str, Any]:
    return {"t": t, "at": at, "objectives": [["ttft", "5m", not missing], ["ttft", "30m", True]],
            "stage": "queue" if missing else "none", "breach": "ttft" if missing else None, "cause": "",
            "signals": {k: {"value": v, "baseline": b} for k, (v, b) in signals.items()}}


def _run(evaluations: list[tuple[float, dict[str, tuple[float, float]], bool]]) -> dict[str, Any]:
    """A KV-shrink run: every evaluation polled twice, as the benchmark polls every half interval."""
    trace = [p for t, sig, missing in evaluations
             for p in (_poll(t, sig, missing, 1000.0 + t), _poll(t + 0.5, sig, missing, 1000.0 + t))]
    return {"fault": "kv_shrink", "expected": "kv_cache_pressure", "verdict": "long_prompts", "lag": 6,
            "breach_t": 1.0, "trace": trace}


def test_a_cause_confirms_at_two_distinct_evaluations_not_two_polls(retable: ModuleType) -> None:
    run = _run([(-1.0, HEALTHY, False), (0.0, HEALTHY, False), (1.0, STARVED, True), (2.0, STARVED, True),
                (3.0, STARVED, True)])
    causes = retable.decide(run["trace"])
    assert causes[4:8] == ["unknown", "unknown", "kv_cache_pressure", "kv_cache_pressure"]
    assert retable.lag(run, causes) == 1


def test_the_report_names_runs_whose_first_cause_changed(retable: ModuleType, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    run = _run([(-1.0, HEALTHY, False), (1.0, STARVED, True), (2.0, STARVED, True)])
    healthy = {**_run([(-1.0, HEALTHY, False), (1.0, HEALTHY, False)]), "fault": "", "expected": "none",
               "verdict": "none/unknown"}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"kv-shrink-2": run, "healthy-0": healthy}))
    assert retable.report(str(path)) == (1, 1, 1, 1, 1, 1)
    assert "kv-shrink-2 long_prompts → kv_cache_pressure" in capsys.readouterr().out


def test_an_objective_missing_at_injection_has_no_lag(retable: ModuleType) -> None:
    run = _run([(-1.0, STARVED, True), (1.0, STARVED, True), (2.0, STARVED, True)])
    assert retable.lag(run, retable.decide(run["trace"])) == "pre"


def test_a_restart_is_named_at_the_evaluation_that_shows_it(retable: ModuleType) -> None:
    """As the daemon's Confirmer: longer prompts held before the breach, yet the restart is the first cause."""
    longer = {**HEALTHY, "prompt_tokens_per_request": (900.0, 400.0), "prompt_tokens_p90": (1700.0, 1000.0)}
    restarted = {**longer, "engine_restarts": (1.0, 0.0)}
    run = {**_run([(-2.0, longer, False), (-1.0, longer, False), (1.0, restarted, True), (2.0, restarted, True)]),
           "fault": "engine_restart", "expected": "engine_restart"}
    causes = retable.decide(run["trace"])
    assert causes[4:] == ["engine_restart"] * 4
    assert retable.lag(run, causes) == 0


def test_prompts_far_past_noise_are_named_at_the_evaluation_that_shows_them(retable: ModuleType) -> None:
    """As the daemon's Confirmer: the users' mean at 2.75x (the `sure` 2.5x row) names long_prompts at once."""
    longer = {**HEALTHY, "prompt_tokens_per_request": (1100.0, 400.0), "prompt_tokens_p90": (1100.0, 1000.0)}
    run = {**_run([(-1.0, HEALTHY, False), (1.0, longer, True), (2.0, longer, True)]), "fault": "long_prompts",
           "expected": "long_prompts"}
    causes = retable.decide(run["trace"])
    assert causes[2:] == ["long_prompts"] * 4
    assert retable.lag(run, causes) == 0


def test_median_prompt_baselines_replay_as_means(retable: ModuleType) -> None:
    """Healthy windows read 300 tokens three times in four and 900 once: the median 300 becomes their mean, 450."""
    healthy = [_poll(float(t), {"prompt_tokens_per_request": (900.0 if t % 4 == 0 else 300.0, 300.0),
                                "prompt_tokens_p90": (1000.0, 1000.0)}, False, 1000.0 + t) for t in range(-60, 0)]
    breach = _poll(1.0, {"prompt_tokens_per_request": (1200.0, 300.0), "prompt_tokens_recent": (1200.0, 300.0),
                         "prompt_tokens_p90": (1500.0, 1000.0)}, True, 1001.0)
    got = retable.mean_prompt_baselines([*healthy, breach])
    # settled: the 40 values of t <= -21 (the newest third left out), ten of them 900
    assert got[-1]["signals"]["prompt_tokens_per_request"]["baseline"] == pytest.approx(450.0)
    assert got[-1]["signals"]["prompt_tokens_recent"]["baseline"] == pytest.approx(300.0)  # no healthy values of it
    assert got[-1]["signals"]["prompt_tokens_p90"]["baseline"] == 1000.0  # a quantile: its median stays
    assert got[0]["signals"]["prompt_tokens_per_request"]["baseline"] == 300.0  # nothing learned yet: as recorded
    assert breach["signals"]["prompt_tokens_per_request"]["baseline"] == 300.0  # the trace itself is not changed


def test_a_replay_keeps_the_recorded_evaluations(retable: ModuleType) -> None:
    """Traces before `at` was recorded tell evaluations by what their polls read: rescaled baselines must not split one.

    A healthy evaluation's first poll is rescaled before its values are learned, its second after.
    """
    def signals(t: int) -> dict[str, tuple[float, float]]:
        return {"prompt_tokens_per_request": (900.0 if t % 4 == 0 else 300.0, 300.0), "requests_running": (t, 1.0)}

    trace = [_poll(float(t), signals(t), False, 0.0) for t in range(-60, 0) for _ in (0, 1)]
    for poll in trace:
        del poll["at"]
    got = retable.mean_prompt_baselines(trace)
    assert [i for i, _ in retable.distinct(got)] == [i for i, _ in retable.distinct(trace)]
    assert got[-1]["signals"]["prompt_tokens_per_request"]["baseline"] > 300.0
