"""Server-side windows over normalised scrapes, exported as the `sloguard_server_*` families.

Every histogram, counter and finished-reason series of every (target, model) keeps a `HistogramWindow`
(counters ride as one-bucket histograms, so restarts are handled once, in one place). Families are
computed at render time from the scrapes in each window; an empty window exports nothing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from sloguard.config.units import format_duration
from sloguard.model import Histogram, ServerView
from sloguard.windows.histo import HistogramWindow, merge, quantile

QUANTILES = (0.5, 0.9, 0.95, 0.99)
LATENCY_SIGNALS = ("ttft", "itl", "tpot", "e2e", "queue", "prefill", "decode", "inference")
GAUGES = {
    "requests_running": "Requests the engine is executing, from its last scrape.",
    "requests_waiting": "Requests queued in the engine, from its last scrape.",
    "kv_cache_usage_ratio": "KV-cache usage of the engine (0..1), from its last scrape.",
}
RATES = {
    "prompt_tokens": "prompt_tokens_per_second",
    "generation_tokens": "generation_tokens_per_second",
    "preemptions": "preemptions_per_second",
}
_FROM = "computed over the window from the engine's cumulative /metrics scrapes in it"
Key = tuple[str, str, str]


def _one(value: float) -> Histogram:
    return Histogram(((math.inf, value),), value, value)


class ServerWindows:
    """Feed every ServerView here; read windowed histograms and the exported families back."""

    def __init__(self, windows: Sequence[float] = (60.0, 300.0), max_age: float = 4 * 86400) -> None:
        self.windows = tuple(windows)
        self.max_age = max_age
        self._hist: dict[Key, HistogramWindow] = {}
        self._count: dict[Key, HistogramWindow] = {}
        self._latest: dict[str, ServerView] = {}
        self._restarts: dict[str, int] = defaultdict(int)

    def add(self, view: ServerView) -> None:
        """Record one scrape; a scrape in which any series went backwards counts as one restart."""
        reset = False
        for model, mv in view.models.items():
            for sig, h in mv.histograms.items():
                reset |= self._feed(self._hist, (view.target, model, sig), view.ts, h)
            counters = {**mv.counters, **{f"finished:{r}": v for r, v in mv.finished_by_reason.items()}}
            for name, value in counters.items():
                reset |= self._feed(self._count, (view.target, model, name), view.ts, _one(value))
        if reset:
            self._restarts[view.target] += 1
        self._latest[view.target] = view

    def _feed(self, table: dict[Key, HistogramWindow], key: Key, ts: float, h: Histogram) -> bool:
        win = table.get(key)
        if win is None:
            win = table[key] = HistogramWindow(self.max_age)
        before = win.resets()
        win.add(ts, h)
        return win.resets() > before

    def histogram(self, target: str, model: str | None, signal: str, window: float, now: float) -> Histogram | None:
        """Return the histogram of observations in the window; model None sums all models of the target."""
        found = [
            h
            for (t, m, s), win in self._hist.items()
            if t == target and s == signal and (model is None or m == model)
            and (h := win.over(window, now)) is not None
        ]
        return merge(found)

    def span(self, target: str, signal: str, window: float, now: float) -> float:
        """Return the seconds the window's delta of a target's signal spans (the longest model's; 0 if none).

        Like `histogram`, the delta reaches back to the scrape at or just before now − window, so the span
        may exceed the window by up to one scrape interval: it is the time the observations were made in.
        """
        spans = [found[1] for (t, _, s), win in self._hist.items()
                 if t == target and s == signal and (found := win.over_span(window, now)) is not None]
        return max(spans, default=0.0)

    def finished(self, target: str, reasons: frozenset[str], window: float, now: float) -> float:
        """Return the requests a target finished with one of `reasons` in the window (0 where not reported)."""
        names = {f"finished:{r}" for r in reasons}
        return sum(found[0].count for (t, _, n), win in self._count.items()
                   if t == target and n in names and (found := win.over_span(window, now)) is not None)

    def reconfigure(self, targets: Collection[str], max_age: float, now: float) -> None:
        """Apply a reload: forget removed targets and series silent for max_age, adopt the new horizon."""
        self.max_age = max_age
        for table in (self._hist, self._count):
            for key in [k for k, w in table.items() if k[0] not in targets or (w.newest() or 0.0) < now - max_age]:
                del table[key]
            for win in table.values():
                win.max_age = max_age
        for target in [t for t in self._latest if t not in targets]:
            del self._latest[target]
            self._restarts.pop(target, None)

    def restarts(self) -> dict[str, int]:
        """Return engine restarts (counter resets) seen per target."""
        return dict(self._restarts)

    def families(self, now: float) -> list[Metric]:
        """Return the `sloguard_server_*` families for `now`; stale or empty windows export nothing."""
        out: list[Metric] = [*self._latency(now), *self._gauges(now), *self._rates(now)]
        restarts = CounterMetricFamily(
            "sloguard_server_restarts", "Engine restarts detected as counter resets between scrapes.",
            labels=["target"],
        )
        for target in sorted(self._latest):
            restarts.add_metric([target], float(self._restarts.get(target, 0)))
        out.append(restarts)
        return out

    def _latency(self, now: float) -> Iterator[Metric]:
        for sig in LATENCY_SIGNALS:
            # A summary without _sum/_count: the only type promtool accepts with a quantile label.
            q_name = f"sloguard_server_{sig}_seconds"
            q_fam = Metric(q_name, f"Engine-reported {sig} quantile (histogram_quantile semantics), {_FROM}.",
                           "summary")
            mean_fam = GaugeMetricFamily(
                f"sloguard_server_{sig}_mean_seconds",
                f"Engine-reported mean {sig}, {_FROM}.",
                labels=["target", "model", "window"],
            )
            for (target, model, s), win in sorted(self._hist.items()):
                if s != sig:
                    continue
                for w in self.windows:
                    h = win.over(w, now)
                    if h is None or h.count <= 0:
                        continue
                    label = format_duration(w)
                    mean_fam.add_metric([target, model, label], h.sum / h.count)
                    for q in QUANTILES:
                        v = quantile(q, h)
                        if v is not None:
                            labels = {"target": target, "model": model, "quantile": str(q), "window": label}
                            q_fam.add_sample(q_name, labels, v)
            yield from (f for f in (q_fam, mean_fam) if f.samples)

    def _gauges(self, now: float) -> Iterator[Metric]:
        fresh = [v for _, v in sorted(self._latest.items()) if v.ts > now - max(self.windows, default=60.0)]
        for sig, text in GAUGES.items():
            fam = GaugeMetricFamily(f"sloguard_server_{sig}", text, labels=["target", "model"])
            for view in fresh:
                for model, mv in sorted(view.models.items()):
                    if sig in mv.gauges:
                        fam.add_metric([view.target, model], mv.gauges[sig])
            if fam.samples:
                yield fam

    def _deltas(self, name: str, now: float) -> Iterator[tuple[str, str, str, float, float]]:
        """Yield (target, model, window label, increase, seconds) for one counter name."""
        for (target, model, n), win in sorted(self._count.items()):
            if n != name:
                continue
            for w in self.windows:
                found = win.over_span(w, now)
                if found is not None and found[1] > 0:
                    yield target, model, format_duration(w), found[0].count, found[1]

    def _rates(self, now: float) -> Iterator[Metric]:
        for counter, metric in RATES.items():
            fam = GaugeMetricFamily(f"sloguard_server_{metric}", f"Engine {counter} per second, {_FROM}.",
                                    labels=["target", "model", "window"])
            for target, model, w, inc, secs in self._deltas(counter, now):
                fam.add_metric([target, model, w], inc / secs)
            if fam.samples:
                yield fam
        yield from self._hit_ratio(now)
        yield from self._finished(now)

    def _hit_ratio(self, now: float) -> Iterator[Metric]:
        fam = GaugeMetricFamily("sloguard_server_prefix_cache_hit_ratio",
                                f"Prefix-cache hits / queries (tokens), {_FROM}.", labels=["target", "model", "window"])
        hits = {(t, m, w): inc for t, m, w, inc, _ in self._deltas("prefix_cache_hits", now)}
        for t, m, w, queries, _ in self._deltas("prefix_cache_queries", now):
            if queries > 0 and (t, m, w) in hits:
                fam.add_metric([t, m, w], hits[(t, m, w)] / queries)
        if fam.samples:
            yield fam

    def _finished(self, now: float) -> Iterator[Metric]:
        fam = GaugeMetricFamily("sloguard_server_requests_finished_per_second",
                                f"Requests the engine finished per second by reason, {_FROM}.",
                                labels=["target", "model", "reason", "window"])
        names = sorted({n for (_, _, n) in self._count if n.startswith("finished:")})
        for name in names:
            for t, m, w, inc, secs in self._deltas(name, now):
                fam.add_metric([t, m, name.removeprefix("finished:"), w], inc / secs)
        if fam.samples:
            yield fam

    def model_increase(self, target: str, name: str, window: float, now: float) -> dict[str, tuple[float, float]]:
        """Return model -> (increase, seconds spanned) of one counter of a target over the window (resets handled)."""
        return {m: (found[0].count, found[1]) for (t, m, n), win in self._count.items()
                if t == target and n == name and (found := win.over_span(window, now)) is not None}

    def increase(self, target: str, names: Collection[str], window: float, now: float) -> tuple[float, float] | None:
        """Return (summed increase of the counters `names` over all models, longest span) in the window.

        Counter resets are handled as for every server series; None when no such counter has two scrapes.
        """
        found = [got for (t, _, n), win in self._count.items()
                 if t == target and n in names and (got := win.over_span(window, now)) is not None]
        if not found:
            return None
        return sum(h.count for h, _ in found), max(span for _, span in found)

    def counter_names(self, target: str) -> set[str]:
        """Return the counter names (finished reasons as `finished:<reason>`) a target has reported."""
        return {n for (t, _, n) in self._count if t == target}

    def latest(self, target: str) -> ServerView | None:
        """Return the target's newest scrape, or None."""
        return self._latest.get(target)
