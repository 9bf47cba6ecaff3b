"""Per-stage summary maths, error kinds, and the terminal table."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import rec

from sloguard import histogram
from sloguard.bench.summary import error_kind, quantiles, summarise
from sloguard.bench.table import table, verdict
from sloguard.model import Histogram
from sloguard.probes.timing import ITL_BUCKETS
from sloguard.slo.model import SLO, Goodput

GP = SLO("gp", "sim", goodput=Goodput(0.9, ttft=0.2))


def test_quantiles_are_numpy_linear() -> None:
    values = [0.3, 0.1, 0.2, 0.5, 0.4]
    q = quantiles(values)
    assert q["n"] == 5 and q["mean"] == pytest.approx(0.3)
    assert [q["p50"], q["p95"], q["p99"]] == pytest.approx(list(np.percentile(values, [50, 95, 99])))
    assert quantiles([]) == {"n": 0, "mean": None, "p50": None, "p95": None, "p99": None}


@pytest.mark.parametrize(("error", "kind"), [
    (None, "none"), ("timeout after 20s", "timeout"), ("http 503: busy", "http_503"),
    ("error event: overloaded", "error_event"), ("truncated stream: ended before its terminator", "truncated"),
    ("ClientConnectorError: Cannot connect to host", "connect"), ("ServerDisconnectedError: x", "disconnected"),
    ("no tokens in stream", "no_tokens"), ("something odd happened", "something"),
])
def test_error_kinds(error: str | None, kind: str) -> None:
    assert error_kind(error) == kind


def test_stage_figures() -> None:
    """Four requests over a 4 s span: three succeed (one not good), one fails with HTTP 503."""
    records = [
        rec(0, ttft=0.1, e2e=1.0, output_tokens=10, sent=0.0, ended=1.0),
        rec(1, ttft=0.3, e2e=1.0, output_tokens=20, sent=1.0, ended=2.0, itl_max_s=2.5),
        rec(2, ttft=0.1, e2e=1.0, output_tokens=30, sent=3.0, ended=4.0),
        rec(3, ok=False, sent=2.0, ended=2.1),
    ]
    s = summarise(records, [GP], stall_s=2.0)
    assert (s["requests"], s["ok"], s["failed"], s["errors"]) == (4, 3, 1, {"http_503": 1})
    assert s["span_s"] == 4.0 and s["rps"] == pytest.approx(3 / 4) and s["output_tok_s"] == pytest.approx(60 / 4)
    assert s["error_ratio"] == 0.25 and s["stalls"] == 1 and s["timeouts"] == 0
    assert s["latency"]["ttft"]["n"] == 3 and s["latency"]["ttft"]["p50"] == pytest.approx(0.1)
    assert s["goodput"]["gp"] == {"good": 2, "ratio": 0.5, "rate": 0.5, "target": 0.9}
    assert s["itl_basis"] == "request_p50"


def test_scheduled_latencies_and_lag() -> None:
    r = rec(0, ttft=0.1, e2e=0.5, scheduled=1.0, sent=1.25)
    s = summarise([r], [], stall_s=2.0)
    assert s["send_lag"]["p50"] == pytest.approx(0.25)
    assert s["latency"]["ttft_sched"]["p50"] == pytest.approx(0.35)
    assert s["latency"]["e2e_sched"]["p50"] == pytest.approx(0.75)


def test_itl_over_every_gap_from_the_requests_bucket_counts() -> None:
    """Three gaps of request 0 and one of request 1, counted in ITL_BUCKETS: summed, then quantiles as
    Prometheus reads a histogram; the mean is exact."""
    def counts(*gaps: float) -> tuple[int, ...]:
        out = [0] * (len(ITL_BUCKETS) + 1)
        for g in gaps:
            out[next((i for i, b in enumerate(ITL_BUCKETS) if g <= b), len(ITL_BUCKETS))] += 1
        return tuple(out)
    records = [rec(0, itl_counts=counts(0.009, 0.02, 0.03), itl_sum_s=0.059), rec(1, itl_counts=counts(0.04),
                                                                                     itl_sum_s=0.04)]
    s = summarise(records, [], stall_s=2.0)
    itl = s["latency"]["itl"]
    assert s["itl_basis"] == "buckets" and itl["n"] == 4 and itl["mean"] == pytest.approx(0.099 / 4)
    h = Histogram(tuple(zip((*ITL_BUCKETS, math.inf), itertools.accumulate(
        float(a + b) for a, b in zip(counts(0.009, 0.02, 0.03), counts(0.04), strict=True)), strict=True)), 4.0, 0.099)
    assert itl["p50"] == histogram.quantile(0.5, h) and 0.015 <= itl["p50"] <= 0.025
    assert itl["p99"] == histogram.quantile(0.99, h) and 0.03 < itl["p99"] <= 0.04


def test_only_normal_requests_give_latency_figures() -> None:
    records = [rec(0, ttft=0.1), rec(1, ttft=9.0, behaviour="slow_reader")]
    s = summarise(records, [], stall_s=2.0)
    assert s["latency"]["ttft"]["n"] == 1 and s["behaviours"] == {"normal": 1, "slow_reader": 1}


def test_empty_stage() -> None:
    s = summarise([], [GP], stall_s=2.0)
    assert s["requests"] == 0 and s["rps"] is None and s["error_ratio"] is None
    assert s["goodput"]["gp"]["ratio"] is None


def _stage(stage: int, load: float, verdict_: str, status: str = "complete") -> dict:  # type: ignore[type-arg]
    s = summarise([rec(0), rec(1, ok=False)], [GP], stall_s=2.0)
    return {"stage": stage, "attempt": 0, "load_kind": "rate", "load": load, "status": status, **s,
            "slo": {"verdict": verdict_, "criteria": [{}]}}


def test_table_has_a_row_per_stage() -> None:
    text = table([_stage(0, 2.0, "holds"), _stage(1, 4.0, "breaks", "hopeless")])
    lines = text.splitlines()
    assert lines[0].startswith("STAGE") and len(lines) == 3
    assert "2/s" in lines[1] and "1 (50%)" in lines[1] and "holds" in lines[1]
    assert lines[2].rstrip().endswith("breaks (hopeless)")


@pytest.mark.parametrize(("row", "text"), [
    ({"kind": "rate", "max_load": 7.0, "estimate": 7.4, "low": 6.9, "high": 7.8, "first_break": 8.0,
      "breaks_first": "p95 ttft <= 500ms"},
     "max rate at SLO: 7.4 req/s [6.9, 7.8]; beyond it p95 ttft <= 500ms breaks first"),
    ({"kind": "concurrency", "max_load": 8.0, "estimate": 8.4, "low": 8.0, "high": None, "first_break": 9.0,
      "breaks_first": "goodput >= 0.99"},
     "max concurrency at SLO: 8 [8, ?]; beyond it goodput >= 0.99 breaks first"),
    ({"kind": "rate", "max_load": 20.0, "estimate": 20.0, "low": 20.0, "high": None, "first_break": None,
      "breaks_first": ""}, "max rate at SLO: 20 req/s [20, ?] (the SLO held at every load tried, up to 20 req/s)"),
    ({"kind": "concurrency", "max_load": None, "estimate": None, "low": None, "high": 1.0, "first_break": 1.0,
      "breaks_first": "p95 ttft <= 500ms"},
     "max concurrency at SLO: none: the SLO broke at the lowest load tried (c=1; p95 ttft <= 500ms breaks first)"),
])
def test_verdict_line(row: dict, text: str) -> None:  # type: ignore[type-arg]
    assert verdict(row) == text


def test_timed_stage_rates_count_completions_inside_the_window() -> None:
    """Window [2, 6): a warm-up request ending at 2.5 counts, one ending after 6 does not (it is still
    measured for latency); the rate is per second of the window."""
    warm = rec(0, sent=1.0, ended=2.5, warmup=True, output_tokens=10)
    inside = rec(1, sent=2.0, ended=4.0, output_tokens=20)
    late = rec(2, sent=5.0, ended=7.0, output_tokens=30)
    s = summarise([inside, late], [GP], stall_s=2.0, everything=[warm, inside, late], window=(2.0, 6.0))
    assert s["rate_basis"] == "window" and s["span_s"] == 4.0
    assert s["rps"] == pytest.approx(2 / 4) and s["output_tok_s"] == pytest.approx(30 / 4)
    assert s["requests"] == 2 and s["latency"]["e2e"]["n"] == 2
