"""The max-load search against a table of synthetic response curves (clean, noisy, non-monotonic, edges)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from sloguard.bench.search import Interrupted, SearchSpec, search

THRESHOLD = 0.5  # seconds: the synthetic SLO is "latency(load) <= 0.5 s"


@dataclass(frozen=True)
class Out:
    verdict: str
    holds: bool
    margin: float
    worst: str
    hopeless: bool


def curve_measure(latency: Callable[[float], float], band: float = 0.02, noise: float = 0.0, seed: int = 0,
                  errors: Callable[[float], float] = lambda _: 0.0, log: list[float] | None = None,
                  ) -> Callable[[float, int], Out]:
    """A stage judged from a known curve: margin = (T − latency) / T (+ noise); uncertain within ±band."""
    rng = random.Random(seed)

    def measure(load: float, attempt: int) -> Out:
        if log is not None:
            log.append(load)
        margin = (THRESHOLD - latency(load)) / THRESHOLD + rng.gauss(0.0, noise)
        hopeless = errors(load) > 0.5
        if hopeless:
            return Out("breaks", False, -1.0, "errors", True)
        verdict = "holds" if margin > band else "breaks" if margin < -band else "uncertain"
        return Out(verdict, margin >= 0, margin, "p95 ttft <= 500ms", False)
    return measure


def linear(load: float) -> float:
    return 0.1 + 0.05 * load  # crosses 0.5 at 8


def knee(load: float) -> float:
    return 0.2 if load <= 20 else 0.2 + 0.1 * (load - 20)  # flat, then queueing: crosses at 23


def dip(load: float) -> float:
    return 0.6 if 4.0 <= load <= 5.0 else 0.1 + 0.03 * load  # fails in [4, 5], then again above 13.3


RATE = SearchSpec("rate", start=1.0, max_load=1000.0, min_load=1 / 64, tolerance=0.05, max_stages=20)
CONC = SearchSpec("concurrency", start=1.0, max_load=1024.0, min_load=1.0, max_stages=20)


@pytest.mark.parametrize(("name", "spec", "latency", "truth"), [
    ("linear rate", RATE, linear, 8.0),
    ("knee rate", RATE, knee, 23.0),
    ("knee concurrency", CONC, knee, 23.0),
    ("linear concurrency", CONC, linear, 8.0),
    ("start above the limit", SearchSpec("rate", 50.0, 1000.0, 1 / 64, 0.05, 20), linear, 8.0),
])
def test_clean_curves_land_within_tolerance(name: str, spec: SearchSpec, latency: Callable[[float], float],
                                            truth: float) -> None:
    r = search(spec, curve_measure(latency))
    assert r.stopped == "converged", name
    assert r.max_load is not None and r.first_break is not None
    assert r.max_load <= truth < r.first_break
    assert r.first_break - r.max_load <= max(1.0 if spec.kind == "concurrency" else 0.0, spec.tolerance * r.max_load)
    assert r.estimate is not None and abs(r.estimate - truth) <= 0.1 * truth
    assert r.low is not None and r.high is not None and r.low <= truth <= r.high
    assert r.breaks_first == "p95 ttft <= 500ms"


def test_concurrency_result_is_a_whole_number_of_streams() -> None:
    r = search(CONC, curve_measure(lambda n: 0.1 + 0.047 * n))  # crosses at 8.5
    assert (r.max_load, r.first_break) == (8.0, 9.0)
    assert all(p.load == int(p.load) for p in r.points)


@pytest.mark.parametrize("seed", range(20))
def test_noisy_curve_stays_near_the_truth(seed: int) -> None:
    """Measurement noise of 5% margin: the result is within 15% of the true limit in every seeded run."""
    r = search(RATE, curve_measure(linear, band=0.1, noise=0.05, seed=seed))
    assert r.estimate is not None and abs(r.estimate - 8.0) <= 0.15 * 8.0
    assert r.low is None or r.low <= 8.0 * 1.15
    assert r.high is None or r.high >= 8.0 * 0.85


def test_non_monotonic_curve_never_reports_a_load_above_a_measured_failure() -> None:
    log: list[float] = []
    r = search(RATE, curve_measure(dip, log=log))
    assert r.first_break is not None and r.max_load is not None
    assert r.max_load < 4.0 <= r.first_break  # the dip is found first: the limit is below it
    for p in r.points:
        if p.load > r.first_break:
            pytest.fail(f"measured {p.load} above the first failure and reported it")
    assert all(load <= 5.0 for load in log)


def test_breaks_at_the_lowest_load_tried_reports_no_max() -> None:
    r = search(SearchSpec("concurrency", 4.0, 64.0, 1.0), curve_measure(lambda _: 1.0))
    assert r.max_load is None and r.stopped == "floor"
    assert [p.load for p in r.points] == [1.0, 2.0, 4.0]
    assert r.first_break == 1.0 and r.estimate is None


def test_never_breaks_up_to_the_ceiling() -> None:
    r = search(SearchSpec("rate", 1.0, 20.0, 0.1), curve_measure(lambda _: 0.1))
    assert r.stopped == "ceiling" and r.max_load == 20.0 and r.first_break is None and r.high is None
    assert [p.load for p in r.points] == [1.0, 2.0, 4.0, 8.0, 16.0, 20.0]


def test_hopeless_stage_ends_the_bracket_and_is_never_exceeded() -> None:
    log: list[float] = []
    r = search(RATE, curve_measure(lambda _: 0.1, errors=lambda load: 0.9 if load >= 16 else 0.0, log=log))
    assert max(log) == 16.0  # nothing above the hopeless load was tried
    assert r.first_break is not None and 8.0 <= r.max_load < r.first_break <= 16.0  # type: ignore[operator]
    assert r.breaks_first == "errors"


def test_uncertain_bracket_ends_are_measured_again_and_only_they() -> None:
    base = curve_measure(lambda load: 0.1 + 0.4 / 7.3 * load, band=0.002)  # crosses at 7.3, never measured

    def measure(load: float, attempt: int) -> Out:
        out = base(load, attempt)
        return Out("uncertain", out.holds, out.margin, out.worst, False) if attempt == 0 else out
    r = search(SearchSpec("rate", 1.0, 100.0, 0.1, 0.05, 30, confirm=1), measure)
    ends = {r.max_load, r.first_break}
    assert all(p.stages == (2 if p.load in ends else 1) for p in r.points)
    assert (r.low, r.high) == (r.max_load, r.first_break)  # both ends confident after their second look
    assert r.stages == len(r.points) + 2


def test_a_bracket_end_that_flips_on_a_second_look_resumes_the_bisection() -> None:
    """The first look at loads just above the limit leans 'holds' by noise; the second look breaks."""
    log: list[float] = []

    def measure(load: float, attempt: int) -> Out:
        log.append(load)
        margin = (THRESHOLD - linear(load)) / THRESHOLD
        if attempt == 0 and 8.0 < load <= 8.8:
            return Out("uncertain", True, 0.01, "p95", False)
        verdict = "holds" if margin > 0.02 else "breaks" if margin < -0.02 else "uncertain"
        return Out(verdict, margin >= 0, margin, "p95", False)
    r = search(SearchSpec("rate", 1.0, 100.0, 0.1, 0.02, 40, confirm=2), measure)
    assert r.max_load is not None and r.first_break is not None
    assert r.max_load <= 8.0 < r.first_break and r.first_break <= 8.8
    assert any(log.count(x) > 1 for x in log)


def test_uncertain_everywhere_widens_the_interval_to_unknown() -> None:
    def measure(load: float, attempt: int) -> Out:
        margin = (THRESHOLD - linear(load)) / THRESHOLD
        return Out("uncertain", margin >= 0, margin, "p95", False)
    r = search(RATE, measure)
    assert r.max_load is not None and r.max_load <= 8.0 < r.first_break  # type: ignore[operator]
    assert r.low is None and r.high is None  # nothing was established with confidence


def test_stage_budget_stops_the_search() -> None:
    r = search(SearchSpec("rate", 1.0, 1000.0, 0.1, 0.01, max_stages=3), curve_measure(linear))
    assert r.stopped == "budget" and r.stages == 3
    assert r.max_load == 4.0 and r.first_break is None


def test_interrupt_keeps_the_points_so_far() -> None:
    base = curve_measure(linear)

    def measure(load: float, attempt: int) -> Out:
        if load > 4:
            raise Interrupted
        return base(load, attempt)
    r = search(RATE, measure)
    assert r.stopped == "interrupted" and r.max_load == 4.0 and [p.load for p in r.points] == [1.0, 2.0, 4.0]
