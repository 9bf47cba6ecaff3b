"""The engine: routing, restart keeps the error budget, reload keeps windows, exposition passes promtool."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from support.exposition import unknown_in_text

from sloguard.clock import FakeClock
from sloguard.model import ProbeResult
from sloguard.slo import cli
from sloguard.slo.engine import SLOEngine
from sloguard.slo.model import SLO, Goodput, Objective
from sloguard.store import Store

NOW = 2_000_000.0
SLOS = (
    SLO("a", "t", objectives=(Objective("ttft", 95, 0.5),), goodput=Goodput(0.9, ttft=0.5),
        budgets={"ttft": 0.4}, segment_by="prompt_bucket"),
    SLO("b", "t", probe="other", error_objective=0.99),
    SLO("c", "u"),
)


def _results(n: int = 200) -> list[ProbeResult]:
    return [ProbeResult(ts=NOW - 10 * i, probe="p", target="t", model="m", api="chat", ok=i % 20 != 0,
                        ttft_s=0.3 if i % 4 else 0.8, e2e_s=1.0, connect_s=0.01,
                        prompt_bucket="short" if i % 2 else "long") for i in range(n)]


def test_routing_and_counters() -> None:
    engine = SLOEngine(SLOS, FakeClock(NOW))
    engine.add_probe_results(_results())
    assert sorted(engine.windows("a")) == ["", "long", "short"]
    assert engine.windows("b")[""].view(1e9, NOW).total == 0  # probe filter
    assert engine.windows("c")[""].view(1e9, NOW).total == 0  # target filter
    text = _render(engine.families(engine.evaluate(NOW)))
    assert 'sloguard_slo_requests_total{good="false",sli="latency",slo="a"} 50.0' in text
    assert 'sloguard_slo_requests_total{good="true",sli="latency",slo="a"} 150.0' in text
    assert 'slo="b"} 0.0' in text and 'sloguard_slo_requests_total{good="false",sli="availability",slo="c"}' in text


@pytest.mark.parametrize(("slos", "series"), [
    (SLOS, {("a", "false"), ("a", "true"), ("b", "false"), ("b", "true"), ("c", "false"), ("c", "true")}),
    ((SLO("srv", "t", source="server", objectives=(Objective("ttft", 95, 0.5),)),), set()),
])
def test_requests_total_exist_at_zero_from_start(slos: tuple[SLO, ...], series: set[tuple[str, str]]) -> None:
    engine = SLOEngine(slos, FakeClock(NOW))
    (fam,) = [f for f in engine.families(engine.evaluate(NOW)) if f.name == "sloguard_slo_requests"]
    assert {(s.labels["slo"], s.labels["good"]) for s in fam.samples} == series
    assert all(s.value == 0 for s in fam.samples)
    engine.reconfigure((*slos, SLO("new", "t")))  # an SLO added on reload starts at 0 too
    (fam,) = [f for f in engine.families(engine.evaluate(NOW)) if f.name == "sloguard_slo_requests"]
    assert {(s.labels["slo"], s.labels["good"]) for s in fam.samples} == series | {("new", "false"), ("new", "true")}


def test_restart_keeps_error_budget() -> None:
    clock = FakeClock(NOW)
    before = SLOEngine(SLOS, clock)
    before.add_probe_results(_results())
    after = SLOEngine(SLOS, clock)
    after.rebuild(reversed(_results()))
    budgets = [(s.budgets, s.burns, s.windows) for s in before.evaluate(NOW)]
    assert budgets == [(s.budgets, s.burns, s.windows) for s in after.evaluate(NOW)]
    (a,) = budgets[0][0]  # no schedule: 200 requests over the 1990 s the data spans, extrapolated to 28d
    assert a.coverage == pytest.approx(1990 / A.window)
    assert a.remaining == pytest.approx(1 - 50 / (0.1 * 200 * A.window / 1990))


def test_rebuild_streams_without_materialising() -> None:
    class Stop(Exception):
        pass

    def interrupted() -> Iterator[ProbeResult]:
        yield from reversed(_results()[:50])  # oldest first, as the store's ORDER BY ts gives them
        raise Stop

    engine = SLOEngine(SLOS, FakeClock(NOW))
    with pytest.raises(Stop):
        engine.rebuild(interrupted())
    assert engine.windows("a")[""].view(1e9, NOW).total == 50  # consumed one by one, not list()ed first


def test_restart_from_store_keeps_error_budget(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", FakeClock(NOW))
    store.add_probe_results(_results())
    before = SLOEngine(SLOS, FakeClock(NOW))
    before.add_probe_results(_results())
    after = SLOEngine(SLOS, FakeClock(NOW))
    after.rebuild(store.iter_probe_results(NOW - max(s.window for s in SLOS), batch=7))
    assert [(s.budgets, s.burns, s.windows) for s in before.evaluate(NOW)] == [
        (s.budgets, s.burns, s.windows) for s in after.evaluate(NOW)]
    store.close()


def test_reconfigure_keeps_windows_of_same_definition() -> None:
    engine = SLOEngine(SLOS, FakeClock(NOW))
    engine.add_probe_results(_results())
    engine.reconfigure((SLOS[0], SLO("b", "u")))
    assert engine.windows("a")[""].view(1e9, NOW).total == 200
    assert engine.windows("b")[""].view(1e9, NOW).total == 0


GOODPUT = SLO("g", "t", goodput=Goodput(0.9, ttft=0.5))


def _good_every_10s(start: float, end: float) -> list[ProbeResult]:
    return [ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=True, ttft_s=0.1, e2e_s=1.0)
            for ts in range(int(start) + 10, int(end) + 1, 10)]


# (seconds since the engine started, window, rebuilt from the store?, expected good/s): one good request per 10 s
@pytest.mark.parametrize(("elapsed", "window", "rebuilt", "rate"), [
    (600, 3600.0, False, 60 / 600),  # not yet full: divided by the 600 s covered, not 3600 s
    (600, 28 * 86400.0, False, 60 / 600),
    (600, 300.0, False, 30 / 300),  # full
    (7200, 3600.0, False, 360 / 3600),  # full
    (600, 3600.0, True, 60 / 590),  # restart at NOW: covered back to the oldest stored row (NOW - 590)
    (0, 3600.0, False, None),  # nothing covered yet
])
def test_goodput_rate_divides_by_covered_span(elapsed: int, window: float, rebuilt: bool,
                                              rate: float | None) -> None:
    results = _good_every_10s(NOW - elapsed, NOW) or [_good_every_10s(NOW - 10, NOW)[0]]
    engine = SLOEngine((GOODPUT,), FakeClock(NOW if rebuilt else NOW - elapsed))
    engine.rebuild(results) if rebuilt else engine.add_probe_results(results)
    (st,) = engine.evaluate(NOW)
    got = next(w.goodput_rate for w in st.windows if w.window == window)
    assert got == (None if rate is None else pytest.approx(rate))


class History:
    """Stored results, oldest first; records whether the engine read them."""

    def __init__(self) -> None:
        self.read = False

    def __iter__(self) -> Iterator[ProbeResult]:
        self.read = True
        return reversed(_results())


A = SLOS[0]


# (the reloaded definition of "a", kept as is?, requests and good requests in its windows afterwards)
@pytest.mark.parametrize(("new", "kept", "total", "good"), [
    (A, True, 200, 150),
    (replace(A, objectives=(Objective("ttft", 99, 2.0),)), False, 200, 150),  # miss flags recomputed
    (replace(A, error_objective=0.99), True, 200, 150),
    (replace(A, budgets={"ttft": 1.0}), True, 200, 150),
    (replace(A, goodput=Goodput(0.9, ttft=0.9)), False, 200, 190),  # good flags recomputed, not stale
    (replace(A, goodput=Goodput(0.95, ttft=0.5)), False, 200, 150),
    (replace(A, window=7 * 86400.0, windows=()), False, 200, 150),
    (replace(A, segment_by=None), False, 200, 150),
    (replace(A, target="u"), False, 0, 0),
    (replace(A, name="renamed"), False, 200, 150),  # a new SLO is filled from the store too
])
def test_reconfigure_rebuilds_new_or_changed_from_history(new: SLO, kept: bool, total: int, good: int) -> None:
    engine = SLOEngine(SLOS, FakeClock(NOW))
    engine.add_probe_results(_results())
    before = engine.windows("a")[""]
    history = History()
    engine.reconfigure((new, *SLOS[1:]), history)
    after = engine.windows(new.name)[""]
    assert (after is before, history.read) == (kept, not kept)
    view = after.view(1e9, NOW)
    assert (view.total, view.good) == (total, good)
    assert engine.windows("b")[""].view(1e9, NOW).total == 0  # untouched SLOs are not refilled


def test_reconfigure_without_history_starts_changed_slos_empty() -> None:
    engine = SLOEngine(SLOS, FakeClock(NOW))
    engine.add_probe_results(_results())
    engine.reconfigure((replace(A, goodput=Goodput(0.9, ttft=0.9)),))
    assert engine.windows("a")[""].view(1e9, NOW).total == 0


def _render(families: list[Metric]) -> str:
    class _C:
        def collect(self) -> list[Metric]:
            return families

    reg = CollectorRegistry()
    reg.register(_C())
    return generate_latest(reg).decode()


def _linted(slos: tuple[SLO, ...]) -> str:
    """Return the exposition of these SLOs over _results(), after promtool's lint passed on it."""
    engine = SLOEngine(slos, FakeClock(NOW))
    engine.add_probe_results(_results())
    text = _render(engine.families(engine.evaluate(NOW)))
    check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert unknown_in_text(text) == []  # `sloguard check` knows every name and label exported
    return text


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not on PATH")
def test_exposition_passes_promtool_and_omits_empty() -> None:
    text = _linted(SLOS)
    assert 'sloguard_slo_burn_rate{sli="latency",slo="a",window="5m"}' in text
    assert 'sloguard_slo_burn_evidence_ratio{sli="latency",slo="a",window="1h"}' in text
    assert 'sloguard_slo_window_coverage_ratio{sli="latency",slo="a"}' in text
    assert 'sloguard_slo_quantile_censored{metric="ttft",quantile="0.95",slo="a",window="5m"} 0.0' in text
    assert 'sloguard_slo_goodput_ratio{prompt_bucket="short",slo="a",window="1h"}' in text
    assert 'sloguard_stage_latency_seconds{quantile="0.95",slo="a",stage="ttft",window="1h"}' in text
    assert 'sloguard_slo_window_requests{slo="c"' not in text  # no data is absent, never 0
    assert 'sloguard_slo_error_budget_remaining_ratio{sli="availability",slo="c"}' not in text


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not on PATH")
def test_per_objective_budgets_pass_promtool() -> None:
    """Per-objective budgets are labelled percentile, not quantile: promtool keeps quantile for summaries."""
    text = _linted((SLO("o", "t", objectives=(Objective("ttft", 95, 0.5), Objective("e2e", 50, 2.0))),))
    assert 'sloguard_slo_burn_rate{metric="ttft",percentile="95",sli="latency",slo="o",window="5m"}' in text
    assert 'sloguard_slo_requests_total{good="false",metric="e2e",percentile="50",sli="latency",slo="o"}' in text


def test_cli_evaluate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "version: sloguard/v1\ntargets: [{name: t, api_url: 'http://127.0.0.1:1'}]\n"
        "probes: [{name: p, target: t}]\n"
        "slos: [{name: a, target: t, goodput: {ttft: 500ms, target: 0.9}, error_budget_window: 1d}]\n"
    )
    rows = [json.dumps(_row(r)) for r in _results()]
    res = tmp_path / "r.jsonl"
    res.write_text("\n".join(rows) + "\n")
    assert cli.main(["-c", str(cfg), "--results", str(res), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (slo,) = doc["slos"]
    # 1 probe / 30 s: the 1d window is expected to hold 2880 requests, of which 10% = 288 may be bad
    assert slo["error_budget_remaining"] == pytest.approx(1 - 50 / 288)
    (budget,) = slo["error_budgets"]
    assert (budget["sli"], budget["expected"], budget["bad"]) == ("latency", 2880, 50)
    day = next(w for w in slo["windows"] if w["window"] == "1d")
    assert (day["requests"], day["good"]) == (200, 150)


def _row(r: ProbeResult) -> dict[str, object]:
    row = asdict(r)
    del row["itl_counts"], row["itl_sum_s"]
    return row
