"""A side larger than MAX_RESAMPLED is bootstrapped from a subsample of contiguous runs, its replicates' spread
rescaled by sqrt(m/n): the intervals match the full bootstrap's, at a cost that no longer grows with n."""

from __future__ import annotations

import numpy as np
import pytest

from sloguard.reports import bootstrap
from sloguard.reports.bootstrap import Stratified, mean_reps, proportion_reps, quantile_reps, subsample


def spread(reps: np.ndarray) -> float:
    lo, hi = np.percentile(reps, [2.5, 97.5], axis=0)
    return float(np.max(hi - lo))


@pytest.mark.parametrize("seed", [1])
def test_rescaled_intervals_match_the_full_bootstrap(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    values = rng.lognormal(-1.5, 0.6, 30_000)
    values[rng.random(values.size) < 0.002] = np.inf  # a few censored requests
    s = Stratified((values[:10_000], values[10_000:]), (1 / 3, 2 / 3))
    point, full = quantile_reps(s, (0.5, 0.95), 200, np.random.default_rng(0))
    ok = np.isfinite(values).astype(np.float64)
    _, share_full = proportion_reps(Stratified((ok,), (1.0,)), 200, np.random.default_rng(0))
    _, mean_full = mean_reps(values[np.isfinite(values)], 200, np.random.default_rng(0))
    monkeypatch.setattr(bootstrap, "MAX_RESAMPLED", 3_000)
    assert subsample(s).n == 3_000
    point2, scaled = quantile_reps(s, (0.5, 0.95), 200, np.random.default_rng(0))
    assert np.array_equal(point, point2)  # the point estimate is always the full sample's
    for q in range(2):
        assert spread(scaled[:, q]) == pytest.approx(spread(full[:, q]), rel=0.3)
    _, share_scaled = proportion_reps(Stratified((ok,), (1.0,)), 200, np.random.default_rng(0))
    assert spread(share_scaled) == pytest.approx(spread(share_full), rel=0.3)
    _, mean_scaled = mean_reps(values[np.isfinite(values)], 200, np.random.default_rng(0))
    assert spread(mean_scaled) == pytest.approx(spread(mean_full), rel=0.3)


def test_a_censored_quantile_stays_censored(monkeypatch: pytest.MonkeyPatch) -> None:
    values = np.random.default_rng(3).permutation(np.concatenate([np.full(9_000, 0.1), np.full(1_000, np.inf)]))
    monkeypatch.setattr(bootstrap, "MAX_RESAMPLED", 2_000)
    point, reps = quantile_reps(Stratified((values,), (1.0,)), (0.5, 0.99), 100, np.random.default_rng(0))
    assert point[1] == np.inf and np.isinf(reps[:, 1]).all() and (reps[:, 0] == 0.1).all()  # no NaN from inf - inf
