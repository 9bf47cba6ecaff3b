"""The burn-rate window table, the binomial guard and the row plans both alerting paths read."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from sloguard.config.burnwindows import WORKBOOK, burn_windows, windows_for
from sloguard.slo.burnrate import FALSE_PER_30D, MIN_BAD, binom_tail, min_bad, observed_min_bad, plan

H, D = 3600.0, 86400.0


def _rows(window: float) -> list[tuple[str, float, float, float]]:
    return [(r.severity, r.long, r.short, r.factor) for r in burn_windows(window)]


@pytest.mark.parametrize(("window", "rows"), [
    (30 * D, [(r.severity, r.long, r.short, r.factor) for r in WORKBOOK]),  # the Workbook table itself
    (28 * D, [(r.severity, r.long, r.short, r.factor) for r in WORKBOOK]),
    (D, [("page", 300.0, 60.0, 14.4), ("page", 600.0, 60.0, 6.0), ("ticket", H, 300.0, 3.0),
         ("ticket", 2 * H, 600.0, 1.0)]),
    (H, [("page", 300.0, 60.0, 6.0), ("ticket", 300.0, 60.0, 1.0)]),  # equal windows keep the lower factor
])
def test_window_table(window: float, rows: list[tuple[str, float, float, float]]) -> None:
    assert _rows(window) == rows


@pytest.mark.parametrize("window", [H, 2 * H, 6 * H, 12 * H, D, 2 * D, 7 * D, 14 * D, 28 * D, 30 * D, 60 * D, 90 * D])
def test_every_window_gets_meaningful_page_and_ticket_rows(window: float) -> None:
    rows = burn_windows(window)
    assert {r.severity for r in rows} == {"page", "ticket"}
    for r in rows:
        assert r.factor >= 1.0 and 60.0 <= r.short <= r.long <= window and r.long >= 300.0
    assert set(windows_for(window)) >= {window, *(r.long for r in rows), *(r.short for r in rows)}


def _tail_oracle(k: int, n: int, p: float) -> float:
    q = Fraction(str(p))  # the decimal value, so the exact sum stays small
    return float(sum(math.comb(n, j) * q**j * (1 - q) ** (n - j) for j in range(k, n + 1)))


@pytest.mark.parametrize(("k", "n", "p"), [(0, 10, 0.1), (1, 10, 0.01), (3, 10, 0.01), (9, 240, 0.01),
                                          (20, 200, 0.05), (50, 100, 0.5), (11, 10, 0.5), (5, 5, 0.999)])
def test_binomial_tail_matches_exact_sum(k: int, n: int, p: float) -> None:
    assert binom_tail(k, n, p) == pytest.approx(_tail_oracle(k, n, p), rel=1e-9, abs=1e-300)


def _false_per_30d(k: int, n: int, per_30d: float, p0: float) -> float:
    """Expected upcrossings of k per 30 days: N·p0·(1 − p0)·P(Bin(n − 1, p0) ≥ k − 1), summed exactly."""
    return per_30d * p0 * (1 - p0) * _tail_oracle(k - 1, n - 1, p0)


# (requests in the long window, requests per 30 days, p0)
@pytest.mark.parametrize(("n", "per_30d", "p0"), [(10, 86400, 0.01), (20, 172800, 0.01), (40, 172800, 0.01),
                                                  (240, 172800, 0.01), (480, 86400, 0.001), (120, 86400, 0.05),
                                                  (2880, 86400, 0.01), (60, 43200, 0.2)])
def test_min_bad_is_the_smallest_count_healthy_operation_rarely_reaches(n: int, per_30d: float, p0: float) -> None:
    k = min_bad(n, per_30d, p0)
    assert k is not None and k >= MIN_BAD
    assert _false_per_30d(k, n, per_30d, p0) <= FALSE_PER_30D
    assert k == MIN_BAD or _false_per_30d(k - 1, n, per_30d, p0) > FALSE_PER_30D


def test_min_bad_none_when_nothing_is_significant() -> None:
    assert min_bad(3, 86400, 0.5) is None  # even 3 of 3 bad happens thousands of times a month at 50%
    assert min_bad(1, 86400, 0.0001) is None  # fewer requests than MIN_BAD


def test_one_failure_among_ten_probes_never_pages() -> None:
    """The issue's case: one failure among 10 probes in a window reads as a 10x burn; the guard holds it."""
    for rule in plan(28 * D, 0.99, 10 / 300):  # 10 probes per 5 minutes
        assert rule.min_bad is None or rule.min_bad >= MIN_BAD
        assert not rule.fires(burn_long=10.0 * 20, burn_short=10.0 * 20, bad_long=1)


@pytest.mark.parametrize(("objective", "rate", "meanings"), [
    (0.99, 1 / 15, ["ok", "ok", "ok", "ok"]),
    (0.5, 1 / 15, ["never", "never", "never", "ok"]),  # a median objective can burn 2x at most
    (0.99, 1 / 600, ["never", "never", "never", "ok"]),  # 1 probe / 10 min: 1 per long window, 0.5 per 5m
    # 1 probe a minute at 1e-6: 0.04 bad requests expected a month, so 1 bad would already be significant
    (0.999999, 1 / 60, ["one-failure"] * 4),
])
def test_row_meaning(objective: float, rate: float, meanings: list[str]) -> None:
    assert [r.meaning for r in plan(D, objective, rate)] == meanings


def test_server_rows_have_no_schedule() -> None:
    rows = plan(D, 0.9, None)
    assert all(r.min_bad is None and r.expected_long is None for r in rows)
    assert [r.meaning for r in rows] == ["never", "ok", "ok", "ok"]  # 14.4 × 10% > 100%
    assert observed_min_bad(0, 0.1) == MIN_BAD
    assert observed_min_bad(10_000, 0.05) == pytest.approx(500 + 4.7534 * math.sqrt(475), rel=1e-4)


def test_smallest_burn_and_time_to_fire() -> None:
    page = plan(D, 0.99, 1 / 15)[0]  # 5m/1m at 14.4x, 20 probes per long window
    assert page.min_bad is not None
    assert page.smallest_burn() == pytest.approx(max(14.4, page.min_bad / (20 * 0.01)))
    # at the factor: after one long window on average, unless k_min bad requests take longer to arrive
    assert page.time_to_fire(14.4) == pytest.approx(max(300.0, page.min_bad * 300 / (14.4 * 0.01 * 20)))
    assert page.time_to_fire(14.0) is None
    t = page.time_to_fire(30.0)
    assert t == pytest.approx(max(14.4 * 300 / 30, page.min_bad * 300 / (30 * 0.01 * 20)))
