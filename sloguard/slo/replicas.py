"""A service-level server SLO per replica over one window: which replicas spend its budget (pure).

Per replica and objective, from the replica's own histogram (the one the service's reading adds up): the
quantile, the requests (observations plus aborted requests) and the bad ones, counted as the SLO's budgets count
them (sloguard.slo.evaluate), so the replicas' bad counts add up to the SLO's.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sloguard import histogram
from sloguard.model import Histogram

if TYPE_CHECKING:
    from sloguard.slo.model import SLO

ABORTED = frozenset({"finished:abort", "finished:error"})  # sloguard.slo.evaluate.ABORT_REASONS as counter names


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """One replica against one objective over one window."""

    replica: str
    metric: str
    percentile: float
    threshold: float
    window: float
    value: float | None  # the replica's quantile at the objective's percentile
    requests: float
    bad: float


class ReplicaWindows(Protocol):
    def replica_histograms(self, target: str, signal: str, window: float, now: float) -> dict[str, Histogram]:
        """Return replica -> its histogram of the window."""
        ...

    def replica_increase(self, target: str, names: Collection[str], window: float,
                         now: float) -> dict[str, tuple[float, float]]:
        """Return replica -> (increase of the counters `names`, span) in the window."""
        ...


def replica_statuses(slo: SLO, server: ReplicaWindows, window: float, now: float) -> tuple[ReplicaStatus, ...]:
    """Return each replica's standing on each objective over the window; () for fewer than two replicas."""
    aborted = {r: inc for r, (inc, _) in server.replica_increase(slo.target, ABORTED, window, now).items()}
    out = []
    for o in slo.objectives:
        for replica, h in sorted(server.replica_histograms(slo.target, o.metric, window, now).items()):
            good = histogram.count_le(h, o.threshold) if h.count > 0 else None
            extra = aborted.get(replica, 0.0)
            bad = h.count - (good[0] if good is not None else h.count) + extra
            out.append(ReplicaStatus(replica, o.metric, o.percentile, o.threshold, window,
                                     histogram.quantile(o.quantile, h) if h.count > 0 else None, h.count + extra, bad))
    return tuple(out) if len({r.replica for r in out}) > 1 else ()
