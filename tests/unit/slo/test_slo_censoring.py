"""Found item 4 of issue 46: one probe cut short in 139 showed `BREACH p50 tpot ≥ 15ms (objective 50ms)` and held
back the diagnosis baselines. The SLO status, its metrics and JSON, and the diagnosis judge with one rule
(sloguard.windows.censor): missed because of cut-short requests only when putting them at +∞ crosses the threshold."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sloguard.diagnose import inputs
from sloguard.model import ProbeResult
from sloguard.slo import export
from sloguard.slo.evaluate import evaluate
from sloguard.slo.model import SLO, Objective
from sloguard.slo.result import ObjectiveStatus, SLOStatus
from sloguard.windows.probe import ProbeWindow, judge

NOW = 100_000.0


def _ok(ts: float, tpot: float) -> ProbeResult:
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=True, ttft_s=0.1, tpot_s=tpot,
                       e2e_s=0.1 + 63 * tpot, output_tokens=64)


def _timeout(ts: float, tpot_seen: float | None) -> ProbeResult:
    """A probe that timed out while decoding: TPOT censored at the value seen so far (else 0)."""
    return ProbeResult(ts=ts, probe="p", target="t", model="m", api="chat", ok=False, error="timeout",
                       ttft_s=0.1, tpot_s=tpot_seen, elapsed_s=20.0)


def _evaluate(threshold: float, results: list[ProbeResult]) -> tuple[SLOStatus, ProbeWindow]:
    slo = SLO("chat", "t", objectives=(Objective("tpot", 50.0, threshold),), window=300.0, windows=(300.0,))
    pw = ProbeWindow(slo.window)
    for r in results:
        pw.add(r, r.ok, judge(r, (("tpot", threshold),))[0])
    return evaluate(slo, {"": pw}, NOW), pw


def _status(threshold: float, results: list[ProbeResult]) -> SLOStatus:
    return _evaluate(threshold, results)[0]


def _healthy(n: int = 138) -> list[ProbeResult]:
    tpots = np.random.default_rng(46).uniform(0.012, 0.018, n)
    return [_ok(NOW - 2.0 * (i + 1), float(v)) for i, v in enumerate(tpots)]


def _objective(st: SLOStatus) -> ObjectiveStatus:
    (o,) = st.objectives
    return o


@pytest.mark.parametrize("tpot_seen", [None, 0.015])
def test_one_timeout_in_139_holds_and_reports_it(tpot_seen: float | None) -> None:
    st, pw = _evaluate(0.050, [*_healthy(), _timeout(NOW - 1.0, tpot_seen)])
    o = _objective(st)
    assert (o.compliant, o.censored, o.censored_count, o.count) == (True, False, 1, 139)
    assert o.value is not None and o.upper is not None and o.value <= o.upper < 0.050
    text = "\n".join(f"{s.name}{s.labels} {s.value}" for f in export.families([st], {}) for s in f.samples)
    assert "sloguard_slo_objective_compliance{'slo': 'chat', 'metric': 'tpot', 'quantile': '0.5', " \
           "'window': '5m'} 1.0" in text
    assert "sloguard_slo_quantile_censored{'slo': 'chat', 'metric': 'tpot', 'quantile': '0.5', " \
           "'window': '5m'} 0.0" in text
    assert "sloguard_slo_censored_requests{'slo': 'chat', 'metric': 'tpot', 'window': '5m'} 1.0" in text
    # the diagnosis judges the same window alike: no breach, so the healthy evaluation feeds the baselines
    view = pw.view(300.0, NOW)
    q, sources = inputs.quantiles(st.slo, view, None, 300.0)
    assert inputs.breaches(st, inputs.censor(q, sources, view), sources) == ()


def test_missed_only_because_of_cut_short_requests_is_censored() -> None:
    """Half the probes timed out while decoding: p50 reads a cut-short rank, under the threshold at its bound."""
    results = [*_healthy(60), *[_timeout(NOW - 200.0 - i, 0.015) for i in range(60)]]
    st = _status(0.050, results)
    assert (_objective(st).compliant, _objective(st).censored, _objective(st).censored_count) == (False, True, 60)
    doc = export.status_json(st)
    row = doc["objectives"][0]
    assert row["upper"] is None and row["censored"] is True  # unbounded: null, never a non-JSON Infinity
    json.dumps(doc, allow_nan=False)


def test_missed_on_measured_values_is_not_censored() -> None:
    """A 10 ms objective: the measured values alone miss it, whatever the cut-short request did."""
    o = _objective(_status(0.010, [*_healthy(), _timeout(NOW - 1.0, None)]))
    assert (o.compliant, o.censored, o.censored_count) == (False, False, 1)
