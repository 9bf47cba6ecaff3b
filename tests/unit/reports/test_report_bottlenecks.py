"""The bottlenecks section: grown stages from the stage cells, candidate causes and levers from the
diagnosis RULES, the daemon's verdicts; and the bench reader's workload comparison (digest, fields)."""

from __future__ import annotations

from typing import Any

import pytest

from sloguard.diagnose.rules import RULES
from sloguard.reports.bench import bench_differences, workload_of
from sloguard.reports.bottlenecks import TTFT_STAGE, bottlenecks
from sloguard.reports.cells import Cell


def stage(name: str, base: float, cand: float, lo: float, hi: float, stat: str = "p50") -> Cell:
    return Cell(f"stage:{name}", stat, "overall", "stage", base, cand, 500, 500, scale="absolute",
                delta=cand - base, ci=(lo, hi), family=False)


def ttft(base: float, cand: float, lo: float, hi: float) -> Cell:
    return Cell("ttft", "p95", "overall", "latency", base, cand, 500, 500, delta=cand / base - 1, ci=(lo, hi))


@pytest.mark.parametrize(("cells", "grown"), [
    ([stage("queue", 0.010, 0.030, 0.015, 0.025), stage("decode", 0.5, 0.6, 0.08, 0.12)], ["decode", "queue"]),
    ([stage("queue", 0.010, 0.0104, 0.0001, 0.0007)], []),  # significant but within 5 %
    ([stage("prefill", 0.050, 0.060, -0.001, 0.021)], []),  # the interval holds no change
    ([stage("connect", 0.001, 0.003, 0.001, 0.003)], ["connect"]),
    ([stage("decode", 0.5, 0.5, -0.01, 0.01), ttft(0.1, 0.2, 0.8, 1.2)], [TTFT_STAGE]),  # no queue/prefill split
    ([stage("queue", 0.01, 0.01, -0.001, 0.001), ttft(0.1, 0.2, 0.8, 1.2)], []),  # split: TTFT is not a stage
])
def test_grown_stages(cells: list[Cell], grown: list[str]) -> None:
    doc = bottlenecks(cells)
    assert doc["available"] and [g["stage"] for g in doc["stages"]] == grown


def test_each_grown_stage_lists_the_rules_that_explain_it_in_precedence_order() -> None:
    doc = bottlenecks([stage("queue", 0.010, 0.030, 0.015, 0.025)])
    (g,) = doc["stages"]
    # each cause once, in the order of its first row (capacity has two rows: its signals are their union)
    assert [c["cause"] for c in g["causes"]] == list(dict.fromkeys(r.cause for r in RULES if "queue" in r.stages))
    capacity = next(c for c in g["causes"] if c["cause"] == "capacity")
    assert {"requests_waiting", "request_rate", "requests_running"} <= set(capacity["signals"])
    assert all(c["lever"] for c in g["causes"])
    (item,) = doc["items"]
    assert item.startswith("queue grew +20.0 ms [+15.0, +25.0 ms] (+200.0 %) at p50") and "capacity (lever:" in item
    network = bottlenecks([stage("connect", 0.001, 0.003, 0.001, 0.003)])["stages"][0]["causes"]
    assert [c["cause"] for c in network] == list(dict.fromkeys(r.cause for r in RULES if "network" in r.stages))


def test_the_daemons_verdicts_name_the_cause() -> None:
    verdicts: list[dict[str, Any]] = [
        {"slo": "chat", "cause": "kv_cache_pressure", "summary": "p95 ttft 2 s > 1 s: queue", "lever": "raise KV"},
        {"slo": "batch", "cause": "none", "summary": ""}]
    doc = bottlenecks([], verdicts)
    assert doc["available"] and doc["items"] == [
        "the daemon's diagnosis for SLO chat: p95 ttft 2 s > 1 s: queue; lever: raise KV"]


def test_no_stages_and_no_verdicts_is_not_available() -> None:
    doc = bottlenecks([ttft(0.1, 0.2, 0.8, 1.2)])
    assert not doc["available"] and "no per-request stage times" in doc["reason"]


HEAD = {"workload_digest": "d1", "workload": {"seed": 0, "max_tokens": 16, "prompts": [[64, 50.0]]},
        "load": {"mode": "sweep", "kind": "concurrency", "levels": [1.0], "warmup_requests": 5}}


@pytest.mark.parametrize(("edit", "refused", "warned"), [
    ({}, [], []),
    ({"load": {**HEAD["load"], "levels": [1.0, 4.0]}}, [], ["load.levels: baseline [1.0], candidate [1.0, 4.0]"]),
    ({"workload": {**HEAD["workload"], "seed": 3}}, ["workload.seed: baseline 0, candidate 3"], []),
    ({"workload": {**HEAD["workload"], "prompts": [[256, 1]]}},
     ["workload.prompts: baseline {64: 50}, candidate {256: 1}"], []),
    ({"load": {**HEAD["load"], "warmup_requests": 0}}, ["load.warmup_requests: baseline 5, candidate 0"], []),
    ({"workload_digest": "d2"}, ["workload_digest: baseline d1, candidate d2 (the headers were edited?)"], []),
])
def test_bench_workloads_compare_by_digest_and_name_the_fields(edit: dict[str, Any], refused: list[str],
                                                               warned: list[str]) -> None:
    cand = {**HEAD, "workload_digest": "d2" if edit else "d1", **edit}
    assert bench_differences(workload_of(HEAD), workload_of(cand)) == (refused, warned)
