"""Evaluation oracles: goodput counts, burn-rate tables, error budget, stages, server SLOs, no data."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sloguard.model import Histogram, ProbeResult
from sloguard.slo.evaluate import evaluate
from sloguard.slo.model import SLO, Goodput, Objective, is_good
from sloguard.windows.probe import ProbeWindow

NOW = 1_000_000.0


def _r(ts: float, ttft: float | None = 0.2, tpot: float | None = 0.05, ok: bool = True, e2e: float = 2.0,
       bucket: str = "") -> ProbeResult:
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=ok, ttft_s=ttft, tpot_s=tpot,
                       e2e_s=e2e, connect_s=0.01, prompt_bucket=bucket)


GP = Goodput(target=0.99, ttft=0.5, tpot=0.1)


@pytest.mark.parametrize(
    ("result", "good"),
    [
        (_r(0), True), (_r(0, ttft=0.5), True), (_r(0, ttft=0.51), False), (_r(0, tpot=0.2), False),
        (_r(0, tpot=None), True),  # TPOT undefined (≤1 token): criterion skipped
        (_r(0, ok=False), False),
        (_r(0, ttft=None, tpot=None), True),  # an `empty` answer (only EOS): TTFT undefined, criterion skipped
    ],
)
def test_is_good(result: ProbeResult, good: bool) -> None:
    assert is_good(result, GP) is good


def _window(results: list[ProbeResult], slo: SLO) -> dict[str, ProbeWindow]:
    pw = ProbeWindow(slo.window)
    for r in results:
        pw.add(r, is_good(r, slo.goodput))
    return {"": pw}


# (bad requests out of 100 in the last 5 minutes, expected 5m burn rate at a 0.99 goodput target)
@pytest.mark.parametrize(("bad", "burn"), [(0, 0.0), (1, 1.0), (5, 5.0), (15, 15.0), (100, 100.0)])
def test_burn_rate_table(bad: int, burn: float) -> None:
    slo = SLO("s", "t", goodput=GP, window=86400.0 * 28)
    results = [_r(NOW - 100 + i, ttft=0.9 if i < bad else 0.1) for i in range(100)]
    st = evaluate(slo, _window(results, slo), NOW)
    w5 = next(w for w in st.windows if w.window == 300.0)
    assert (w5.requests, w5.good) == (100, 100 - bad)
    assert w5.goodput_ratio == pytest.approx((100 - bad) / 100)
    assert w5.goodput_rate == pytest.approx((100 - bad) / 300)
    assert w5.burn_rate == pytest.approx(burn)
    assert st.error_budget_remaining == pytest.approx(1.0 - burn)  # all requests are also in the 28d window


def test_error_objective_counts_failures_only() -> None:
    slo = SLO("s", "t", goodput=GP, error_objective=0.9, window=3600.0)
    results = [_r(NOW - i, ttft=5.0) for i in range(8)] + [_r(NOW - 10 - i, ok=False) for i in range(2)]
    w = evaluate(slo, _window(results, slo), NOW).windows[0]
    assert (w.goodput_ratio, w.error_ratio, w.failure_ratio) == (0.0, 0.2, 0.2)
    assert w.burn_rate == pytest.approx(2.0)


def test_objectives_and_stages_exact() -> None:
    slo = SLO("s", "t", objectives=(Objective("ttft", 95, 0.5),), budgets={"ttft": 0.25, "decode": 10.0})
    ttfts = np.linspace(0.1, 0.6, 101)
    st = evaluate(slo, _window([_r(NOW - i, ttft=float(v)) for i, v in enumerate(ttfts)], slo), NOW)
    o = next(o for o in st.objectives if o.window == 3600.0)
    assert o.value == pytest.approx(float(np.percentile(ttfts, 95))) and o.compliant is False
    ttft = next(s for s in st.stages if s.window == 3600.0 and s.stage == "ttft")
    assert ttft.p50 == pytest.approx(0.35) and ttft.share == pytest.approx(0.35 / 2.0)
    assert ttft.overrun == pytest.approx(float(np.percentile(ttfts, 95)) / 0.25)
    assert st.worst_stage == "ttft"


def test_empty_windows_are_no_data() -> None:
    slo = SLO("s", "t", objectives=(Objective("ttft", 95, 0.5),), goodput=GP)
    st = evaluate(slo, _window([_r(NOW - 1000)], slo), NOW)
    w5 = next(w for w in st.windows if w.window == 300.0)
    assert w5.requests == 0
    assert (w5.goodput_ratio, w5.goodput_rate, w5.error_ratio, w5.burn_rate) == (None, None, None, None)
    assert all(o.value is None and o.compliant is None for o in st.objectives if o.window == 300.0)
    assert all(s.p50 is None for s in st.stages if s.window == 300.0)
    assert next(w for w in st.windows if w.window == 1800.0).requests == 1


def test_segments_are_evaluated_separately() -> None:
    slo = SLO("s", "t", goodput=GP, segment_by="prompt_bucket")
    windows = {"": ProbeWindow(slo.window), "short": ProbeWindow(slo.window), "long": ProbeWindow(slo.window)}
    for i, (bucket, ttft) in enumerate([("short", 0.1), ("short", 0.1), ("long", 2.0)]):
        r = _r(NOW - i, ttft=ttft, bucket=bucket)
        windows[""].add(r, is_good(r, GP))
        windows[bucket].add(r, is_good(r, GP))
    ratios = {w.segment: w.goodput_ratio for w in evaluate(slo, windows, NOW).windows if w.window == 300.0}
    assert ratios == {"": pytest.approx(2 / 3), "short": 1.0, "long": 0.0}


class FakeServer:
    """Server windows returning one fixed histogram per signal."""

    H = Histogram(((0.1, 50.0), (0.5, 90.0), (1.0, 100.0), (math.inf, 100.0)), 100.0, 30.0)

    def histogram(self, target: str, model: str | None, signal: str, window: float, now: float) -> Histogram | None:
        return self.H if signal in ("ttft", "queue") else None


def test_server_slo_uses_histogram_maths() -> None:
    slo = SLO("s", "t", source="server", objectives=(Objective("ttft", 95, 0.5),),
              goodput=Goodput(target=0.95, ttft=0.5), budgets={"queue": 0.5})
    st = evaluate(slo, None, NOW, FakeServer())
    o = st.objectives[0]
    assert o.value == pytest.approx(0.75) and o.fraction_le == pytest.approx(0.9) and o.compliant is False
    w = st.windows[0]
    assert w.requests == 100 and w.goodput_ratio is None
    assert w.error_ratio == pytest.approx(0.1) and w.burn_rate == pytest.approx(2.0)
    queue = next(s for s in st.stages if s.stage == "queue")
    assert queue.p95 == pytest.approx(0.75) and queue.overrun == pytest.approx(1.5)


def test_network_is_the_time_to_the_response_head_not_a_histogram_difference() -> None:
    """Probe TTFT 1 s vs server TTFT p95 0.75 s used to give a 'network' of 0.25 s; the head time is per request."""
    slo = SLO("s", "t")
    results = [dataclasses.replace(_r(NOW - i, ttft=1.0), head_s=0.004 + i * 1e-3) for i in range(10)]
    st = evaluate(slo, _window(results, slo), NOW, FakeServer())
    net = next(s for s in st.stages if s.stage == "network" and s.window == 300.0)
    assert not net.estimate and net.source == "probe" and net.resolution == ()
    assert net.p50 == pytest.approx(0.0085) and net.p99 == pytest.approx(0.01291)
    # without head times (results stored before they existed) there is no network stage, never a guess
    st = evaluate(slo, _window([_r(NOW - i, ttft=1.0) for i in range(10)], slo), NOW, FakeServer())
    assert not [s for s in st.stages if s.stage == "network"]


# Server SLOs without goodput: each objective burns miss / (1 − p/100); the SLO burns at the fastest one.
# FakeServer.H: 50% of observations ≤ 0.1 s, 90% ≤ 0.5 s, 100% ≤ 1 s (ttft and queue; no e2e data).
@pytest.mark.parametrize(("objectives", "objective", "error_ratio", "burn"), [
    ((Objective("ttft", 95, 0.5),), 0.95, 0.1, 2.0),
    ((Objective("ttft", 90, 0.5),), 0.90, 0.1, 1.0),
    ((Objective("ttft", 50, 0.1),), 0.50, 0.5, 1.0),
    ((Objective("ttft", 99, 1.0), Objective("queue", 95, 0.5)), 0.99, 0.02, 2.0),  # p95 miss burns fastest
    ((Objective("ttft", 99, 0.5), Objective("queue", 95, 1.0)), 0.99, 0.1, 10.0),  # p99 miss 10% = 10×
    ((Objective("ttft", 99, 0.5), Objective("queue", 95, 0.5)), 0.99, 0.1, 10.0),  # not max(miss) vs p95 (2×)
    ((Objective("e2e", 95, 1.0), Objective("queue", 95, 0.5)), 0.95, 0.1, 2.0),  # e2e has no data: skipped
    ((Objective("e2e", 95, 1.0),), 0.95, None, None),  # no data at all: no burn, no budget
])
def test_server_slo_burn_rate_from_objectives(objectives: tuple[Objective, ...], objective: float,
                                              error_ratio: float | None, burn: float | None) -> None:
    slo = SLO("s", "t", source="server", objectives=objectives, window=86400.0)
    st = evaluate(slo, None, NOW, FakeServer())
    assert (st.sli, st.objective) == ("objectives", pytest.approx(objective))
    for w in st.windows:
        assert w.error_ratio == (None if error_ratio is None else pytest.approx(error_ratio))
        assert w.burn_rate == (None if burn is None else pytest.approx(burn))
        if burn is not None:
            assert w.burn_rate == pytest.approx((w.error_ratio or 0.0) / (1 - objective))
    assert st.error_budget_remaining == (None if burn is None else pytest.approx(1 - burn))
