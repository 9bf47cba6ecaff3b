"""The 'SLO holds' test: Wilson intervals on shares with an AR(1) effective sample size."""

from __future__ import annotations

import random

import pytest
from helpers import rec

from sloguard.bench.judge import (
    Criterion,
    criteria_for,
    effective_n,
    judge,
    judge_criterion,
    lag1_autocorrelation,
    nearest_rank,
    wilson,
)
from sloguard.slo.model import SLO, Goodput, Objective

P95_TTFT = SLO("lat", "sim", objectives=(Objective("ttft", 95, 0.5), Objective("tpot", 50, 0.05)))
GOODPUT = SLO("gp", "sim", objectives=(Objective("ttft", 99, 9.0),), goodput=Goodput(0.9, ttft=0.5, tpot=0.05),
              error_objective=0.99)


def test_wilson_matches_the_textbook_interval() -> None:
    lo, hi = wilson(0.5, 100, z=1.96)
    assert (round(lo, 3), round(hi, 3)) == (0.404, 0.596)
    lo, hi = wilson(1.0, 20)
    assert hi == 1.0 and lo == pytest.approx(1 / (1 + 1.645**2 / 20))
    assert wilson(0.3, 0) == (0.0, 1.0)


@pytest.mark.parametrize(("xs", "rho"), [
    ([True] * 10, 0.0),  # constant: no information about correlation
    ([True, False] * 20, -0.975),  # alternating: negative
    ([True] * 20 + [False] * 20, 0.925),  # two long runs: strongly positive
])
def test_lag1_autocorrelation(xs: list[bool], rho: float) -> None:
    assert lag1_autocorrelation(xs) == pytest.approx(rho, abs=1e-3)


@pytest.mark.parametrize(("rho", "n_eff"), [(0.0, 100.0), (0.5, 100 / 3), (-0.5, 100.0), (0.99, 100 * 0.2 / 1.8)])
def test_effective_n_clamps_rho(rho: float, n_eff: float) -> None:
    assert effective_n(100, rho) == pytest.approx(n_eff)


def test_criteria_come_from_goodput_or_else_objectives_plus_error_rate() -> None:
    names = [(c.slo, c.kind, c.name, c.target) for c in criteria_for([P95_TTFT, GOODPUT])]
    assert names == [("lat", "objective", "p95 ttft <= 500ms", 0.95), ("lat", "objective", "p50 tpot <= 50ms", 0.5),
                     ("gp", "goodput", "goodput >= 0.9", 0.9), ("gp", "success", "success >= 0.99", 0.99)]
    assert criteria_for([SLO("srv", "sim", source="server", objectives=(Objective("ttft", 95, 1.0),))]) == []


