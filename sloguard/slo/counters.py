"""The cumulative good/bad counts of server SLOs per replica: `sloguard_slo_requests_total{...,replica}`.

Per replica and objective budget, since sloguard first scraped the replica: good = observations at or below the
threshold (histogram.count_le), bad = the other observations plus the requests the engine finished aborted. Both are
linear in the cumulative buckets, so the difference of two exports is exactly what the live evaluator counts over
the window between them (sloguard.slo.evaluate), and Prometheus may add replicas and sloguard instances up
(sloguard.rulegen.recording). Integers where the threshold is a bucket edge.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from sloguard import histogram
from sloguard.model import Histogram
from sloguard.slo.evaluate import ABORT_REASONS
from sloguard.slo.model import SLO, Indicator, indicators

CounterKey = tuple[str, tuple[tuple[str, str], ...], bool]  # (slo, budget labels, good)


def counter_key(slo: str, ind: Indicator, good: bool) -> CounterKey:
    """Return the sloguard_slo_requests_total key of one budget's good or bad requests."""
    return slo, tuple(ind.labels().items()), good


ReplicaKey = tuple[str, tuple[tuple[str, str], ...], bool, str]  # (slo, budget labels, good, replica)


class ReplicaTotals(Protocol):
    def replica_totals(self, target: str, signal: str) -> dict[str, Histogram]:
        """Return present replica -> its histogram since first scraped."""
        ...

    def replica_finished_totals(self, target: str, reasons: Collection[str]) -> dict[str, float]:
        """Return present replica -> requests finished with one of `reasons` since first scraped."""
        ...


def server_counts(slos: Sequence[SLO], server: ReplicaTotals) -> dict[ReplicaKey, float]:
    """Return (slo, budget labels, good, replica) -> the count since first scraped, for every server SLO budget."""
    out: dict[ReplicaKey, float] = {}
    for slo in slos:
        if slo.source != "server":
            continue
        aborted = server.replica_finished_totals(slo.target, ABORT_REASONS)
        for ind, o in zip(indicators(slo), slo.objectives, strict=True):
            labels = tuple(ind.labels().items())
            for replica, h in sorted(server.replica_totals(slo.target, o.metric).items()):
                found = histogram.count_le(h, o.threshold)
                good = found[0] if found is not None else 0.0
                out[(slo.name, labels, True, replica)] = good
                out[(slo.name, labels, False, replica)] = h.count - good + aborted.get(replica, 0.0)
    return out
