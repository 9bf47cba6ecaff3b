"""Histogram quantiles consistent with the histogram's sum and bucket, on captured real pages and tables."""

from __future__ import annotations

import math

import pytest
from support.fixtures import captured_metrics_dir

from sloguard import histogram
from sloguard.model import Histogram
from sloguard.sources.engines import normalise
from sloguard.sources.parse import parse_text
from sloguard.windows import bounds

INF = math.inf
CAPTURED = captured_metrics_dir()


def _view(name: str) -> dict[str, Histogram]:
    view = normalise(parse_text((CAPTURED / name).read_text()), "auto", "t", 0.0)
    (model,) = view.models.values()
    return dict(model.histograms)


def test_vllm_queue_below_first_bucket_is_bounded_by_the_sum_not_095_of_03s() -> None:
    """The real capture: 2 requests, queue sum 18.8 µs, both below vLLM's first bound 0.3 s."""
    h = _view("vllm-v1-dynamo-2026-01.txt")["queue"]
    assert histogram.quantile(0.95, h) == pytest.approx(0.285)  # what histogram_quantile says
    b = bounds.quantile(0.95, h)
    assert b is not None and b.bounded
    mean = h.sum / h.count
    assert b.value == pytest.approx(mean / 0.05) and b.value < 2e-4  # ≤ 0.19 ms, not 285 ms
    assert (b.lo, b.hi) == (0.0, pytest.approx(mean / 0.05))


def test_sglang_queue_is_bounded_too() -> None:
    h = _view("sglang-dynamo-2026-01.txt")["queue"]
    b = bounds.quantile(0.95, h)
    assert b is not None and b.bounded and b.value == pytest.approx(h.sum / h.count / 0.05)
    assert b.value < histogram.quantile(0.95, h)  # type: ignore[operator]


@pytest.mark.parametrize("name", ["vllm-v1-dynamo-2026-01.txt", "sglang-dynamo-2026-01.txt"])
def test_every_captured_quantile_lies_in_its_bucket_and_under_the_mean_bound(name: str) -> None:
    for signal, h in _view(name).items():
        for q in (0.5, 0.9, 0.95, 0.99):
            b = bounds.quantile(q, h)
            assert b is not None, signal
            assert 0.0 <= b.lo <= b.value <= b.hi, (signal, q, b)
            assert b.hi <= h.sum / h.count / (1 - q) + 1e-12, (signal, q, b)
            raw = histogram.quantile(q, h)
            assert raw is not None and b.value <= raw + 1e-12  # only ever lowered, never raised


H = Histogram(((0.1, 50.0), (0.5, 90.0), (1.0, 100.0), (INF, 100.0)), 100.0, 30.0)


@pytest.mark.parametrize(("q", "lo", "hi", "value", "bounded"), [
    (0.5, 0.0, 0.1, 0.1, False),      # rank 50 ends exactly at the first bound
    (0.9, 0.1, 0.5, 0.5, False),
    (0.95, 0.5, 1.0, 0.75, False),     # mean 0.3 / 0.05 = 6 s: no bound
    (0.99, 0.5, 1.0, 0.95, False),
])
def test_bucket_intervals(q: float, lo: float, hi: float, value: float, bounded: bool) -> None:
    b = bounds.quantile(q, H)
    assert b is not None
    assert (b.lo, b.hi, b.bounded) == (pytest.approx(lo), pytest.approx(hi), bounded)
    assert b.value == pytest.approx(value)


def test_inf_bucket_and_empty() -> None:
    h = Histogram(((0.1, 0.0), (INF, 10.0)), 10.0, 50.0)  # all above the largest finite bound
    b = bounds.quantile(0.5, h)
    assert b is not None and (b.lo, b.hi) == (0.1, 0.1)
    assert bounds.quantile(0.5, Histogram(((0.1, 0.0), (INF, 0.0)), 0.0, 0.0)) is None
    assert bounds.quantiles((0.5,), None) is None


def test_cap_limits_a_part_to_its_whole() -> None:
    b = bounds.Bounded(0.48, 0.3, 0.5)
    capped = b.cap(0.475)
    assert (capped.value, capped.hi, capped.bounded) == (0.475, 0.475, True)
    assert b.cap(1.0) is b
    assert bounds.Bounded.exact(0.2).cap(-1.0).value == 0.0  # never negative
