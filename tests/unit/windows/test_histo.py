"""histo.py against hand-computed histogram_quantile values, exact edge fractions, resets and merges."""

from __future__ import annotations

import math

import pytest

from sloguard.histogram import coarse_bucket_warning, count_le, delta, fraction_le, merge, quantile
from sloguard.model import Histogram
from sloguard.windows.histo import HistogramWindow

INF = math.inf


def H(*buckets: tuple[float, float], s: float = 0.0) -> Histogram:
    return Histogram(tuple(buckets), buckets[-1][1], s)


# 10 obs ≤0.1, 30 ≤0.5 (20 in (0.1,0.5]), 40 ≤1 (10 in (0.5,1]), 40 total.
BASE = H((0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (INF, 40.0))


@pytest.mark.parametrize(
    ("q", "h", "expected"),
    [
        (0.25, BASE, 0.1),  # rank 10 -> top of first bucket
        (0.5, BASE, 0.1 + 0.4 * (10 / 20)),  # rank 20: 10 into (0.1,0.5] of 20
        (0.75, BASE, 0.5),  # rank 30
        (0.9, BASE, 0.5 + 0.5 * (6 / 10)),  # rank 36
        (0.0, BASE, 0.0),
        (1.0, BASE, 1.0),
        (0.99, H((0.1, 0.0), (1.0, 50.0), (INF, 100.0)), 1.0),  # in +Inf bucket -> largest finite bound
        (0.5, H((-1.0, 5.0), (INF, 10.0)), -1.0),  # first bucket with bound <= 0
        (0.5, H((0.2, 4.0), (0.1, 2.0), (INF, 4.0)), None),  # non-monotonic counts are forced monotonic
        (0.5, H((1.0, 0.0), (INF, 0.0)), None),  # empty
        (0.5, H((INF, 5.0)), None),  # mean-only: no finite bucket
        (-0.1, BASE, -INF),
        (1.1, BASE, INF),
    ],
)
def test_quantile_matches_histogram_quantile(q: float, h: Histogram, expected: float | None) -> None:
    got = quantile(q, h)
    if expected is None and h.buckets[0] == (0.2, 4.0):
        assert got == pytest.approx(0.1)  # (0.1,2)->(0.2,4): rank 2 falls at 0.1 after monotonic fix
        return
    assert got == (pytest.approx(expected) if expected is not None and math.isfinite(expected) else expected)


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        (0.1, (0.25, True)),
        (0.5, (0.75, True)),
        (1.0, (1.0, True)),
        (0.1 + 0.2, ((10 + 20 * (0.2 / 0.4)) / 40, False)),  # interpolated inside (0.1, 0.5]
        (0.05, (0.125, False)),
        (2.0, (1.0, False)),  # beyond the last finite bound: only the count up to it is known
        (0.25 * 4, (1.0, True)),
    ],
)
def test_fraction_le(threshold: float, expected: tuple[float, bool]) -> None:
    got = fraction_le(BASE, threshold)
    assert got is not None
    assert got[0] == pytest.approx(expected[0]) and got[1] == expected[1]


@pytest.mark.parametrize(
    ("h", "threshold", "expected"),
    [
        (BASE, 0.5, (30.0, True)),  # a bucket edge: an integer, exactly
        (BASE, 0.3, (20.0, False)),  # 10 + 20 x (0.2 / 0.4): interpolated
        (H((0.1, 1.0), (INF, 3.0)), 0.1, (1.0, True)),
        (Histogram(((0.1, 1.0), (INF, 2.0)), 4.0, 0.0), 0.1, (2.0, True)),  # on count's scale where +Inf disagrees
    ],
)
def test_count_le_is_on_the_count_scale(h: Histogram, threshold: float, expected: tuple[float, bool]) -> None:
    assert count_le(h, threshold) == expected


def test_count_le_subtracts_like_the_delta() -> None:
    """Linear in the buckets: counts of two cumulative histograms subtract to the count of their delta."""
    old, new = H((0.1, 3.0), (0.5, 7.0), (INF, 9.0)), H((0.1, 10.0), (0.5, 31.0), (INF, 40.0))
    for threshold in (0.1, 0.3, 0.5, 2.0):
        a, b, d = count_le(old, threshold), count_le(new, threshold), count_le(delta(old, new), threshold)
        assert a is not None and b is not None and d is not None
        assert b[0] - a[0] == pytest.approx(d[0], abs=1e-12)


def test_fraction_le_empty_is_none() -> None:
    assert fraction_le(H((1.0, 0.0), (INF, 0.0)), 1.0) is None


def test_le_spelling_is_irrelevant_after_float() -> None:
    assert float("1") == float("1.0")
    assert fraction_le(H((float("1"), 3.0), (INF, 4.0)), float("1.0")) == (0.75, True)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (BASE, H((0.1, 12.0), (0.5, 35.0), (1.0, 45.0), (INF, 50.0), s=5.0),
         H((0.1, 2.0), (0.5, 5.0), (1.0, 5.0), (INF, 10.0), s=5.0)),
        (BASE, H((0.1, 1.0), (0.5, 1.0), (1.0, 2.0), (INF, 2.0)), H((0.1, 1.0), (0.5, 1.0), (1.0, 2.0), (INF, 2.0))),
        (BASE, H((0.1, 9.0), (0.5, 35.0), (INF, 50.0)), H((0.1, 9.0), (0.5, 35.0), (INF, 50.0))),
        (BASE, H((0.2, 50.0), (INF, 50.0)), H((0.2, 50.0), (INF, 50.0))),  # new bounds: treated as reset
        (BASE, H((0.1, 9.0), (0.5, 35.0), (1.0, 45.0), (INF, 50.0)),
         H((0.1, 9.0), (0.5, 35.0), (1.0, 45.0), (INF, 50.0))),
    ],
    ids=["increase", "restart", "bucket-count-changed", "bounds-changed", "one-bucket-decreased"],
)
def test_delta(old: Histogram, new: Histogram, expected: Histogram) -> None:
    assert delta(old, new) == expected


