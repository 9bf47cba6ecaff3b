"""replica_outlier: one or a few replicas of a service carry its engine stages' excess (a sick node, a routing
imbalance), which the service-level signals average away.

Per replica, over the diagnosis window: the mean engine time per request of each stage (queue, prefill, decode,
from the replica's own histograms), its KV-cache usage and queue (newest scrape) and its restarts (within
`hold`). A replica is an outlier when, for some stage, its mean is at least FACTOR × the median of the other
replicas and MIN_EXCESS_S above it, and the outliers hold at least MIN_SHARE of the stage's excess over that
median (summed over the replicas' requests); or it alone is full (KV ≥ KV_FULL, the others' median under half
that), queues while the others do not, or restarted. At most half the replicas (rounded down, at least one) may
be outliers: more is the whole service, which the other causes explain. Needs two replicas or more.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Protocol

from sloguard.diagnose.history import Series
from sloguard.model import Histogram, ServerView

STAGES = ("queue", "prefill", "decode")
FACTOR = 2.0
MIN_EXCESS_S = 0.005
MIN_SHARE = 0.6
KV_FULL = 0.9
SIGNAL = "replica_outliers"


class ReplicaServer(Protocol):
    def replicas(self, target: str) -> list[str]:
        """Return the present replicas of a target."""
        ...

    def replica_histograms(self, target: str, signal: str, window: float, now: float) -> dict[str, Histogram]:
        """Return replica -> its histogram of the window."""
        ...

    def latest_of(self, target: str, replica: str) -> ServerView | None:
        """Return one replica's newest scrape."""
        ...

    def replica_restarts(self, target: str) -> dict[str, int]:
        """Return restarts seen per present replica."""
        ...


def _stage_outliers(by_replica: Mapping[str, Histogram]) -> dict[str, str]:
    means = {r: h.sum / h.count for r, h in by_replica.items() if h.count > 0}
    out: dict[str, str] = {}
    if len(means) < 2:
        return out
    excess: dict[str, float] = {}
    for r, mean in means.items():
        median = statistics.median(v for k, v in means.items() if k != r)
        if mean >= FACTOR * median and mean - median >= MIN_EXCESS_S:
            excess[r] = (mean - median) * by_replica[r].count
            out[r] = f"mean {mean * 1000:.0f} ms vs {median * 1000:.0f} ms (median of the others)"
    whole = statistics.median(means.values())
    total = sum(max(0.0, m - whole) * by_replica[r].count for r, m in means.items())
    if not out or total <= 0 or sum(excess.values()) < MIN_SHARE * total:
        return {}
    return out


def _gauge_outliers(views: Mapping[str, ServerView]) -> dict[str, str]:
    def gauge(view: ServerView, name: str, pick: str) -> float | None:
        values = [mv.gauges[name] for mv in view.models.values() if name in mv.gauges]
        return (max(values) if pick == "max" else sum(values)) if values else None

    out: dict[str, str] = {}
    for name, pick, unit in (("kv_cache_usage_ratio", "max", "KV cache"), ("requests_waiting", "sum", "waiting")):
        values = {r: v for r, view in views.items() if (v := gauge(view, name, pick)) is not None}
        for r, v in values.items():
            others = [x for k, x in values.items() if k != r]
            if not others:
                continue
            median = statistics.median(others)
            full = v >= KV_FULL and median < KV_FULL / 2 if name.endswith("ratio") else v >= 1 and median < 0.5
            if full:
                out[r] = f"{unit} {v:.2g} vs {median:.2g} (median of the others)"
    return out


def replica_signals(series: Series, server: ReplicaServer, target: str, window: float, hold: float,
                    now: float) -> tuple[dict[str, float], dict[str, str]]:
    """Return {replica_outliers: n} and a note naming them and why (0 for a target of fewer than two replicas: there
    is no other replica to differ from, so nothing is missing)."""
    names = server.replicas(target)
    if len(names) < 2:
        return {SIGNAL: 0.0}, {}
    why: dict[str, list[str]] = {}
    for stage in STAGES:
        for r, text in _stage_outliers(server.replica_histograms(target, stage, window, now)).items():
            why.setdefault(r, []).append(f"{stage} {text}")
    views = {r: v for r in names if (v := server.latest_of(target, r)) is not None}
    for r, text in _gauge_outliers(views).items():
        why.setdefault(r, []).append(text)
    for r, n in server.replica_restarts(target).items():
        series.add(f"{target}@{r}/restarts", now, float(n))
        got = series.increase(f"{target}@{r}/restarts", hold, now)
        if got is not None and got[0] >= 1:
            why.setdefault(r, []).append(f"restarted {got[0]:g}x")
    if not why or len(why) > max(1, len(names) // 2):
        return {SIGNAL: 0.0}, {}
    note = "; ".join(f"replica {r} of {len(names)}: " + ", ".join(t) for r, t in sorted(why.items()))
    return {SIGNAL: float(len(why))}, {SIGNAL: note}
