"""Prometheus inputs at bucket resolution: interpolation, the resolution bound, verdicts from counts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sloguard.probes.metrics import LATENCY_BUCKETS
from sloguard.reports import prom
from sloguard.reports.cells import overall
from sloguard.reports.data import DataError, Histograms, Side
from sloguard.reports.histstats import compare_histograms, interpolate
from sloguard.reports.prom import parse
from sloguard.reports.regression import Settings

BOUNDS = np.array([*LATENCY_BUCKETS, math.inf])


def counts(values: np.ndarray) -> np.ndarray:
    """Non-cumulative counts per bucket (le inclusive), as the probe histogram observes them."""
    return np.bincount(np.searchsorted(BOUNDS, values, side="left"), minlength=len(BOUNDS)).astype(float)


def side(role: str, values: np.ndarray, failed: int = 0) -> Side:
    c = counts(values)
    hist = Histograms({"ttft": BOUNDS}, {"ttft": {"short": c}}, {"success": float(len(values)), "timeout": failed},
                      {"s": (float(len(values)), float(len(values) + failed))})
    return Side(role=role, kind="prom", spec=role, histograms=hist)


def test_interpolation_is_histogram_quantile() -> None:
    # 10 requests ≤ 0.1, 10 in (0.1, 0.15]: the median is 0.1, p75 half-way into (0.1, 0.15]
    cum = np.cumsum(counts(np.array([0.09] * 10 + [0.12] * 10))) / 20
    assert float(interpolate(BOUNDS, cum, 0.5)) == pytest.approx(0.1)
    assert float(interpolate(BOUNDS, cum, 0.75)) == pytest.approx(0.125)
    assert math.isinf(float(interpolate(BOUNDS, np.cumsum(counts(np.array([100.0]))), 0.5)))  # +Inf bucket


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_resolution_bound_holds_the_true_change(seed: int) -> None:
    rng = np.random.default_rng(seed)
    base, cand = 0.08 * rng.lognormal(0, 0.4, 3000), 0.12 * rng.lognormal(0, 0.4, 3000)
    cells = compare_histograms(side("baseline", base), side("candidate", cand), Settings())
    for c in cells:
        if c.metric == "ttft" and c.resolution is not None:
            q = int(c.stat[1:]) / 100
            true = np.quantile(cand, q, method="inverted_cdf") / np.quantile(base, q, method="inverted_cdf") - 1
            assert c.resolution[0] <= true <= c.resolution[1], c
            assert c.verdict == "regression"


def test_same_distribution_at_bucket_resolution_is_no_change() -> None:
    rng = np.random.default_rng(9)
    cells = compare_histograms(side("baseline", 0.1 * rng.lognormal(0, 0.4, 3000)),
                               side("candidate", 0.1 * rng.lognormal(0, 0.4, 3000)), Settings())
    assert overall(cells) in ("no significant change", "not enough data")


def test_failures_and_goodput_come_from_the_counters() -> None:
    rng = np.random.default_rng(4)
    v = 0.1 * rng.lognormal(0, 0.3, 2000)
    cells = compare_histograms(side("baseline", v), side("candidate", v, failed=200), Settings())
    err = next(c for c in cells if c.metric == "error_rate")
    good = next(c for c in cells if c.metric == "goodput:s")
    assert err.verdict == "regression" and err.cand == pytest.approx(200 / 2200)
    assert good.verdict == "regression"


def test_different_buckets_are_refused() -> None:
    other = side("candidate", np.array([0.1] * 100))
    assert other.histograms is not None
    other.histograms = Histograms({"ttft": BOUNDS[1:]}, {"ttft": {"short": np.ones(len(BOUNDS) - 1)}},
                                  other.histograms.outcomes)
    with pytest.raises(DataError, match="different buckets"):
        compare_histograms(side("baseline", np.array([0.1] * 100)), other, Settings())


@pytest.mark.parametrize(("spec", "want"), [
    ('prom:http://p:9090{job="a",instance=~"x.*"}@100..200', ("http://p:9090", '{job="a",instance=~"x.*"}', 100, 200)),
    ("prom:http://p:9090/@2026-11-24T10:00:00Z..2026-11-24T11:00:00Z",
     ("http://p:9090", "{}", 1795514400.0, 1795518000.0)),
])
def test_prom_specs(spec: str, want: tuple[str, str, float, float]) -> None:
    assert parse(spec) == want


@pytest.mark.parametrize("spec", ["prom:p:9090@1..2", "prom:http://p{a=\"b\"}", "prom:http://p@2..1"])
def test_bad_prom_specs(spec: str) -> None:
    with pytest.raises(DataError):
        parse(spec)


def _info(release: str, times: list[float]) -> dict[str, object]:
    metric = {"__name__": "sloguard_release_info", "target": "sim", "engine": "vllm", "engine_version": "0.11",
              "model": "m", "label_release": release, "instance": "h:1"}
    return {"metric": metric, "values": [[t, "1"] for t in times]}


@pytest.mark.parametrize(("rows", "want"), [
    ([], {}),  # no identity exported in the range
    ([_info("A", [100.0, 101.0])], {"release": "A"}),
    # a failed scrape at the range's end (a staleness marker) does not hide it: the range's samples still hold it
    ([_info("A", [100.0, 150.0]), _info("B", [151.0, 160.0])], {"release": "B"}),  # changed in the range: the last
    ([_info("B", [151.0, 160.0]), _info("A", [100.0, 150.0])], {"release": "B"}),
])
def test_the_identity_is_the_newest_release_seen_in_the_range(monkeypatch: pytest.MonkeyPatch,
                                                               rows: list[dict[str, object]],
                                                               want: dict[str, str]) -> None:
    asked: list[tuple[str, float]] = []

    def query(url: str, promql: str, at: float) -> list[dict[str, object]]:
        asked.append((promql, at))
        return rows
    monkeypatch.setattr(prom, "query", query)
    got = prom.identity("http://p:9090", '{instance="h:1"}', "60s", 160.0)
    assert asked == [('sloguard_release_info{instance="h:1"}[60s]', 160.0)] and got["labels"] == want
    assert got.get("engine_version") == ("0.11" if want else None)
