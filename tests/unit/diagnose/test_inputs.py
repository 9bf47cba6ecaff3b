"""Breaches over the diagnosis window: a bounded engine-histogram value misses only when its lower end does."""

from __future__ import annotations

import math

from sloguard.diagnose import inputs
from sloguard.model import Histogram
from sloguard.slo.evaluate import ServerReader, evaluate
from sloguard.slo.model import SLO

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
    q, _ = inputs.quantiles(slo, None, ServerReader(server, "t", 300.0, NOW), 300.0)
    return tuple(b.metric for b in inputs.breaches(evaluate(slo, None, NOW, server), q))


def test_a_queue_somewhere_in_the_first_bucket_does_not_miss_a_budget_inside_it() -> None:
    # 100 requests all ≤ 0.3 s, mean 20 ms: p95 reads 0.285 s interpolated, but may be anywhere in [0, 0.3]
    assert _breaches(Histogram(((0.3, 100.0), (0.5, 100.0), (math.inf, 100.0)), 100.0, 2.0)) == ()


def test_a_queue_whose_lower_end_is_over_the_budget_misses() -> None:
    # 10% of requests waited 0.3-0.5 s: p95 lies in (0.3, 0.5], over the 100 ms budget whatever the truth
    assert _breaches(Histogram(((0.3, 90.0), (0.5, 100.0), (math.inf, 100.0)), 100.0, 12.0)) == ("queue",)