def _ttft(values: list[float], failed: int = 0) -> list:  # type: ignore[type-arg]
    """Records with these TTFTs in send order, plus `failed` failures spread evenly among them."""
    out = [rec(i, ttft=v) for i, v in enumerate(values)]
    step = max(1, len(values) // max(failed, 1))
    for k in range(failed):
        out.insert(k * (step + 1), rec(len(values) + k, ok=False, scheduled=k * (step + 1) - 0.5))
    return out


P95 = criteria_for([SLO("lat", "sim", objectives=(Objective("ttft", 95, 0.5),))])


@pytest.mark.parametrize(("records", "verdict", "holds"), [
    (_ttft([0.1] * 100), "holds", True),  # 100 of 100 under: confidently above 95%
    (_ttft([0.1] * 20), "uncertain", True),  # too few to be sure, though all under
    (_ttft([0.1] * 80 + [0.9] * 20), "breaks", False),  # 80% under a p95 objective
    (_ttft([0.1] * 95 + [0.9] * 5), "uncertain", True),  # exactly at the target: undecided, leans holds
    (_ttft([0.1] * 100, failed=10), "breaks", False),  # failures are misses of a latency objective
])
def test_stage_verdicts(records: list, verdict: str, holds: bool) -> None:  # type: ignore[type-arg]
    j = judge(P95, records)
    assert (j.verdict, j.holds) == (verdict, holds)


def test_hopeless_stage_breaks_whatever_its_latencies() -> None:
    j = judge(P95, _ttft([0.1] * 40, failed=60))
    assert j.hopeless and j.verdict == "breaks" and not j.holds and j.error_ratio == 0.6 and j.margin <= -1


def test_shown_percentile_agrees_with_the_verdict() -> None:
    """The nearest-rank value is ≤ the threshold exactly when the share under it reaches the percentile."""
    rng = random.Random(3)
    for _ in range(200):
        values = [rng.uniform(0.0, 1.0) for _ in range(rng.randint(5, 60))]
        res = judge_criterion(P95[0], _ttft(values))
        assert res.value is not None and res.share is not None
        assert (res.value <= 0.5) == (res.share >= 0.95)
    assert nearest_rank([3.0, 1.0, 2.0], 0.5) == 2.0 and nearest_rank([], 0.5) is None


def test_undefined_tpot_is_not_judged_but_a_failure_is_a_miss() -> None:
    tpot = Criterion("lat", "p50 tpot", "objective", 0.5, criteria_for([P95_TTFT])[1].hit, "tpot", 0.5, 0.05)
    records = [rec(0, tpot=None), rec(1, tpot=0.01), rec(2, ok=False)]
    res = judge_criterion(tpot, records)
    assert (res.n, res.hits) == (2, 1)


def test_autocorrelated_misses_widen_the_interval() -> None:
    """The same share in one long run of misses is less evidence than the same misses spread out."""
    spread = [rec(i, ttft=0.9 if i % 10 == 0 else 0.1) for i in range(200)]
    bunched = [rec(i, ttft=0.9 if i < 20 else 0.1) for i in range(200)]
    a, b = judge_criterion(P95[0], spread), judge_criterion(P95[0], bunched)
    assert a.share == b.share == 0.9
    assert b.n_eff < a.n_eff / 5 and (b.high or 0) - (b.low or 0) > (a.high or 0) - (a.low or 0)


@pytest.mark.parametrize("correlated", [False, True])
def test_false_breaks_are_rare_when_the_slo_holds_exactly(correlated: bool) -> None:
    """300 seeded stages of 200 requests whose true share under the threshold is exactly 95%."""
    false_breaks = 0
    for seed in range(300):
        rng = random.Random(seed)
        hits, prev = [], True
        for _ in range(200):
            # a sticky chain (stationary share 0.95, lag-1 correlation 0.5) or independent draws
            p = (0.975 if prev else 0.475) if correlated else 0.95
            prev = rng.random() < p
            hits.append(prev)
        res = judge_criterion(P95[0], [rec(i, ttft=0.1 if h else 0.9) for i, h in enumerate(hits)])
        false_breaks += res.verdict == "breaks"
    assert false_breaks / 300 <= 0.08


def test_a_segmented_slo_is_judged_per_prompt_bucket_too() -> None:
    """Short prompts are fast, long ones slow: overall 80% under the threshold breaks; per bucket, the
    short bucket holds and the long one breaks, as the daemon's per-segment windows would say."""
    slo = SLO("lat", "sim", objectives=(Objective("ttft", 95, 0.5),), segment_by="prompt_bucket")
    records = [rec(i, ttft=0.1, prompt_bucket="short") for i in range(400)]
    records += [rec(400 + i, ttft=0.9 if i % 2 else 0.2, prompt_bucket="long") for i in range(200)]
    j = judge(criteria_for([slo]), records)
    by_name = {r.criterion.name: r for r in j.results}
    assert set(by_name) == {"p95 ttft <= 500ms", "p95 ttft <= 500ms [long]", "p95 ttft <= 500ms [short]"}
    assert by_name["p95 ttft <= 500ms [short]"].verdict == "holds" and by_name["p95 ttft <= 500ms [short]"].n == 400
    assert by_name["p95 ttft <= 500ms [long]"].verdict == "breaks" and by_name["p95 ttft <= 500ms [long]"].value == 0.9
    assert j.verdict == "breaks" and j.worst == "p95 ttft <= 500ms [long]"
