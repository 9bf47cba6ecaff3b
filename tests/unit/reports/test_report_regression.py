"""Baseline vs candidate on data whose truth is known: a known shift, a different prompt mix, timeouts."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from sloguard.reports.cells import overall
from sloguard.reports.data import Side, build_requests
from sloguard.reports.regression import Settings, compare, good_flags


def side(role: str, ttft: np.ndarray, buckets: list[str] | None = None, failed: int = 0, seed: int = 0) -> Side:
    """A side whose TTFT is given and whose other latencies follow it; `failed` requests time out first."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for i, t in enumerate(ttft):
        tpot = 0.02 * rng.lognormal(0, 0.1)
        rows.append({"ttft_s": float(t), "ttfot_s": float(t), "tpot_s": tpot, "itl_s": tpot,
                     "e2e_s": float(t) + 63 * tpot, "ok": True, "outcome": "success", "ts": float(i),
                     "prompt_bucket": buckets[i] if buckets else "short"})
    for _ in range(failed):  # spread over the run, not one burst
        rows.append({"ok": False, "outcome": "timeout", "ts": rng.uniform(0, len(ttft)), "elapsed_s": 2.0,
                     "prompt_bucket": "short"})
    rows.sort(key=lambda r: r["ts"])
    return Side(role=role, kind="bench", spec=role, requests=build_requests(rows, role),
                slos=[{"name": "s", "goodput": {"target": 0.9, "ttft": 0.2}}])


def cell(cells: list[Any], metric: str, stat: str, scope: str = "overall") -> Any:
    return next(c for c in cells if c.metric == metric and c.stat == stat and c.scope == scope)


def lognormal(n: int, seed: int, scale: float = 1.0) -> np.ndarray:
    return scale * 0.1 * np.random.default_rng(seed).lognormal(0, 0.3, n)


def test_a_known_20_percent_shift_is_a_regression() -> None:
    cells = compare(side("baseline", lognormal(2000, 1)), side("candidate", lognormal(2000, 2, 1.2)), Settings())
    for stat in ("p50", "p95"):
        c = cell(cells, "ttft", stat)
        assert c.verdict == "regression" and 0.1 < c.delta < 0.3, c
    assert overall(cells) == "regression"


def test_the_95_percent_interval_covers_the_true_change() -> None:
    covered = 0
    for k in range(40):
        c = cell(compare(side("baseline", lognormal(400, 2 * k)), side("candidate", lognormal(400, 2 * k + 1, 1.2)),
                         Settings(reps=400, seed=k)), "ttft", "p50")
        covered += c.ci[0] < 0.2 < c.ci[1]
    assert covered >= 34  # 95 % nominal: fewer than 34 of 40 has a probability below 1 %


def test_two_samples_of_one_distribution_change_nothing() -> None:
    cells = compare(side("baseline", lognormal(2000, 1)), side("candidate", lognormal(2000, 2)), Settings())
    assert overall(cells) == "no significant change"
    assert cell(cells, "ttft", "p50").verdict == "no significant change"


def test_a_different_prompt_mix_alone_is_not_read_as_a_change() -> None:
    # same per-bucket latencies, but the candidate drew three times as many slow long prompts
    rng = np.random.default_rng(5)

    def draw(n_short: int, n_long: int) -> tuple[np.ndarray, list[str]]:
        t = np.concatenate([0.05 * rng.lognormal(0, 0.2, n_short), 0.5 * rng.lognormal(0, 0.2, n_long)])
        order = rng.permutation(len(t))
        labels = ["short"] * n_short + ["long"] * n_long
        return t[order], [labels[i] for i in order]

    tb, bb = draw(1800, 200)
    tc, bc = draw(1400, 600)
    cells = compare(side("baseline", tb, bb), side("candidate", tc, bc), Settings())
    assert cell(cells, "ttft", "p50").verdict == "no significant change"
    assert overall(cells) != "regression"


def test_timeouts_are_never_dropped_from_a_latency_comparison() -> None:
    # the candidate's measured TTFTs are as fast, but 10 % of its requests time out before the first token
    cells = compare(side("baseline", lognormal(900, 1)), side("candidate", lognormal(900, 2), failed=100), Settings())
    p95 = cell(cells, "ttft", "p95")
    assert math.isinf(p95.cand) and p95.cand_bound == 2.0 and p95.verdict == "regression"
    assert cell(cells, "error_rate", "share").verdict == "regression"
    assert cell(cells, "ttft", "p50").delta > 0  # the timed-out tenth moves even the median up


def test_too_few_values_for_a_tail_quantile_is_not_enough_data() -> None:
    cells = compare(side("baseline", lognormal(150, 1)), side("candidate", lognormal(150, 2, 2.0)), Settings())
    p99 = cell(cells, "ttft", "p99")
    assert p99.verdict == "not enough data" and "needs ≥ 500" in p99.reason
    assert cell(cells, "ttft", "p50").verdict == "regression"


def test_goodput_follows_the_slo_rule() -> None:
    s = side("baseline", np.array([0.1, 0.3, 0.1]), failed=1)
    assert s.requests is not None
    flags = good_flags(s.requests, {"goodput": {"ttft": 0.2}})
    assert flags is not None and flags.tolist() == (s.requests.latency["ttft"] <= 0.2).tolist()
    assert flags.sum() == 2 and not flags[~s.requests.ok].any()  # a failed request is never good
    assert good_flags(s.requests, {"goodput": None}) is None


@pytest.mark.parametrize("seed", [0, 1])
def test_a_report_is_reproducible(seed: int) -> None:
    b, c = side("baseline", lognormal(500, 1)), side("candidate", lognormal(500, 2, 1.05))
    first = [(x.delta, x.ci, x.p) for x in compare(b, c, Settings(seed=seed))]
    assert first == [(x.delta, x.ci, x.p) for x in compare(b, c, Settings(seed=seed))]
