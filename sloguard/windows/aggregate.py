"""Service-level views over replicas: histograms added only on one bucket grid, gauges of the newest scrapes.

A service's server SLO adds its replicas' histogram deltas. Replicas whose buckets differ (another engine
version, another `--histogram-buckets`) cannot be added without inventing counts inside buckets, so the sum is
refused and the grids are named instead: a quantile over mixed grids would be wrong with no sign of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sloguard.histogram import merge
from sloguard.model import Histogram, ModelView, ServerView

SUMMED = ("requests_running", "requests_waiting")  # a service's queue and batch are its replicas' sums


@dataclass(frozen=True, slots=True)
class GridConflict:
    """Replicas of one service whose bucket grids differ; `text` names two of them and their grids."""

    target: str
    signal: str
    text: str


def _grid(h: Histogram) -> tuple[float, ...]:
    return tuple(b for b, _ in h.buckets)


def _show(grid: tuple[float, ...]) -> str:
    shown = ",".join(f"{b:g}" for b in grid[:6])
    return f"[{shown}{',…' if len(grid) > 6 else ''}] ({len(grid)} buckets)"


def add_replicas(target: str, signal: str,
                 by_replica: Mapping[str, Histogram]) -> tuple[Histogram | None, GridConflict | None]:
    """Return the sum of the replicas' histograms, or (None, the conflict) when their bucket grids differ."""
    grids: dict[tuple[float, ...], str] = {}
    for replica, h in sorted(by_replica.items()):
        grids.setdefault(_grid(h), replica)
    if len(grids) > 1:
        (g1, r1), (g2, r2) = list(grids.items())[:2]
        text = (f"{target} {signal}: replica {r1} buckets {_show(g1)} differ from replica {r2} buckets {_show(g2)}; "
                "not added (a quantile over mixed grids would be invented)")
        return None, GridConflict(target, signal, text)
    return merge(by_replica.values()), None


def merge_views(views: Sequence[ServerView]) -> ServerView | None:
    """Return one view of a service from its replicas' newest scrapes (queues summed, ratios at their highest)."""
    if not views:
        return None
    if len(views) == 1:
        return views[0]
    models: dict[str, dict[str, float]] = {}
    for view in views:
        for name, mv in view.models.items():
            into = models.setdefault(name, {})
            for gauge, value in mv.gauges.items():
                if gauge in into:
                    into[gauge] = into[gauge] + value if gauge in SUMMED else max(into[gauge], value)
                else:
                    into[gauge] = value
    newest = max(views, key=lambda v: v.ts)
    return ServerView(newest.target, newest.engine, newest.ts,
                      {m: ModelView(m, gauges=g) for m, g in models.items()})