def test_merge_sums_on_union_of_bounds() -> None:
    a = H((0.1, 1.0), (1.0, 2.0), (INF, 3.0), s=1.0)
    b = H((0.5, 4.0), (1.0, 5.0), (INF, 6.0), s=2.0)
    m = merge([a, b])
    assert m == Histogram(((0.1, 1.0), (0.5, 5.0), (1.0, 7.0), (INF, 9.0)), 9.0, 3.0)
    assert merge([]) is None
    assert merge([a]) is a


def test_merge_across_ranks_then_quantile() -> None:
    ranks = [H((0.1, 10.0), (1.0, 10.0), (INF, 10.0)), H((0.1, 0.0), (1.0, 10.0), (INF, 10.0))]
    m = merge(ranks)
    assert m is not None
    assert quantile(0.5, m) == pytest.approx(0.1)
    assert quantile(0.75, m) == pytest.approx(0.1 + 0.9 * 0.5)


@pytest.mark.parametrize(
    ("bounds", "threshold", "warns"),
    [
        ([0.1, 0.2, 0.5, 1.0, INF], 0.5, False),  # an edge
        ([0.1, 0.2, 0.5, 1.0, INF], 0.3, True),  # inside (0.2, 0.5]: width 0.3 > 0.03
        ([0.95, 1.0, 1.05, INF], 0.99, False),  # width 0.05 <= 0.099
        ([0.1, 0.2, INF], 5.0, True),  # above all finite bounds
    ],
)
def test_coarse_bucket_warning(bounds: list[float], threshold: float, warns: bool) -> None:
    msg = coarse_bucket_warning(bounds, threshold)
    assert (msg is not None) == warns
    if msg:
        assert f"{threshold:g}s" in msg


def cum(n: float) -> Histogram:
    """n observations, all ≤ 0.1."""
    return H((0.1, n), (INF, n), s=n * 0.05)


def test_window_deltas_and_reset() -> None:
    w = HistogramWindow(max_age=3600)
    assert w.over(60, 0) is None
    for ts, n in [(0, 100), (15, 110), (30, 130), (45, 5), (60, 25)]:  # restart at 45
        w.add(ts, cum(n))
    assert w.resets() == 1
    got = w.over(60, 60)  # base at ts 0: (130 - 100) + 25 after the restart
    assert got is not None and got.count == 55.0
    got = w.over(20, 60)  # base at ts 30 (just before 40): 5 + 20 after restart... from 130: 25 since restart
    assert got is not None and got.count == 25.0
    got = w.over(15, 60)
    assert got is not None and got.count == 20.0


def test_window_without_two_points_or_stale_is_none() -> None:
    w = HistogramWindow(max_age=3600)
    w.add(0, cum(1))
    assert w.over(60, 10) is None
    w.add(15, cum(2))
    assert w.over(60, 20) is not None
    assert w.over(60, 100) is None  # newest point is older than the window: target went quiet


def test_window_ignores_out_of_order_points() -> None:
    w = HistogramWindow(max_age=3600)
    w.add(10, cum(5))
    w.add(5, cum(1))
    w.add(10, cum(7))
    w.add(20, cum(8))
    got = w.over(60, 20)
    assert got is not None and got.count == 3.0 and w.resets() == 0


def test_window_thins_old_points_but_keeps_totals() -> None:
    w = HistogramWindow(max_age=86400)
    for i in range(8000):  # 33 h of 15 s scrapes, one restart in the middle
        n = float(i if i < 4000 else i - 4000)
        w.add(i * 15.0, cum(n))
    assert w.resets() == 1
    assert len(w._ts) < 900
    now = 7999 * 15.0
    day = w.over(86400, now)
    assert day is not None
    # base ≈ now − 1 d (within 1/64 of its age), count = steps since then (the reset adds 1 step of 0)
    assert day.count == pytest.approx(86400 / 15 - 1, rel=0.04)
    recent = w.over(60, now)
    assert recent is not None and recent.count == 4.0


def test_total_counts_from_the_first_point_through_restarts_and_thinning() -> None:
    w = HistogramWindow(max_age=86400)
    assert w.total() is None
    for i in range(8000):  # as above: 33 h of 15 s scrapes from a replica that had served 500, one restart
        w.add(i * 15.0, cum(500.0 + i if i < 4000 else i - 4000.0))
    now = 7999 * 15.0
    total = w.total()
    assert total is not None and total.count == 3999 + 3999  # steps before the restart + the count after it
    a, b = w.over(3600, now), w.over(7200, now)
    assert a is not None and b is not None
    assert total.count > b.count > a.count  # what a window counts is a difference of totals
