"""Probe windows: exact numpy percentiles, exact edges, expiry with a fake clock, sketch beyond the cap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sloguard.clock import FakeClock
from sloguard.model import ProbeResult
from sloguard.windows.probe import ProbeWindow
from sloguard.windows.rolling import RAW_CAP
from sloguard.windows.sketch import RELATIVE_ACCURACY


def _result(ts: float, ttft: float, ok: bool = True, e2e: float | None = None) -> ProbeResult:
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=ok, ttft_s=ttft,
                       e2e_s=e2e if e2e is not None else ttft + 1.0)


def _fill(pw: ProbeWindow, ttfts: np.ndarray, start: float, step: float = 1.0) -> None:
    for i, v in enumerate(ttfts):
        pw.add(_result(start + i * step, float(v)), good=bool(v < 0.5))


@pytest.mark.parametrize("window", [300.0, 3600.0, 86400.0])
def test_exact_percentiles_equal_numpy(window: float) -> None:
    values = np.random.default_rng(3).lognormal(-1, 0.7, 5000)
    clock = FakeClock(1000.0)
    pw = ProbeWindow(86400.0)
    _fill(pw, values, clock.now(), step=1.0)
    now = clock.now() + 4999
    view = pw.view(window, now)
    inside = values[-min(int(window), 5000):]
    assert view.exact and view.total == inside.size
    got = view.quantiles("ttft", (0.5, 0.95, 0.99))
    assert got == tuple(np.percentile(inside, [50, 95, 99]))
    decode = view.quantiles("decode", (0.5,))
    assert decode is not None and decode[0] == pytest.approx(1.0)


def test_failed_requests_keep_what_they_reached() -> None:
    pw = ProbeWindow(3600.0)
    pw.add(_result(1.0, 0.2), good=True)
    pw.add(_result(2.0, 0.9), good=False)
    # failed after its first token at 50 s: TTFT measured, E2E censored (> 60 s elapsed)
    pw.add(ProbeResult(ts=3.0, probe="p", target="t", model="m", api="chat", ok=False, ttft_s=50.0, e2e_s=55.0,
                       elapsed_s=60.0), good=True)  # a failed request is never good
    view = pw.view(300.0, 10.0)
    assert (view.total, view.ok, view.good) == (3, 2, 1)
    (ttft,) = view.censored_quantiles("ttft", (1.0,)) or ()
    assert (ttft.value, ttft.upper, ttft.censored_count) == (50.0, 50.0, 0)
    (e2e,) = view.censored_quantiles("e2e", (1.0,)) or ()
    assert (e2e.value, e2e.upper, e2e.censored_count, e2e.count) == (60.0, math.inf, 1, 3)
    (tpot,) = view.censored_quantiles("tpot", (0.5,)) or ()  # only the failed one was decoding: > 0 s
    assert (tpot.value, tpot.upper, tpot.count) == (0.0, math.inf, 1)
    assert pw.view(300.0, 2.5).quantiles("tpot", (0.5,)) is None  # undefined everywhere -> no data


def _failed(ts: float, elapsed: float, ttft: float | None = None, tpot: float | None = None) -> ProbeResult:
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=False, error="timeout",
                       ttft_s=ttft, e2e_s=ttft, tpot_s=tpot, connect_s=0.001, elapsed_s=elapsed)


# (ok TTFTs, failed requests as (elapsed, ttft reached), q) -> (value, upper, censored count)
@pytest.mark.parametrize(("ttfts", "failed", "q", "want"), [
    ([0.1] * 99, [(1.9, None)], 0.95, (0.1, 0.1, 1)),  # 1 censored above the p95 ranks: exact
    ([0.1] * 28, [(1.9, None)] * 12, 0.95, (1.9, math.inf, 12)),  # 12 of 40 timed out before the first token
    ([0.1] * 28, [(1.9, None)] * 12, 0.5, (0.1, 0.1, 12)),  # the median is still among measured values
    ([0.1] * 20, [(1.9, None)] * 20, 0.5, (pytest.approx(1.0), math.inf, 20)),  # interpolates into a cut rank
    ([0.1] * 28, [(1.9, 1.5)] * 12, 0.95, (1.5, 1.5, 0)),  # timed out after the first token: measured
    ([], [(1.9, None)] * 3, 0.5, (1.9, math.inf, 3)),
    ([2.5] * 10, [(1.9, None)], 1.0, (2.5, math.inf, 1)),  # bound below measured values still opens the max
])
def test_censored_quantiles(ttfts: list[float], failed: list[tuple[float, float | None]], q: float,
                            want: tuple[float, bool, int]) -> None:
    pw = ProbeWindow(3600.0)
    for i, t in enumerate(ttfts):
        pw.add(_result(float(i), t), good=True)
    for j, (el, ttft) in enumerate(failed):
        pw.add(_failed(1000.0 + j, el, ttft), good=False)
    (got,) = pw.view(3600.0, 2000.0).censored_quantiles("ttft", (q,)) or ()
    assert (got.value, got.upper, got.censored_count) == want
    assert got.count == len(ttfts) + len(failed)


# Which metrics a failed request is censored in (docs/definitions.md).
@pytest.mark.parametrize(("result", "censored", "undefined"), [
    (_failed(1.0, 2.0), {"ttft", "ttfot", "e2e"}, {"tpot", "itl", "decode"}),  # no token: per-token undefined
    (_failed(1.0, 2.0, ttft=0.5), {"ttfot", "e2e", "tpot", "itl", "decode"}, set()),
    (_failed(1.0, 2.0, ttft=0.5, tpot=0.01), {"ttfot", "e2e", "tpot", "itl", "decode"}, set()),
])
def test_censoring_per_metric(result: ProbeResult, censored: set[str], undefined: set[str]) -> None:
    pw = ProbeWindow(3600.0)
    pw.add(result, good=False)
    view = pw.view(3600.0, 10.0)
    for metric in ("ttft", "ttfot", "tpot", "itl", "e2e", "decode", "connect"):
        got = view.censored_quantiles(metric, (0.5,))
        if metric in undefined:
            assert got is None, metric
        else:
            assert got is not None and (got[0].upper == math.inf) == (metric in censored), metric
    (decode,) = view.censored_quantiles("decode", (0.5,)) or (None,)
    if decode is not None:
        assert decode.value == pytest.approx(1.5)  # elapsed 2.0 - ttft 0.5: decoding ran at least 1.5 s


def test_sketched_windows_report_censoring() -> None:
    pw = ProbeWindow(86400.0, cap=500, chunk=100)
    for i in range(3000):
        pw.add(_result(i * 10.0, 0.1 + (i % 7) * 0.01), good=True)
    for i in range(400):  # 400 of 3400 censored: p95 falls among them
        pw.add(_failed(30_000.0 + i, 5.0), good=False)
    view = pw.view(86400.0, 31_000.0)
    assert not view.exact
    p50, p95 = view.censored_quantiles("ttft", (0.5, 0.95)) or ()
    assert p50.exact and p95.upper == math.inf and p95.censored_count == 400
    assert abs(p95.value - 5.0) <= RELATIVE_ACCURACY * 5.0


def test_window_expiry_with_fake_clock() -> None:
    clock = FakeClock(10_000.0)
    pw = ProbeWindow(3600.0)
    pw.add(_result(clock.now(), 0.1), good=True)
    for advance, total_5m, total_1h in [(0.0, 1, 1), (299.0, 1, 1), (1.0, 0, 1), (3300.0, 0, 0)]:
        clock.advance(advance)
        pw.expire(clock.now())
        assert pw.view(300.0, clock.now()).total == total_5m
        assert pw.view(3600.0, clock.now()).total == total_1h
    assert pw.view(300.0, clock.now()).quantiles("ttft", (0.5,)) is None


def test_small_cap_merges_raw_and_buckets_within_one_percent() -> None:
    values = np.random.default_rng(5).lognormal(-1, 0.5, 3000)
    pw = ProbeWindow(86400.0, cap=500, chunk=100)
    _fill(pw, values, 0.0, step=10.0)
    now = 29_990.0
    view = pw.view(86400.0, now)
    assert not view.exact and view.total == 3000 and view.good == int((values < 0.5).sum())
    got = view.quantiles("ttft", (0.5, 0.99))
    assert got is not None
    for g, want in zip(got, np.percentile(values, [50, 99]), strict=True):
        assert abs(g - want) <= RELATIVE_ACCURACY * want
    assert pw.view(300.0, now).exact  # recent windows stay exact


def test_beyond_raw_cap_within_one_percent() -> None:
    n = RAW_CAP + 20_000
    values = np.random.default_rng(9).lognormal(-1.2, 0.9, n)
    pw = ProbeWindow(7 * 86400.0)
    _fill(pw, values, 0.0, step=1.0)
    view = pw.view(7 * 86400.0, float(n))
    assert not view.exact and view.total == n
    got = view.quantiles("ttft", (0.5, 0.95, 0.99))
    assert got is not None
    for g, want in zip(got, np.percentile(values, [50, 95, 99]), strict=True):
        assert abs(g - want) <= RELATIVE_ACCURACY * want


def _state(pw: ProbeWindow, now: float) -> list[tuple[int, int, int, bool, tuple[float, ...] | None]]:
    out = []
    for window in (300.0, 3600.0, 6 * 3600.0, 86400.0):
        view = pw.view(window, now)
        out.append((view.total, view.ok, view.good, view.exact, view.quantiles("ttft", (0.5, 0.99))))
    return out


@pytest.mark.parametrize("cap", [500, 5000])  # sketch regime beyond 500 raw rows, all exact with 5000
def test_arrival_order_and_batching_do_not_change_results(cap: int) -> None:
    rng = np.random.default_rng(21)
    ts = np.sort(rng.uniform(0.0, 40_000.0, 3000))
    values = rng.lognormal(-1, 0.5, 3000)
    live, rebuilt = ProbeWindow(86400.0, cap=cap, chunk=100), ProbeWindow(86400.0, cap=cap, chunk=100)
    jitter = np.argsort(ts + rng.uniform(0.0, 30.0, ts.size))  # results complete out of start order
    for n, i in enumerate(jitter):
        live.add(_result(float(ts[i]), float(values[i]), ok=i % 50 != 0), good=bool(values[i] < 0.5))
        if n % 37 == 0:
            live.view(300.0, float(ts[i]))  # an evaluation flushes the buffer mid-stream
    for i in range(ts.size):
        rebuilt.add(_result(float(ts[i]), float(values[i]), ok=i % 50 != 0), good=bool(values[i] < 0.5))
    assert _state(live, 40_000.0) == _state(rebuilt, 40_000.0)
    ok = np.arange(ts.size) % 50 != 0
    assert _state(live, 40_000.0)[-1][:3] == (3000, 3000 - 60, int((ok & (values < 0.5)).sum()))


def test_sketch_view_extends_its_cached_raw_sketch_exactly() -> None:
    values = np.random.default_rng(8).lognormal(-1, 0.5, 2000)
    cached, fresh = ProbeWindow(86400.0, cap=300, chunk=100), ProbeWindow(86400.0, cap=300, chunk=100)
    for i, v in enumerate(values):
        cached.add(_result(float(i), float(v)), good=True)
        fresh.add(_result(float(i), float(v)), good=True)
        if i % 40 == 0:
            cached.view(86400.0, float(i)).quantiles("ttft", (0.5,))
    view = cached.view(86400.0, 2000.0)
    assert not view.exact
    assert view.quantiles("ttft", (0.5, 0.9)) == fresh.view(86400.0, 2000.0).quantiles("ttft", (0.5, 0.9))


# (created at, row timestamps, window, now, covered seconds): observed since creation or the oldest row
@pytest.mark.parametrize(("since", "rows", "window", "now", "covered"), [
    (1000.0, [], 3600.0, 1600.0, 600.0),
    (1000.0, [1100.0], 3600.0, 1600.0, 600.0),
    (1000.0, [900.0, 1500.0], 3600.0, 1600.0, 700.0),  # a rebuilt row older than creation
    (1000.0, [], 300.0, 1600.0, 300.0),  # full window
    (1000.0, [], 300.0, 1000.0, 0.0),
    (float("-inf"), [1500.0], 3600.0, 1600.0, 3600.0),  # no start given: the whole window
])
def test_covered_span(since: float, rows: list[float], window: float, now: float, covered: float) -> None:
    pw = ProbeWindow(86400.0, since=since)
    for ts in rows:
        pw.add(_result(ts, 0.1), good=True)
    assert pw.covered(window, now) == covered
