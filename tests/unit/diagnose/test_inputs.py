"""Breaches over the diagnosis window: a bounded engine-histogram value misses only when its lower end does."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from sloguard.diagnose import inputs
from sloguard.model import Histogram
from sloguard.slo.evaluate import ServerReader, evaluate
from sloguard.slo.model import SLO, Objective
from sloguard.slo.result import ObjectiveStatus, SLOStatus
from sloguard.windows.censor import Quantile

NOW = 1000.0


class Server:
    """Every window holds the same queue histogram (vLLM's first bucket: 0.3 s) and TTFT histogram."""

    def __init__(self, queue: Histogram) -> None:
        self.h = {"queue": queue, "ttft": Histogram(((0.5, 100.0), (1.0, 100.0), (math.inf, 100.0)), 100.0, 20.0)}

    def histogram(self, target: str, model: str | None, signal: str, window: float, now: float) -> Histogram | None:
        return self.h.get(signal)

    def span(self, target: str, signal: str, window: float, now: float) -> float:
        return window

    def finished(self, target: str, reasons: frozenset[str], window: float, now: float) -> float:
        return 0.0


def _breaches(queue: Histogram) -> tuple[str, ...]:
    slo = SLO("s", "t", source="server", budgets={"queue": 0.1})
    server = Server(queue)
    q, sources = inputs.quantiles(slo, None, ServerReader(server, "t", 300.0, NOW), 300.0)
    return tuple(b.metric for b in inputs.breaches(evaluate(slo, None, NOW, server), q, sources))


def test_a_queue_somewhere_in_the_first_bucket_does_not_miss_a_budget_inside_it() -> None:
    # 100 requests all ≤ 0.3 s, mean 20 ms: p95 reads 0.285 s interpolated, but may be anywhere in [0, 0.3]
    assert _breaches(Histogram(((0.3, 100.0), (0.5, 100.0), (math.inf, 100.0)), 100.0, 2.0)) == ()


def test_a_queue_whose_lower_end_is_over_the_budget_misses() -> None:
    # 10% of requests waited 0.3-0.5 s: p95 lies in (0.3, 0.5], over the 100 ms budget whatever the truth
    assert _breaches(Histogram(((0.3, 90.0), (0.5, 100.0), (math.inf, 100.0)), 100.0, 12.0)) == ("queue",)


class View:
    """A probe window: per metric (value at every quantile, upper bound, censored count, count)."""

    def __init__(self, rows: dict[str, tuple[float, float, int, int]]) -> None:
        self.rows = rows

    def censored_quantiles(self, metric: str, qs: Sequence[float]) -> tuple[Quantile, ...] | None:
        if metric not in self.rows:
            return None
        v, upper, n_censored, n = self.rows[metric]
        return tuple(Quantile(v, upper, n_censored, n) for _ in qs)


def _probe_slo() -> SLO:
    return SLO("s", "t", objectives=(Objective("tpot", 95.0, 0.15),), windows=(300.0,))


def _status(slo: SLO, compliant: bool) -> SLOStatus:
    o = ObjectiveStatus("tpot", 95.0, 0.15, 300.0, "", 0.14, compliant, censored=not compliant, censored_count=3,
                        count=40)
    return SLOStatus(slo, 0.0, (), (o,), (), (), (), None)


def test_a_quantile_requests_cut_short_could_move_misses_as_the_slo_judges_it() -> None:
    """TPOT p95 ≥ 140 ms with 3 timed-out requests: the SLO's status misses, so does the diagnosis window."""
    slo = _probe_slo()
    q = {"tpot": ((0.12, 0.12, 0.12), (0.14, 0.14, 0.14), (0.2, 0.2, 0.2))}
    sources = {"tpot": "probe"}
    censored = inputs.censor(q, sources, View({"tpot": (0.14, math.inf, 3, 40)}))
    assert censored["tpot"][1] == (0.14, 0.14, math.inf)
    got = inputs.breaches(_status(slo, compliant=False), censored, sources)
    assert [(b.metric, b.value, b.censored) for b in got] == [("tpot", 0.14, True)]
    # exact 140 ms is under 150 ms over the diagnosis window: the SLO's own window still misses, not recently
    assert [(b.metric, b.recent) for b in inputs.breaches(_status(slo, compliant=False), q, sources)] == [
        ("tpot", False)]
    assert inputs.breaches(_status(slo, compliant=True), censored, sources) == ()  # the SLO itself holds
    assert inputs.censor(q, {"tpot": "probe"}, None) == q


@pytest.mark.parametrize(("rows", "sources", "uncovered"), [
    # 40 TTFTs, 30 of them with the server's record: a quarter of the requests have no stages
    ({"ttft": (1.0, 1.0, 0, 40), "request_queue": (0.1, 0.1, 0, 30)}, {"ttft": "probe", "queue": "request"},
     0.25),
    # no per-request stages: the requests censored in the whole are the ones no stage covers
    ({"ttft": (4.9, math.inf, 4, 40)}, {"ttft": "probe", "network": "probe"}, 0.1),
    ({"ttft": (1.0, 1.0, 0, 40), "request_queue": (0.1, 0.1, 0, 40)}, {"ttft": "probe", "queue": "request"}, 0.0),
])
def test_gaps_are_the_requests_without_stages(rows: dict[str, tuple[float, float, int, int]], sources: dict[str, str],
                                             uncovered: float) -> None:
    assert inputs.gaps(View(rows), sources) == {"ttft": pytest.approx(uncovered)}
    assert inputs.gaps(None, sources) == {}
