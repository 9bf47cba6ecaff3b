"""Evaluation oracles: two budgets, censored quantiles, budgets over the whole window, stages, server SLOs."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sloguard.model import Histogram, ProbeResult
from sloguard.slo.burnrate import min_bad, observed_min_bad
from sloguard.slo.evaluate import evaluate
from sloguard.slo.model import SLO, Goodput, Objective, is_good
from sloguard.slo.result import BudgetStatus, BurnStatus, SLOStatus
from sloguard.windows.probe import ProbeWindow, judge

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
    objectives = tuple((o.metric, o.threshold) for o in slo.objectives)
    for r in results:
        pw.add(r, is_good(r, slo.goodput), judge(r, objectives)[0])
    return {"": pw}


def _burn(st: SLOStatus, window: float, sli: str, metric: str | None = None) -> BurnStatus:
    return next(b for b in st.burns if b.window == window and b.indicator.sli == sli and b.indicator.metric == metric)


def _budget(st: SLOStatus, sli: str, metric: str | None = None) -> BudgetStatus:
    return next(b for b in st.budgets if b.indicator.sli == sli and b.indicator.metric == metric)


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
    b5 = _burn(st, 300.0, "latency")
    assert (b5.requests, b5.bad) == (100, bad)
    assert b5.burn_rate == pytest.approx(burn)
    # No schedule: 100 requests in the 99 s the data spans, extrapolated over 28 days
    budget = _budget(st, "latency")
    assert budget.coverage == pytest.approx(100 / (28 * 86400))
    assert budget.remaining == pytest.approx(1.0 - burn * 100 / (28 * 86400))


def test_latency_and_availability_are_separate_budgets() -> None:
    """A latency fault without failures spends only the latency budget; failures spend both."""
    slo = SLO("s", "t", goodput=GP, error_objective=0.9, window=3600.0, probe_rate=1.0)
    results = [_r(NOW - i, ttft=5.0) for i in range(8)] + [_r(NOW - 10 - i, ok=False) for i in range(2)]
    st = evaluate(slo, _window(results, slo), NOW)
    avail, lat = _burn(st, 300.0, "availability"), _burn(st, 300.0, "latency")
    assert (avail.bad, avail.error_ratio, avail.burn_rate) == (2, 0.2, pytest.approx(2.0))
    assert (lat.bad, lat.error_ratio, lat.burn_rate) == (10, 1.0, pytest.approx(100.0))
    assert _budget(st, "availability").remaining == pytest.approx(1 - 2 / (0.1 * 3600))
    assert _budget(st, "latency").remaining == pytest.approx(1 - 10 / (0.01 * 3600))
    slow_only = evaluate(slo, _window([_r(NOW - i, ttft=5.0) for i in range(10)], slo), NOW)
    assert _budget(slow_only, "availability").remaining == 1.0 and _burn(slow_only, 300.0, "availability").bad == 0
    assert _burn(slow_only, 300.0, "latency").burn_rate == pytest.approx(100.0)


# The case: a 1-day SLO at 0.99, probes every 0.5 s, 2 minutes of a 62% bad ratio.
def test_budget_over_the_whole_window_not_the_data_seen() -> None:
    slo = SLO("ux", "t", goodput=GP, window=86400.0, probe_rate=2.0)
    results = [_r(NOW - 0.5 * i, ttft=0.9 if i % 50 < 31 else 0.1) for i in range(240)]
    st = evaluate(slo, _window(results, slo), NOW)
    budget = _budget(st, "latency")
    assert (budget.bad, budget.expected, budget.allowed) == (155, 172_800, pytest.approx(1728))
    assert budget.remaining == pytest.approx(1 - 155 / 1728)  # ~91% left, not 1 - 62× = -6100%
    assert budget.covered == pytest.approx(119.5) and budget.coverage == pytest.approx(119.5 / 86400)


def test_objectives_only_budgets_count_misses_and_censored() -> None:
    slo = SLO("s", "t", objectives=(Objective("ttft", 90, 0.5), Objective("e2e", 50, 3.0)), window=3600.0,
              probe_rate=1.0)
    ok = [_r(NOW - i, ttft=0.6 if i < 5 else 0.1) for i in range(90)]  # 5 of 90 over the TTFT threshold
    failed = [ProbeResult(ts=NOW - 100 - i, probe="p", target="t", model="m", api="chat", ok=False,
                          error="timeout", elapsed_s=2.0) for i in range(10)]  # before the first token
    st = evaluate(slo, _window(ok + failed, slo), NOW)
    ttft, e2e = _burn(st, 3600.0, "latency", "ttft"), _burn(st, 3600.0, "latency", "e2e")
    assert (ttft.requests, ttft.bad, ttft.burn_rate) == (100, 15, pytest.approx(1.5))
    assert (e2e.requests, e2e.bad, e2e.burn_rate) == (100, 10, pytest.approx(0.2))
    avail = _burn(st, 3600.0, "availability")  # implicit: failures always reach a budget
    assert avail.indicator.implicit and avail.bad == 10
    o = next(o for o in st.objectives if o.window == 3600.0 and o.metric == "ttft")
    # p90 interpolates between rank 89 (0.6 s) and rank 90, a timed-out request: a lower bound, unbounded above;
    # the lower bound is over 0.5 s already, so it is missed on measured values, not because of the cut-short ones
    assert (o.censored, o.censored_count, o.compliant, o.value, o.upper) == (False, 10, False, pytest.approx(0.74),
                                                                             math.inf)


def test_censored_quantile_judges_the_objective_missed() -> None:
    slo = SLO("s", "t", objectives=(Objective("ttft", 95, 5.0),), window=3600.0)
    ok = [_r(NOW - i, ttft=0.1) for i in range(28)]
    failed = [ProbeResult(ts=NOW - 50 - i, probe="p", target="t", model="m", api="chat", ok=False,
                          error="timeout after 1.9s", elapsed_s=1.9) for i in range(12)]
    o = next(o for o in evaluate(slo, _window(ok + failed, slo), NOW).objectives if o.window == 3600.0)
    # p95 TTFT >= 1.9 s: 12 of 40 timed out before the first token; below the 5 s threshold, yet missed
    assert (o.value, o.censored, o.censored_count, o.count, o.compliant) == (1.9, True, 12, 40, False)


def test_evidence_uses_the_schedule() -> None:
    """1 failure in 10 probes (1 / 30 s) reads as a 10x burn but is not significant evidence."""
    slo = SLO("s", "t", error_objective=0.99, window=86400.0, probe_rate=1 / 30)
    results = [_r(NOW - 30 * i, ok=i != 3) for i in range(10)]
    b = _burn(evaluate(slo, _window(results, slo), NOW), 300.0, "availability")
    assert b.burn_rate == pytest.approx(10.0)
    assert b.min_bad == min_bad(10, 86400, 1 - 0.99) and b.evidence == pytest.approx(1 / b.min_bad) and b.evidence < 1


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
    assert (w5.goodput_ratio, w5.goodput_rate) == (None, None)
    b5 = _burn(st, 300.0, "latency")
    assert (b5.error_ratio, b5.burn_rate, b5.evidence) == (None, None, None)
    assert all(o.value is None and o.compliant is None for o in st.objectives if o.window == 300.0)
    assert all(s.p50 is None for s in st.stages if s.window == 300.0)
    assert next(w for w in st.windows if w.window == 1800.0).requests == 1
    assert evaluate(slo, _window([], slo), NOW).budgets[0].remaining is None


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
    """Server windows returning one fixed histogram per signal; `aborted` requests finished with reason abort."""

    H = Histogram(((0.1, 50.0), (0.5, 90.0), (1.0, 100.0), (math.inf, 100.0)), 100.0, 30.0)

    def __init__(self, aborted: float = 0.0, span: float = 3600.0) -> None:
        self.aborted, self.seconds = aborted, span

    def histogram(self, target: str, model: str | None, signal: str, window: float, now: float) -> Histogram | None:
        return self.H if signal in ("ttft", "queue") else None

    def span(self, target: str, signal: str, window: float, now: float) -> float:
        return min(window, self.seconds)

    def finished(self, target: str, reasons: frozenset[str], window: float, now: float) -> float:
        return self.aborted if "abort" in reasons else 0.0


def test_server_slo_uses_histogram_maths() -> None:
    slo = SLO("s", "t", source="server", objectives=(Objective("ttft", 95, 0.5),),
              goodput=Goodput(target=0.95, ttft=0.5), budgets={"queue": 0.5})
    st = evaluate(slo, None, NOW, FakeServer())
    o = st.objectives[0]
    assert o.value == pytest.approx(0.75) and o.fraction_le == pytest.approx(0.9) and o.compliant is False
    w = st.windows[0]
    assert w.requests == 100 and w.goodput_ratio is None
    b = st.burns[0]
    assert b.error_ratio == pytest.approx(0.1) and b.burn_rate == pytest.approx(2.0)
    assert b.min_bad == pytest.approx(observed_min_bad(100, 0.05))
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


# Server SLOs: each objective is its own latency budget burning miss / (1 − p/100).
# FakeServer.H: 50% of observations ≤ 0.1 s, 90% ≤ 0.5 s, 100% ≤ 1 s (ttft and queue; no e2e data).
@pytest.mark.parametrize(("objectives", "burns"), [
    ((Objective("ttft", 95, 0.5),), {"ttft": 2.0}),
    ((Objective("ttft", 90, 0.5),), {"ttft": 1.0}),
    ((Objective("ttft", 50, 0.1),), {"ttft": 1.0}),
    ((Objective("ttft", 99, 1.0), Objective("queue", 95, 0.5)), {"ttft": 0.0, "queue": 2.0}),
    ((Objective("ttft", 99, 0.5), Objective("queue", 95, 1.0)), {"ttft": 10.0, "queue": 0.0}),
    ((Objective("e2e", 95, 1.0), Objective("queue", 95, 0.5)), {"queue": 2.0}),  # e2e has no data: no burn
    ((Objective("e2e", 95, 1.0),), {}),  # no data at all: no burn, no budget
])
def test_server_slo_burn_rate_per_objective(objectives: tuple[Objective, ...], burns: dict[str, float]) -> None:
    slo = SLO("s", "t", source="server", objectives=objectives, window=86400.0)
    st = evaluate(slo, None, NOW, FakeServer(span=3600.0))
    at_day = {b.indicator.metric: b.burn_rate for b in st.burns if b.window == 86400.0}
    assert at_day == {m: pytest.approx(v) for m, v in burns.items()}
    budgets = {b.indicator.metric: b.remaining for b in st.budgets}  # 1h of data extrapolated to 1d
    assert budgets == {m: pytest.approx(1 - v / 24) for m, v in burns.items()}


def test_server_slo_counts_aborted_requests_as_misses() -> None:
    slo = SLO("s", "t", source="server", objectives=(Objective("ttft", 95, 0.5),), window=86400.0)
    b = evaluate(slo, None, NOW, FakeServer(aborted=25.0)).burns[0]
    assert (b.requests, b.bad) == (125, pytest.approx(10 + 25))
    assert b.burn_rate == pytest.approx(35 / 125 / 0.05)
