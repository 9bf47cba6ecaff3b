"""benchmarks/diagnosis.py: a healthy run's cause set against the users' own arrivals the simulator recorded."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.support.benchmark_module import load


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load("diagnosis")


# one arrival a second from t = 0 to 99, and a cluster of ten more in (50, 52]
STEADY = [float(t) for t in range(100)]
CLUSTER = sorted(STEADY + [50.2 + 0.2 * i for i in range(10)])


@pytest.mark.parametrize(("arrivals", "end", "span", "lookback", "expected"), [
    (STEADY, 99.0, 5.0, 60.0, 5),  # (t-5, t]: five of the steady arrivals
    (STEADY, 99.0, 20.0, 60.0, 20),
    (CLUSTER, 99.0, 5.0, 60.0, 15),  # (48, 53]: 49-53 and the ten
    (CLUSTER, 99.0, 5.0, 40.0, 5),  # the cluster ended more than 40 s before: not counted
    (CLUSTER, 52.0, 20.0, 60.0, 30),  # (32, 52]: 33-52 and the ten
    ([], 99.0, 5.0, 60.0, 0),
    (STEADY, -1.0, 5.0, 60.0, 0),  # nothing arrived before it
])
def test_users_burst_is_the_most_arrivals_in_a_span_before_the_end(bench: ModuleType, arrivals: list[float],
                                                                    end: float, span: float, lookback: float,
                                                                    expected: int) -> None:
    assert bench.users_burst(arrivals, end, span, lookback) == expected


def test_a_healthy_runs_burst_is_read_before_its_first_cause(bench: ModuleType) -> None:
    trace = [{"cause": "none", "at": 40.0}, {"cause": "unknown", "at": 51.0}, {"cause": "capacity", "at": 53.0},
             {"cause": "capacity", "at": 99.0}]
    lane = bench.Lane("healthy-1", "", 1, trace=trace, arrivals=CLUSTER)
    assert bench.burst_of(lane) == (15, 30)  # before 53.0: (48, 53] and (33, 53]
    assert bench.burst_of(bench.Lane("kv-shrink-0", "kv_shrink", 1, trace=trace, arrivals=CLUSTER)) is None
    assert bench.burst_of(bench.Lane("healthy-2", "", 1, trace=trace[:2], arrivals=CLUSTER)) is None  # no cause
    assert bench.burst_of(bench.Lane("healthy-3", "", 1, trace=trace)) is None  # the simulator did not answer
