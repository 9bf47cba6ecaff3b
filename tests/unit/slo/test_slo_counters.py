"""Server-SLO counters per replica: what they count, and that their differences are the live evaluator's counts."""

from __future__ import annotations

import math

import pytest

from sloguard.model import Histogram, ModelView, ServerView
from sloguard.slo.counters import server_counts
from sloguard.slo.evaluate import evaluate
from sloguard.slo.model import SLO, Objective
from sloguard.windows.server import ServerWindows

INF = math.inf
SLO_ = SLO("srv", "svc", source="server", window=3600.0,
           objectives=(Objective("ttft", 95, 0.5), Objective("ttft", 90, 0.3)))
FAST, SLOW = "fast", "slow"


def view(replica: str, ts: float, fast: float, slow: float, aborted: float = 0.0, model: str = "m") -> ServerView:
    """A replica that served `fast` requests at TTFT ≤ 0.1 s and `slow` ones in (0.5, 1] s so far."""
    n = fast + slow
    ttft = Histogram(((0.1, fast), (0.5, fast), (1.0, n), (INF, n)), n, 0.05 * fast + 0.8 * slow)
    mv = ModelView(model, histograms={"ttft": ttft}, finished_by_reason={"stop": n, "abort": aborted})
    return ServerView("svc", "vllm", ts, {model: mv}, replica=replica)


def counts(sw: ServerWindows) -> dict[tuple[str, bool, str], float]:
    """Return (metric percentile, good, replica) -> count."""
    return {(dict(labels)["percentile"], good, replica): v
            for (_, labels, good, replica), v in server_counts([SLO_], sw).items()}


def test_counts_start_at_the_first_scrape_and_add_aborted_to_bad() -> None:
    sw = ServerWindows()
    sw.add(view("r0", 0.0, 1000, 10))  # served before sloguard saw it: not counted
    sw.add(view("r1", 0.0, 50, 0))
    assert set(counts(sw).values()) == {0.0}  # both replicas, both budgets, good and bad: present at 0
    sw.add(view("r0", 60.0, 1090, 20, aborted=3))
    sw.add(view("r1", 60.0, 80, 20))
    got = counts(sw)
    assert got[("95", True, "r0")] == 90 and got[("95", False, "r0")] == 10 + 3
    assert got[("95", True, "r1")] == 30 and got[("95", False, "r1")] == 20
    # 0.3 s lies inside (0.1, 0.5]: interpolated, as histogram_quantile would; fast ones all ≤ 0.1 s
    assert got[("90", True, "r1")] == pytest.approx(30.0) and got[("90", False, "r1")] == pytest.approx(20.0)


def test_a_restart_keeps_the_counters_rising() -> None:
    sw = ServerWindows()
    for ts, fast in ((0.0, 500), (60.0, 560), (120.0, 5), (180.0, 65)):  # restart before 120 s
        sw.add(view("r0", ts, fast, 0))
    assert counts(sw)[("95", True, "r0")] == 60 + 5 + 60


@pytest.mark.parametrize("window", [60.0, 300.0, 1800.0])
def test_differences_are_the_live_evaluators_counts(window: float) -> None:
    """A window's requests and bad, summed over replicas, are the counters' increase between its two scrapes (the
    oldest one while the window is longer than the history)."""
    sw = ServerWindows(max_age=86400)
    history: dict[float, dict[tuple[str, bool, str], float]] = {}
    fast, slow = {"r0": 1000.0, "r1": 0.0}, {"r0": 0.0, "r1": 0.0}
    for minute in range(8):
        for r, extra_slow in (("r0", 1.0), ("r1", 7.0 if minute >= 4 else 0.0)):
            fast[r] += 30
            slow[r] += extra_slow
            sw.add(view(r, minute * 60.0, fast[r], slow[r], aborted=minute if r == "r1" else 0.0))
        history[minute * 60.0] = counts(sw)
    now = 7 * 60.0
    burns = [b for b in evaluate(SLO_, None, now, sw).burns if b.window == window]
    assert len(burns) == 2 and all(b.bad > 0 for b in burns)
    for burn in burns:
        pct = burn.indicator.labels()["percentile"]

        def inc(good: bool, p: str = pct) -> float:
            base = history[max(0.0, now - window)]  # less history than the window: the first scrape
            return sum(history[now][(p, good, r)] - base[(p, good, r)] for r in ("r0", "r1"))

        assert burn.bad == pytest.approx(inc(False), abs=1e-9)
        assert burn.requests == pytest.approx(inc(False) + inc(True), abs=1e-9)
