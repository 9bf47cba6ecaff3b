"""The statistics under every report: quantiles, the stratified block bootstrap, changes, Holm, verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sloguard.reports.bootstrap import (
    Stratified,
    block_length,
    proportion_reps,
    quantile_reps,
    quantiles,
    resample,
    stratify,
)
from sloguard.reports.cells import Cell, judge, overall
from sloguard.reports.stats import change, holm, log_ratio, needed, normal_p


@pytest.mark.parametrize("n", [1, 7, 20, 101, 1000])
@pytest.mark.parametrize("q", [0.01, 0.5, 0.95, 0.99])
def test_unweighted_quantile_is_numpys_inverted_cdf(n: int, q: float) -> None:
    x = np.random.default_rng(n).lognormal(size=n)
    assert quantiles(x, None, [q])[0] == np.quantile(x, q, method="inverted_cdf")


def test_weighted_quantile_equals_the_expanded_sample() -> None:
    # weights 3:1 on two values are the sample [1, 1, 1, 2]
    x = np.array([2.0, 1.0])
    w = np.array([0.25, 0.75])
    assert quantiles(x, w, [0.5, 0.75, 0.76, 1.0]).tolist() == [1.0, 1.0, 2.0, 2.0]


def test_censored_values_rank_above_every_measured_one() -> None:
    x = np.array([0.1, np.inf, 0.2, 0.3])
    assert quantiles(x, None, [0.75, 1.0]).tolist() == [0.3, math.inf]


def test_stratify_weights_are_the_baselines_shares_and_lone_strata_drop() -> None:
    base, cand, dropped = stratify(np.arange(4.0), np.array(["a", "a", "a", "b"], dtype=object),
                                   np.arange(3.0), np.array(["a", "b", "c"], dtype=object))
    assert base.weights == cand.weights == (0.75, 0.25)
    assert [len(g) for g in cand.groups] == [1, 1] and dropped == ["c"]
    assert base.uniform() and not cand.uniform()


@pytest.mark.parametrize(("phi", "low", "high"), [(0.0, 1, 3), (0.9, 8, 100)])
def test_block_length_grows_with_dependence(phi: float, low: int, high: int) -> None:
    rng = np.random.default_rng(3)
    e = rng.normal(size=4000)
    x = np.empty_like(e)
    x[0] = e[0]
    for i in range(1, len(e)):  # AR(1)
        x[i] = phi * x[i - 1] + e[i]
    assert low <= block_length(x) <= high


def test_resample_keeps_strata_sizes_and_draws_only_their_values() -> None:
    s = Stratified((np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0])), (0.6, 0.4))
    draws = resample(s, 50, np.random.default_rng(0), (2, 1))
    assert draws.shape == (50, 5)
    assert set(np.unique(draws[:, :3])) <= {1.0, 2.0, 3.0} and set(np.unique(draws[:, 3:])) <= {10.0, 20.0}


def test_bootstrap_is_seeded() -> None:
    s = Stratified((np.random.default_rng(1).lognormal(size=300),), (1.0,))
    a = quantile_reps(s, [0.5, 0.95], 200, np.random.default_rng(7))[1]
    b = quantile_reps(s, [0.5, 0.95], 200, np.random.default_rng(7))[1]
    assert np.array_equal(a, b)


def test_proportion_point_is_the_weighted_share() -> None:
    s = Stratified((np.array([1.0, 0.0, 0.0, 0.0]), np.array([1.0, 1.0])), (0.5, 0.5))
    point, reps = proportion_reps(s, 100, np.random.default_rng(0))
    assert point == pytest.approx(0.5 * 0.25 + 0.5 * 1.0) and reps.shape == (100,)


def test_holm_matches_a_hand_computation() -> None:
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([]) == []


@pytest.mark.parametrize(("cand", "base", "want"), [
    (2.0, 1.0, math.log(2)), (math.inf, 1.0, math.inf), (math.inf, math.inf, math.nan), (0.0, 0.0, math.nan),
    (1.0, 0.0, math.inf),
])
def test_log_ratio_edges(cand: float, base: float, want: float) -> None:
    got = float(log_ratio(cand, base))
    assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want)


def test_change_normal_interval_and_p() -> None:
    reps = np.random.default_rng(0).normal(0.2, 0.05, 4000)
    ch = change(0.2, reps)
    assert ch is not None
    assert ch.low == pytest.approx(0.2 - 1.96 * 0.05, abs=0.01)
    assert ch.high == pytest.approx(0.2 + 1.96 * 0.05, abs=0.01)
    assert ch.p == pytest.approx(normal_p(0.2 / 0.05), rel=0.3)


def test_change_where_the_quantile_sits_among_censored_requests() -> None:
    # more than a quarter of the replicates infinite: percentile interval, p from the signs
    reps = np.array([math.inf] * 900 + [0.1] * 100)
    ch = change(math.inf, reps)
    assert ch is not None and ch.low == 0.1 and ch.high == math.inf and ch.p < 0.01
    assert change(math.nan, reps) is None and change(0.1, np.array([math.nan] * 5)) is None


def test_needed_scales_with_the_square_of_the_width() -> None:
    assert needed(100, 0.1, 0.05) == 400 and needed(100, 0.1, 0.0) == 0


def _cell(delta: float, ci: tuple[float, float], p: float, worse: str = "up", **kw: object) -> Cell:
    return Cell("ttft", "p95", "overall", "latency", 1.0, 1.0 + delta, 500, 500, delta=delta, ci=ci, p=p,
                worse=worse, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("cell", "verdict"), [
    (_cell(0.30, (0.2, 0.4), 1e-9), "regression"),
    (_cell(0.03, (0.02, 0.04), 1e-9), "no significant change"),  # significant but within the threshold
    (_cell(-0.2, (-0.3, -0.1), 1e-9), "improvement"),
    (_cell(0.01, (-0.02, 0.04), 0.5), "no significant change"),
    (_cell(0.10, (-0.05, 0.25), 0.2), "not enough data"),  # could still be a regression
    (_cell(-0.2, (-0.3, -0.1), 1e-9, worse="down"), "regression"),  # goodput fell
])
def test_verdict_table(cell: Cell, verdict: str) -> None:
    assert judge([cell], 0.05)[0].verdict == verdict


def test_holm_over_the_family_withholds_a_verdict_one_test_alone_would_give() -> None:
    lone = _cell(0.3, (0.1, 0.5), 0.01)
    assert judge([lone], 0.05)[0].verdict == "regression"
    family = judge([lone] + [_cell(0.0, (-0.01, 0.01), 0.9)] * 9, 0.05)
    assert family[0].verdict != "regression" and family[0].p_adjusted == pytest.approx(0.1)


def test_not_enough_data_says_how_many_requests_would_settle_it() -> None:
    cell = judge([_cell(0.10, (-0.05, 0.25), 0.2)], 0.05)[0]
    assert "requests per side would settle it" in cell.reason and "-5.0 % … +25.0 %" in cell.reason


def test_cells_with_a_reason_are_not_judged_and_not_counted() -> None:
    short = Cell("ttft", "p99", "overall", "latency", 1.0, 2.0, 10, 10, reason="p99 needs ≥ 500 values")
    out = judge([short, _cell(0.3, (0.2, 0.4), 1e-9)], 0.05)
    assert out[0].verdict == "not enough data" and out[0].p_adjusted is None
    assert overall(out) == "regression"
    assert overall([short]) == "not enough data"
