"""Confirmation with hysteresis: which of an evaluation's candidate verdicts to publish (pure, clock-free).

A cause is named once its evidence held at K of the last N evaluations (this one included) and its rule holds
now; a named cause is kept while its rule still holds, even where a row above it in precedence holds at single
evaluations (a signal at its threshold flickers around it); a row above it replaces it once that row is
confirmed too. A state-like cause's evidence (`engine.holding`: a restart, a GPU, a pinned serving CPU, longer
prompts, a full KV cache, a surge or a queue) is
counted at every evaluation, breach or not, and an evaluation with no breach no longer restarts the count: it
publishes none at once, but a pinned CPU that held for seconds before the breach confirms at the breach, and a
breach that blinks on and off at its threshold keeps its count (benchmark trace: a CPU burn's TPOT p95 crossed
150 ms at one evaluation, fell back for 30 s and its verdict came 35 evaluations after the first crossing, its
evidence holding throughout). Until a cause is confirmed the verdict reads `unknown` ("confirming ..."). One
burst of noise (one evaluation) never names a cause; strict agreement at consecutive evaluations is not asked
for, because two causes whose rules both hold near their thresholds (KV pressure and the queue it ends in)
alternate as the first holding row and would keep each other unconfirmed. An event row's cause (`CauseRule.event`:
a restart, counted over restart_hold) is named at once: it cannot be noise at a threshold, and while it waited a
lower row that held before it was published in its place. So is a `sure` row's (`CauseRule.sure`: the users'
prompts at 2.5x and 3x their baseline), whose level healthy noise reached at 0.04% of traced evaluations, where
the confirmation it waited for cost the long-prompt verdicts an evaluation (rules.py).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable, Sequence

from sloguard.diagnose.model import Verdict
from sloguard.diagnose.rules import RULES

K, N = 2, 3  # held at 2 of the last 3 evaluations
UNNAMED = ("none", "unknown")
EVENTS = frozenset(rule.cause for rule in RULES if rule.event)  # named at first sight


class Confirmer:
    """Per SLO, the causes whose rules held at each of the last N evaluations; not thread-safe (event loop)."""

    def __init__(self, k: int = K, n: int = N, events: frozenset[str] = EVENTS) -> None:
        self.k, self.n, self.events = k, n, events
        self._held: dict[str, deque[frozenset[str]]] = {}

    def publish(self, cands: Sequence[Verdict], published: Verdict | None, holding: Iterable[str] = (),
                sure: Iterable[str] = ()) -> Verdict:
        """Return the verdict to publish from `engine.candidates` (precedence order) and the one published last.

        `holding`: the state-like causes whose evidence holds at this evaluation, breach or not (`engine.holding`);
        `sure`: the causes a row far past healthy noise names at this evaluation (`engine.sure`), named at once.
        """
        first = cands[0]
        held = self._held.setdefault(first.slo, deque(maxlen=self.n))
        held.append(frozenset(holding) | {v.cause for v in cands if v.cause not in UNNAMED})
        if first.cause in UNNAMED:
            return first
        kept = published.cause if published is not None else ""
        at_once = self.events | frozenset(sure)
        for v in cands:
            if v.cause == kept or v.cause in at_once or sum(v.cause in h for h in held) >= self.k:
                return v
        return dataclasses.replace(first, cause="unknown", confidence=0.0,
                                   lever=f"confirming {first.cause}: it must hold at {self.k} of the last "
                                         f"{self.n} evaluations")

    def forget(self, keep: Iterable[str]) -> None:
        """Drop the history of SLOs not in `keep` (removed from the config)."""
        names = set(keep)
        self._held = {s: h for s, h in self._held.items() if s in names}
