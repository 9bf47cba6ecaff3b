"""benchmarks/detection_bound.py: the oracle CUSUM against hand-computed values, its calibration and Lorden's delay."""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.support.benchmark_module import load


@pytest.fixture(scope="module")
def bound() -> ModuleType:
    return load("detection_bound")


def _args(kind: str, size: float, n: int = 1500) -> argparse.Namespace:
    return argparse.Namespace(kind=kind, rate=1.0, size=size, eval=1.0, alpha=0.05, stretch=60.0, settle=60.0,
                              calibrate=n, runs=n, seed=7, traces=[])


def test_cusum_steps_drifts_and_floors_as_computed_by_hand(bound: ModuleType) -> None:
    jump = math.log(3.0)  # rate 1/s, a 3x surge: each arrival +ln 3, drift −2/s
    got = bound.cusum_at_ticks(np.array([0.1, 0.2, 1.5]), np.full(3, jump), 2.0, np.array([1.0, 2.0, 3.0]))
    after_two = (jump - 0.2) + jump  # 0.1: 0 − 0.2 floors at 0, + ln 3; 0.2: − 0.2, + ln 3
    assert got == pytest.approx([after_two - 1.6, jump - 1.0, 0.0])  # 1.5: 0.397 − 1.0 floors, + ln 3


def test_a_prompt_shorter_than_the_healthy_mean_never_takes_the_statistic_below_zero(bound: ModuleType) -> None:
    got = bound.cusum_at_ticks(np.array([0.5, 1.5, 2.5]), np.array([-3.0, 2.0, -0.5]), 0.0,
                               np.array([1.0, 2.0, 3.0]))
    assert got == pytest.approx([0.0, 2.0, 1.5])


@pytest.mark.parametrize("kind,size,gap", [("surge", 3.0, 1.0), ("prompts", 4.0, 0.0)])
def test_the_level_holds_its_false_alarm_rate_and_the_delay_is_lordens(bound: ModuleType, kind: str, size: float,
                                                                       gap: float) -> None:
    """Fresh healthy seeds alarm in 5% ± 2.5 points; the mean delay is level ÷ information rate (+ the gap) ± 15%.

    The information rate, nats per second at 1 event/s: m ln m − (m − 1) for a Poisson rate × m, (ln s)² / 2σ² for
    a lognormal scaled by s. Half a tick is added: the oracle decides at 1 s evaluations.
    """
    args = _args(kind, size)
    level, fresh = bound.threshold(args)
    assert 0.025 <= fresh <= 0.075
    rate = size * math.log(size) - (size - 1.0) if kind == "surge" else math.log(size) ** 2 / (
        2 * bound.PROMPT_LOG_SD**2)
    mean = statistics.fmean(bound.delays(args, level))
    assert mean == pytest.approx(level / rate + gap + 0.5, rel=0.15)


def _poll(t: float, missing: bool) -> dict[str, Any]:
    waiting = 3.0 if missing else 0.0
    return {"t": t, "at": 1000.0 + t, "objectives": [["ttft", "5m", not missing]], "stage": "queue",
            "breach": "ttft" if missing else None, "cause": "",
            "signals": {"requests_waiting": {"value": waiting, "baseline": 0.5},
                        "prompt_tokens_recent": {"value": 100.0, "baseline": 100.0},
                        "arrival_surge_z": {"value": 5.0 if missing else 0.0, "baseline": None}}}


def test_traced_runs_are_re_decided_and_timed_in_evaluations(bound: ModuleType, tmp_path: Path) -> None:
    """A surge whose queue breaches at +2 s: capacity confirms at the second breached evaluation (+1)."""
    trace = [_poll(t, t >= 2.0) for t in (-1.0, 0.0, 1.0, 2.0, 3.0, 4.0)]
    runs = {"load-surge-0": {"fault": "load_surge", "expected": "capacity", "breach_t": 2.0, "trace": trace},
            "kv-shrink-0": {"fault": "kv_shrink", "expected": "kv_cache_pressure", "breach_t": 2.0, "trace": trace}}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(runs))
    assert bound.traced([str(path)], "load_surge", "capacity") == [("t:load-surge-0", 2.0, 3.0, 1)]


def test_todays_surge_statistic_is_arrival_surge_z_over_the_windows_spans(bound: ModuleType) -> None:
    """Vectorised over ticks, it reads what the daemon's arrival_surge_z reads from the same spans' counts."""
    from sloguard.diagnose.arrivals import arrival_surge_z

    times = np.sort(np.random.default_rng(5).uniform(0.0, 60.0, 70))
    ticks = np.array([20.0, 21.0, 33.0, 47.5, 60.0])
    got = bound.surge_z_at_ticks(times, ticks, 1.1, 200.0, 20.0)
    for tick, z in zip(ticks, got, strict=True):
        counts = [(float(np.sum((times > tick - span) & (times <= tick))), span) for span in (5.0, 10.0, 20.0)]
        assert z == pytest.approx(arrival_surge_z(counts, 1.1, 200.0))  # 0 at 47.5 s: fewer arrivals are no surge
