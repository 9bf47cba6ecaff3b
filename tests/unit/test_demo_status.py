"""The demo's status lines say what pages and why: budgets left over the window, coverage, the page row."""

from __future__ import annotations

from sloguard.clock import FakeClock
from sloguard.demo import render_status
from sloguard.model import ProbeResult
from sloguard.slo.engine import SLOEngine
from sloguard.slo.model import SLO, Goodput, Objective

NOW = 1_000_000.0


def _result(i: int, stalled: bool, timed_out: bool) -> ProbeResult:
    if timed_out:
        return ProbeResult(ts=NOW - 120 + 2 * i, probe="p", target="sim", model="m", api="chat", ok=False,
                           error="timeout after 1.9s", connect_s=0.0, elapsed_s=1.9)
    return ProbeResult(ts=NOW - 120 + 2 * i, probe="p", target="sim", model="m", api="chat", ok=True,
                       ttft_s=1.3 if stalled else 0.3, e2e_s=2.0, connect_s=0.0, elapsed_s=2.0)


def test_status_shows_lower_bounds_budgets_and_pages() -> None:
    slo = SLO("ux", "sim", objectives=(Objective("ttft", 95, 1.0),), goodput=Goodput(0.99, ttft=0.8),
              error_objective=0.99, window=86400.0, probe_rate=0.5)
    engine = SLOEngine((slo,), FakeClock(NOW - 120))
    engine.add_probe_results(_result(i, stalled=i >= 30, timed_out=i >= 30 and i % 3 == 0) for i in range(60))
    text = render_status(engine.api_json(engine.evaluate(NOW)))
    lines = text.splitlines()
    assert lines[0] == "SLO ux (probe, target sim), 5m window:"
    assert "BREACH   p95 ttft" in lines[1] and "≥ 1900ms" in lines[1]
    assert lines[1].endswith(": 10 of 60 ended before the first token")
    budgets = [line for line in lines if "budget:" in line]
    # 10 timeouts are a 16.7x burn, but not yet the 11 bad requests the 5m row needs at 1 probe / 2 s
    assert budgets[0] == ("  availability budget: 97.7% of the 1d budget left (2m of data); quiet: burning 16.7x "
                          "over 5m (page at 14.4x over 5m and 1m, with >= 11 bad: 10)")
    assert budgets[1].startswith("  latency budget: 93.1% of the 1d budget left (2m of data); PAGING: burning 50x")


def test_status_before_any_data() -> None:
    assert render_status({"slos": []}) == "(waiting for the first evaluation)"
