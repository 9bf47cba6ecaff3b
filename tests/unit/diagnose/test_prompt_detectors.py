"""benchmarks/prompt_detectors.py: scrapes, the windowed CUSUM, the log-normal laws and each detector's level."""

from __future__ import annotations

import argparse
import math
from types import ModuleType

import numpy as np
import pytest

from tests.support.benchmark_module import load


@pytest.fixture(scope="module")
def det() -> ModuleType:
    return load("prompt_detectors")


def _args(runs: int = 800) -> argparse.Namespace:
    return argparse.Namespace(rate=1.0, size=4.0, design=3.0, window=20.0, scrape=1.0, warmup=200.0, observe=120.0,
                              stretch=60.0, alpha=0.05, runs=runs, seed=11)


def test_scrapes_count_every_prefill_and_scale_the_prompts_after_the_change(det: ModuleType) -> None:
    a = det.scrapes(np.random.default_rng(3), "sim", 1.0, math.inf, 300, 4.0)
    b = det.scrapes(np.random.default_rng(3), "sim", 1.0, 150.0, 300, 4.0)
    assert a.n.sum() == np.random.default_rng(3).poisson(300.0)
    assert np.array_equal(a.n, b.n) and np.array_equal(a.tokens[:150], b.tokens[:150])
    assert np.allclose(b.tokens[150:], 4.0 * a.tokens[150:])
    assert set(np.unique(a.tokens[a.n == 1])) <= set(det.LENGTHS)


@pytest.mark.parametrize("seed", range(5))
def test_the_windowed_cusum_is_the_cusum_restarted_at_the_windows_start(det: ModuleType, seed: int) -> None:
    inc = np.random.default_rng(seed).normal(-0.3, 1.0, 60)
    got = det.suffix_max(inc, 20)
    for t in range(20, 61):
        s = 0.0
        for x in inc[t - 20:t]:
            s = max(0.0, s + x)
        assert got[t - 20] == pytest.approx(s)


def test_the_law_of_a_mean_of_log_normals_keeps_its_mean_and_variation(det: ModuleType) -> None:
    """Fenton-Wilkinson: exact for one prompt; for n, E[mean] and its variation² ÷ n are kept exactly.

    ln(mean of 5) itself is no log-normal: its mean is off by 0.03 (3% of tokens; the shift it tests is ln 3 = 1.1)
    and its variance overstated by a fifth.
    """
    m, s2 = 5.0, 1.16**2
    mean, var = det.log_laws(m, s2, np.array([1.0, 5.0, 75.0]))
    assert (mean[0], var[0]) == pytest.approx((m, s2))
    assert np.exp(mean + var / 2) == pytest.approx(math.exp(m + s2 / 2))
    assert np.expm1(var) == pytest.approx(math.expm1(s2) / np.array([1.0, 5.0, 75.0]))
    draws = np.log(np.exp(np.random.default_rng(0).normal(m, math.sqrt(s2), (40000, 5))).mean(axis=1))
    assert draws.mean() == pytest.approx(mean[1], abs=0.05)
    assert draws.var() < var[1] < 1.3 * draws.var()  # 0.37 against 0.45: several prefills weigh less, never more


def test_the_rows_read_the_users_mean_against_the_warm_ups(det: ModuleType) -> None:
    """One 100-token prompt a second, then 250: the window's mean reads 1 + 1.5 x (seconds since) / 20."""
    warm = det.Scrapes(np.ones(200), np.full(200, 100.0))
    run = det.Scrapes(np.ones(240), np.where(np.arange(240) < 200, 100.0, 250.0))
    got = det.DETECTORS["rows"](warm, run, 20, 3.0)[200 - 20:]
    assert got[:3] == pytest.approx([1.0, 1.075, 1.15])  # spans of >= 20 prefills: only the whole window here
    assert got[20] == pytest.approx(2.5)


def test_the_rows_baseline_is_the_mean_of_the_warm_ups_window_means(det: ModuleType) -> None:
    """Windows of one 100-token prompt a second, then of 400 (the last third is left out): the mean, not the median."""
    warm = det.Scrapes(np.ones(200), np.where(np.arange(200) < 80, 100.0, 400.0))
    run = det.Scrapes(np.ones(220), np.full(220, 400.0))
    means = np.convolve(warm.tokens, np.ones(20), "valid")[: 2 * 181 // 3] / 20  # the settled window means
    assert det.DETECTORS["rows"](warm, run, 20, 3.0)[-1] == pytest.approx(400.0 / means.mean())
    assert det.DETECTORS["rows_median"](warm, run, 20, 3.0)[-1] == pytest.approx(400.0 / np.median(means))


@pytest.mark.parametrize("mix", ["sim", "lognormal"])
def test_the_mean_baseline_alarms_less_than_the_median_at_the_rows_level(det: ModuleType, mix: str) -> None:
    """The median of right-skewed window means reads low; at 2.5x the mean baseline alarms less, as soon."""
    args = _args()
    alarms = {name: float(np.mean(det.peaks(args, name, mix, args.seed) >= 2.5)) for name in ("rows", "rows_median")}
    delay = {name: float(np.median(det.delays(args, name, mix, 2.5))) for name in ("rows", "rows_median")}
    assert alarms["rows"] < alarms["rows_median"]
    assert delay["rows"] <= delay["rows_median"] + 1.0


@pytest.mark.parametrize("mix", ["sim", "lognormal"])
def test_the_log_cusums_level_does_not_depend_on_the_mix(det: ModuleType, mix: str) -> None:
    """At the level calibrated on the other mix it alarms in 5% ± 2.5 points of fresh healthy stretches."""
    args = _args()
    other = "lognormal" if mix == "sim" else "sim"
    level = float(np.quantile(det.peaks(args, "log_cusum", other, args.seed), 0.95))
    fresh = float(np.mean(det.peaks(args, "log_cusum", mix, args.seed + 2) >= level))
    assert 0.025 <= fresh <= 0.075


def test_on_a_heavy_tail_the_log_cusum_beats_the_rows_at_equal_false_alarms(det: ModuleType) -> None:
    """Log-normal prompts x4, each at its own 5% level: the log CUSUM's median delay is the shorter."""
    args = _args()
    medians = {}
    for name in ("rows", "log_cusum"):
        level = float(np.quantile(det.peaks(args, name, "lognormal", args.seed), 0.95))
        medians[name] = float(np.median(det.delays(args, name, "lognormal", level)))
    assert medians["log_cusum"] + 2.0 <= medians["rows"]
