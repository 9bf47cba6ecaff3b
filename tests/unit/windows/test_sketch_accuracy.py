"""The sketch stays within 1% relative of numpy's percentiles beyond 100k samples, and merges exactly."""

from __future__ import annotations

import numpy as np
import pytest

from sloguard.windows.sketch import EMPTY_SKETCH, RELATIVE_ACCURACY, ExactQuantiles, merge, quantile, sketch_of

N = 150_000


def _lognormal(rng: np.random.Generator) -> np.ndarray:
    return rng.lognormal(mean=-1.5, sigma=0.8, size=N)


def _bimodal(rng: np.random.Generator) -> np.ndarray:
    # 40/60 so that no tested rank falls between the modes, where numpy interpolates across the gap
    return np.concatenate([rng.normal(0.08, 0.01, 2 * N // 5), rng.normal(2.0, 0.2, 3 * N // 5)]).clip(1e-4)


def _spike(rng: np.random.Generator) -> np.ndarray:
    base = rng.lognormal(mean=-2.0, sigma=0.3, size=N)
    base[rng.random(N) < 0.03] = 30.0  # 3% of requests stall at a 30 s timeout
    return base


@pytest.mark.parametrize("make", [_lognormal, _bimodal, _spike], ids=["lognormal", "bimodal", "spike"])
@pytest.mark.parametrize("q", [0.01, 0.5, 0.9, 0.95, 0.99, 0.999])
def test_within_one_percent_of_numpy(make: object, q: float) -> None:
    values = make(np.random.default_rng(7))  # type: ignore[operator]
    got = quantile(sketch_of(values), q)
    want = float(np.percentile(values, 100 * q))
    assert got is not None
    assert abs(got - want) <= RELATIVE_ACCURACY * want


def test_merge_equals_sketch_of_union() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.lognormal(size=1000), rng.lognormal(size=3000)
    merged = merge([sketch_of(a), sketch_of(b), EMPTY_SKETCH])
    whole = sketch_of(np.concatenate([a, b]))
    assert np.array_equal(merged.keys, whole.keys) and np.array_equal(merged.counts, whole.counts)
    assert merged.count == 4000


@pytest.mark.parametrize("values", [np.array([]), np.array([np.nan, np.nan])])
def test_empty_is_no_data(values: np.ndarray) -> None:
    assert quantile(sketch_of(values), 0.5) is None


def _exact_cases() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(11)
    ties = rng.integers(0, 5, 9000) * 0.1
    signed = rng.normal(0.0, 1.0, 6000)  # negative values (a decode gap below zero) keep their order
    holes = rng.lognormal(-1.0, 1.0, 9000)
    holes[rng.random(9000) < 0.1] = np.nan
    wide = np.concatenate([rng.lognormal(-8, 3, 4000), [0.0, 1e-12, 1e6]])
    return [("one", np.array([0.25])), ("small", rng.lognormal(size=ExactQuantiles.SMALL)),
            ("just-above-small", rng.lognormal(size=ExactQuantiles.SMALL + 1)), ("ties", ties),
            ("signed", signed), ("nan-holes", holes), ("wide", wide), ("large", rng.lognormal(-1.5, 0.6, 86_400))]


@pytest.mark.parametrize(("name", "values"), _exact_cases(), ids=[c[0] for c in _exact_cases()])
@pytest.mark.parametrize("qs", [(0.0, 0.5, 1.0), (0.01, 0.95, 0.99, 0.999), (1 / 3, 0.125)])
def test_exact_quantiles_equal_numpy_bit_for_bit(name: str, values: np.ndarray, qs: tuple[float, ...]) -> None:
    finite = values[np.isfinite(values)]
    want = tuple(float(v) for v in np.percentile(finite, [100.0 * q for q in qs]))
    order = ExactQuantiles(values)
    assert order.quantiles(qs) == want
    assert order.quantiles(qs[::-1]) == want[::-1]  # bins read again from the cache


def test_exact_quantiles_without_values_is_no_data() -> None:
    assert ExactQuantiles(np.array([np.nan, np.inf])).quantiles((0.5,)) is None
