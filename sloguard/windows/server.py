"""Server-side windows over normalised scrapes, exported as the `sloguard_server_*` families.

Every histogram, counter and finished-reason series of every (target, replica, model) keeps a `HistogramWindow`
(counters ride as one-bucket histograms, so restarts are handled once, in one place). Families are
computed at render time from the scrapes in each window, one series per replica; an empty window exports
nothing. A target's readings (histogram, increase, ...) add its replicas up: a service's view
(sloguard.windows.aggregate; replicas on different bucket grids are refused, named in `conflicts`). A replica
that vanished (discovery) exports nothing at once but counts in its service's readings for its grace period.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence

from prometheus_client.metrics_core import Metric

from sloguard.histogram import merge
from sloguard.model import SERVER_WINDOWS, Histogram, ServerView
from sloguard.windows.aggregate import GridConflict, add_replicas, merge_views
from sloguard.windows.histo import HistogramWindow
from sloguard.windows.serverexport import GAUGES, LATENCY_SIGNALS, QUANTILES, RATES, families

__all__ = ["GAUGES", "LATENCY_SIGNALS", "QUANTILES", "RATES", "ServerWindows"]

Key = tuple[str, str, str, str]  # target, replica, model, series


def _one(value: float) -> Histogram:
    return Histogram(((math.inf, value),), value, value)


class ServerWindows:
    """Feed every ServerView here; read windowed histograms and the exported families back."""

    def __init__(self, windows: Sequence[float] = SERVER_WINDOWS, max_age: float = 4 * 86400) -> None:
        self.windows = tuple(windows)
        self.max_age = max_age
        self._hist: dict[Key, HistogramWindow] = {}
        self._count: dict[Key, HistogramWindow] = {}
        self._latest: dict[tuple[str, str], ServerView] = {}
        self._restarts: dict[tuple[str, str], int] = defaultdict(int)
        self._gone: dict[tuple[str, str], float] = {}  # vanished replica -> when its windows are forgotten
        self.conflicts: dict[tuple[str, str], GridConflict] = {}  # (target, signal) -> replicas on other grids

    def add(self, view: ServerView) -> None:
        """Record one scrape; a scrape in which any series went backwards counts as one restart."""
        reset = False
        rep = view.replica
        self._gone.pop((view.target, rep), None)
        for model, mv in view.models.items():
            for sig, h in mv.histograms.items():
                reset |= self._feed(self._hist, (view.target, rep, model, sig), view.ts, h)
            counters = {**mv.counters, **{f"finished:{r}": v for r, v in mv.finished_by_reason.items()}}
            for name, value in counters.items():
                reset |= self._feed(self._count, (view.target, rep, model, name), view.ts, _one(value))
        if reset:
            self._restarts[(view.target, rep)] += 1
        self._latest[(view.target, rep)] = view

    def _feed(self, table: dict[Key, HistogramWindow], key: Key, ts: float, h: Histogram) -> bool:
        win = table.get(key)
        if win is None:
            win = table[key] = HistogramWindow(self.max_age)
        before = win.resets()
        win.add(ts, h)
        return win.resets() > before

    def replica_histograms(self, target: str, signal: str, window: float, now: float) -> dict[str, Histogram]:
        """Return replica -> its histogram of the window (all models), for the replicas that have one."""
        per: dict[str, list[Histogram]] = defaultdict(list)
        for (t, r, _, s), win in self._hist.items():
            if t == target and s == signal and (h := win.over(window, now)) is not None:
                per[r].append(h)
        return {r: got for r, hs in per.items() if (got := merge(hs)) is not None}

    def histogram(self, target: str, model: str | None, signal: str, window: float, now: float) -> Histogram | None:
        """Return the histogram of observations in the window; model None sums all models of the target.

        A service's replicas are added up; None when they sit on different bucket grids (`conflicts` names them).
        """
        per: dict[str, list[Histogram]] = defaultdict(list)
        for (t, r, m, s), win in self._hist.items():
            if t == target and s == signal and (model is None or m == model) and (h := win.over(window, now)):
                per[r].append(h)
        by_replica = {r: got for r, hs in per.items() if (got := merge(hs)) is not None}
        summed, conflict = add_replicas(target, signal, by_replica)
        if conflict is not None:
            self.conflicts[(target, signal)] = conflict
        else:
            self.conflicts.pop((target, signal), None)
        return summed

    def span(self, target: str, signal: str, window: float, now: float) -> float:
        """Return the seconds the window's delta of a target's signal spans (the longest model's; 0 if none).

        Like `histogram`, the delta reaches back to the scrape at or just before now − window, so the span
        may exceed the window by up to one scrape interval: it is the time the observations were made in.
        """
        spans = [found[1] for (t, _, _, s), win in self._hist.items()
                 if t == target and s == signal and (found := win.over_span(window, now)) is not None]
        return max(spans, default=0.0)

    def finished(self, target: str, reasons: frozenset[str], window: float, now: float) -> float:
        """Return the requests a target finished with one of `reasons` in the window (0 where not reported)."""
        names = {f"finished:{r}" for r in reasons}
        return sum(found[0].count for (t, _, _, n), win in self._count.items()
                   if t == target and n in names and (found := win.over_span(window, now)) is not None)

    def reconfigure(self, targets: Collection[str], max_age: float, now: float) -> None:
        """Apply a reload: forget removed targets and series silent for max_age, adopt the new horizon."""
        self.max_age = max_age
        for table in (self._hist, self._count):
            for key in [k for k, w in table.items() if k[0] not in targets or (w.newest() or 0.0) < now - max_age]:
                del table[key]
            for win in table.values():
                win.max_age = max_age
        for rkey in [k for k in self._latest if k[0] not in targets]:
            del self._latest[rkey]
            self._restarts.pop(rkey, None)
            self._gone.pop(rkey, None)

    def retire(self, present: Mapping[str, Collection[str]], grace: Mapping[str, float], now: float) -> None:
        """Apply the current replicas of each target in `present`: a vanished one exports nothing from now on and
        counts in its target's readings until `grace[target]` has passed, then is forgotten."""
        for key in list(self._latest):
            target, rep = key
            if target in present and rep not in present[target] and key not in self._gone:
                self._gone[key] = now + grace.get(target, 0.0)
        for key, until in list(self._gone.items()):
            if until <= now:
                self._forget(key)

    def _forget(self, key: tuple[str, str]) -> None:
        for table in (self._hist, self._count):
            for k in [k for k in table if k[:2] == key]:
                del table[k]
        self._latest.pop(key, None)
        self._restarts.pop(key, None)
        self._gone.pop(key, None)

    def restarts(self) -> dict[str, int]:
        """Return engine restarts (counter resets) seen per target, its replicas' added up."""
        out: dict[str, int] = defaultdict(int)
        for (target, _), n in self._restarts.items():
            out[target] += n
        return dict(out)

    def replica_restarts(self, target: str) -> dict[str, int]:
        """Return restarts seen per present replica of a target."""
        return {r: self._restarts.get((t, r), 0) for (t, r) in self._latest if t == target and (t, r) not in self._gone}

    def replicas(self, target: str) -> list[str]:
        """Return the present replicas of a target (scraped at least once, not vanished)."""
        return sorted(r for (t, r) in self._latest if t == target and (t, r) not in self._gone)

    def families(self, now: float) -> list[Metric]:
        """Return the `sloguard_server_*` families for `now`, one series per present replica (serverexport)."""
        return families(self, now)

    def present(self, counters: bool = False) -> Iterator[tuple[Key, HistogramWindow]]:
        """Yield the histogram (or counter) windows of present replicas, sorted by key."""
        for key, win in sorted((self._count if counters else self._hist).items()):
            if key[:2] not in self._gone:
                yield key, win

    def views(self) -> list[ServerView]:
        """Return the newest scrape of every present replica, sorted by (target, replica)."""
        return [v for k, v in sorted(self._latest.items()) if k not in self._gone]

    def restart_counts(self) -> dict[tuple[str, str], int]:
        """Return (target, replica) -> restarts seen, for present replicas."""
        return {k: self._restarts.get(k, 0) for k in sorted(self._latest) if k not in self._gone}

    def model_increase(self, target: str, name: str, window: float, now: float) -> dict[str, tuple[float, float]]:
        """Return model -> (increase, seconds spanned) of one counter of a target over the window (resets handled)."""
        out: dict[str, tuple[float, float]] = {}
        for (t, _, m, n), win in self._count.items():
            if t == target and n == name and (found := win.over_span(window, now)) is not None:
                inc, span = out.get(m, (0.0, 0.0))
                out[m] = (inc + found[0].count, max(span, found[1]))
        return out

    def increase(self, target: str, names: Collection[str], window: float, now: float) -> tuple[float, float] | None:
        """Return (summed increase of the counters `names` over all models and replicas, longest span) in the window.

        Counter resets are handled as for every server series; None when no such counter has two scrapes.
        """
        found = [got for (t, _, _, n), win in self._count.items()
                 if t == target and n in names and (got := win.over_span(window, now)) is not None]
        if not found:
            return None
        return sum(h.count for h, _ in found), max(span for _, span in found)

    def replica_increase(self, target: str, names: Collection[str], window: float,
                         now: float) -> dict[str, tuple[float, float]]:
        """Return replica -> (summed increase of the counters `names`, longest span) in the window."""
        out: dict[str, tuple[float, float]] = {}
        for (t, r, _, n), win in self._count.items():
            if t == target and n in names and (got := win.over_span(window, now)) is not None:
                inc, span = out.get(r, (0.0, 0.0))
                out[r] = (inc + got[0].count, max(span, got[1]))
        return out

    def counter_names(self, target: str) -> set[str]:
        """Return the counter names (finished reasons as `finished:<reason>`) a target has reported."""
        return {n for (t, _, _, n) in self._count if t == target}

    def engines(self) -> dict[str, str]:
        """Return the engine each target's newest scrape was read as (a service: its newest replica's)."""
        return {t: v.engine for (t, _), v in sorted(self._latest.items(), key=lambda kv: kv[1].ts)}

    def latest(self, target: str) -> ServerView | None:
        """Return the target's newest scrape; a service's present replicas as one view (aggregate.merge_views)."""
        return merge_views([v for k, v in sorted(self._latest.items()) if k[0] == target and k not in self._gone])

    def latest_of(self, target: str, replica: str) -> ServerView | None:
        """Return one replica's newest scrape, or None."""
        return self._latest.get((target, replica))

    def replica_totals(self, target: str, signal: str) -> dict[str, Histogram]:
        """Return present replica -> its histogram since sloguard first scraped it (all models, resets handled)."""
        per: dict[str, list[Histogram]] = defaultdict(list)
        for (t, r, _, s), win in self.present():
            if t == target and s == signal and (h := win.total()) is not None:
                per[r].append(h)
        return {r: got for r, hs in per.items() if (got := merge(hs)) is not None}

    def replica_finished_totals(self, target: str, reasons: Collection[str]) -> dict[str, float]:
        """Return present replica -> the requests it finished with one of `reasons` since first scraped."""
        names = {f"finished:{r}" for r in reasons}
        out: dict[str, float] = defaultdict(float)
        for (t, r, _, n), win in self.present(counters=True):
            if t == target and n in names and (h := win.total()) is not None:
                out[r] += h.count
        return dict(out)
