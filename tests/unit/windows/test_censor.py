"""Censoring that cannot cry wolf: an objective is missed because of cut-short requests only when putting them at
+∞ crosses its threshold (lower ≤ threshold < upper); exact windows and the sketch path beyond the raw rows alike."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sloguard.censoring import censored
from sloguard.model import ProbeResult
from sloguard.windows.censor import HOLDS, MISSED, MISSED_CUT_SHORT, Judgement, judge, judge_quantile, judge_request
from sloguard.windows.probe import ProbeWindow
from sloguard.windows.sketch import RELATIVE_ACCURACY

INF = math.inf


# (lower, upper, threshold) -> judgement
@pytest.mark.parametrize(("lower", "upper", "threshold", "want"), [
    (0.1, 0.1, 0.1, HOLDS),  # none cut short, exactly at the threshold: holds (≤)
    (0.1000001, 0.1000001, 0.1, MISSED),  # none cut short, just over
    (0.05, 0.1, 0.1, HOLDS),  # cut-short requests at +∞ move it exactly to the threshold: still holds
    (0.05, 0.1000001, 0.1, MISSED_CUT_SHORT),  # ... just over: missed only because of them
    (0.1, INF, 0.1, MISSED_CUT_SHORT),  # lower bound exactly at the threshold, unbounded above
    (0.1000001, INF, 0.1, MISSED),  # the measured values alone already miss
    (0.0, INF, 0.0, MISSED_CUT_SHORT),
    (0.2, 0.3, 0.1, MISSED),
])
def test_judge_table(lower: float, upper: float, threshold: float, want: Judgement) -> None:
    assert judge(lower, upper, threshold) == want


# One request's stored value (≥ 0 measured, censored(b) cut short after b seconds) -> judgement at 0.5 s
@pytest.mark.parametrize(("stored", "want"), [
    (0.5, HOLDS), (0.5000001, MISSED), (0.0, HOLDS),
    (censored(0.2), MISSED_CUT_SHORT),  # cut short at 0.2 s: it might have been fast, it is not known to be
    (censored(0.5), MISSED_CUT_SHORT), (censored(0.6), MISSED),  # it ran past the threshold: missed for sure
])
def test_judge_request_table(stored: float, want: Judgement) -> None:
    assert judge_request(stored, 0.5) == want


def _ok(ts: float, ttft: float) -> ProbeResult:
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=True, ttft_s=ttft, e2e_s=ttft + 1.0)


def _cut(ts: float, elapsed: float) -> ProbeResult:
    """A request reset before its first token after `elapsed` seconds: TTFT censored at `elapsed`."""
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=False, error="reset",
                       elapsed_s=elapsed)


def _window(ok: list[float], cut: list[float], cap: int | None = None) -> ProbeWindow:
    pw = ProbeWindow(86400.0, cap=cap, chunk=100) if cap else ProbeWindow(86400.0)
    for i, v in enumerate(ok):
        pw.add(_ok(i * 10.0, v), good=True)
    for j, el in enumerate(cut):
        pw.add(_cut(len(ok) * 10.0 + j, el), good=False)
    return pw


MS = [0.001 * (i + 1) for i in range(100)]  # 1, 2, ..., 100 ms: every rank its own value


# p95 of 100 requests reads ranks 94 and 95 (numpy `linear`: 99 × 0.95 = 94.05). Cut-short requests (reset at
# 0.5 ms, below every measured value) are ranks 0.. with them at the time they ran, the top ranks at +∞.
# (measured, cut short, threshold) -> (lower, upper, judgement)
@pytest.mark.parametrize(("ok", "cut", "threshold", "want"), [
    # none cut short: lower = upper, judged on the values alone, exactly at the threshold holds
    (MS, [], "upper", (0.09505, 0.09505, HOLDS)),
    (MS, [], 0.095, (0.09505, 0.09505, MISSED)),
    # 4 cut short: ranks 96-99 at +∞, the ranks read (94, 95) stay measured: a finite upper bound
    (MS[:96], [0.0005] * 4, 0.1, (0.09105, 0.09505, HOLDS)),  # at +∞ they cannot cross 100 ms: holds
    (MS[:96], [0.0005] * 4, "upper", (0.09105, 0.09505, HOLDS)),  # upper exactly at the threshold
    (MS[:96], [0.0005] * 4, 0.093, (0.09105, 0.09505, MISSED_CUT_SHORT)),
    (MS[:96], [0.0005] * 4, 0.09, (0.09105, 0.09505, MISSED)),  # measured values alone miss
    # 5 cut short: rank 95 is one of them: unbounded above, missed because of them whatever the threshold
    (MS[:95], [0.0005] * 5, 10.0, (0.09005, INF, MISSED_CUT_SHORT)),
    (MS[:95], [0.0005] * 5, "lower", (0.09005, INF, MISSED_CUT_SHORT)),  # lower bound exactly at it
    (MS[:95], [0.0005] * 5, 0.09, (0.09005, INF, MISSED)),
    # every request cut short (timeouts at 1.9 s)
    ([], [1.9] * 3, 5.0, (1.9, INF, MISSED_CUT_SHORT)),
    ([], [1.9] * 3, 1.0, (1.9, INF, MISSED)),
    # cut short above every rank read: the quantile is exact
    (MS[:96], [2.0] * 4, 0.1, (0.09505, 0.09505, HOLDS)),
])
def test_exact_window_bounds_at_the_censored_rank(ok: list[float], cut: list[float], threshold: float | str,
                                                  want: tuple[float, float, Judgement]) -> None:
    view = _window(ok, cut).view(86400.0, 10_000.0)
    assert view.exact
    (q,) = view.censored_quantiles("ttft", (0.95,)) or ()
    at = {"upper": q.upper, "lower": q.value}.get(threshold, threshold) if isinstance(threshold, str) else threshold
    assert (q.value, q.upper, judge_quantile(q, float(at))) == (pytest.approx(want[0]), pytest.approx(want[1]),
                                                                 want[2])
    assert (q.censored_count, q.count) == (len(cut), len(ok) + len(cut))
    if q.upper < INF:  # the oracle: numpy with the cut-short requests at +∞ (a huge finite stand-in)
        assert q.upper == pytest.approx(np.percentile(ok + [1e9] * len(cut), 95))


def test_one_timeout_in_139_does_not_breach_a_median_far_under_its_objective() -> None:
    """Found item 4: one cut-short request among 139 moved p50 TTFT by one rank; it cannot cross 50 ms."""
    rng = np.random.default_rng(7)
    ok = list(rng.uniform(0.010, 0.020, 138))
    (q,) = _window(ok, [0.0005]).view(86400.0, 10_000.0).censored_quantiles("ttft", (0.5,)) or ()
    assert q.value < q.upper <= 0.020 and q.censored_count == 1
    assert judge_quantile(q, 0.050) == HOLDS


# The sketch path (rows beyond the raw cap): 3,400 requests, p95 reads ranks 3229 and 3230 (3399 × 0.95).
# (cut short at the top, threshold) -> (upper finite, judgement)
@pytest.mark.parametrize(("n_cut", "elapsed", "threshold", "want"), [
    (169, 0.0005, 10.0, (True, HOLDS)),  # ranks 3231.. cut short: the ranks read stay measured
    (170, 0.0005, 10.0, (False, MISSED_CUT_SHORT)),  # rank 3230 is one of them: unbounded
    (400, 5.0, 10.0, (False, MISSED_CUT_SHORT)),  # timeouts at 5 s, under a 10 s objective
    (400, 5.0, 1.0, (False, MISSED)),  # timeouts at 5 s are over a 1 s objective on their own
    (0, 0.0, 10.0, (True, HOLDS)),
])
def test_sketched_window_bounds(n_cut: int, elapsed: float, threshold: float, want: tuple[bool, Judgement]) -> None:
    ok = list(np.random.default_rng(3).lognormal(-1.5, 0.5, 3400 - n_cut))
    view = _window(ok, [elapsed] * n_cut, cap=500).view(86400.0, 40_000.0)
    assert not view.exact
    (q,) = view.censored_quantiles("ttft", (0.95,)) or ()
    assert (math.isfinite(q.upper), judge_quantile(q, threshold)) == want
    assert q.censored_count == n_cut and q.count == 3400 and q.upper >= q.value
    if math.isfinite(q.upper):
        truth = np.percentile(ok + [1e9] * n_cut, 95)
        assert abs(q.upper - truth) <= 2 * RELATIVE_ACCURACY * truth


def test_sketched_all_cut_short() -> None:
    view = _window([], [2.0] * 800, cap=500).view(86400.0, 40_000.0)
    assert not view.exact
    (q,) = view.censored_quantiles("ttft", (0.5,)) or ()
    assert q.upper == INF and abs(q.value - 2.0) <= RELATIVE_ACCURACY * 2.0
    assert (judge_quantile(q, 3.0), judge_quantile(q, 1.0)) == (MISSED_CUT_SHORT, MISSED)
