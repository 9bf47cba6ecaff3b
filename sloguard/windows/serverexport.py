"""The `sloguard_server_*` families of the server windows: one series per present replica, `replica` label on all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.metrics_core import Metric

from sloguard.config.units import format_duration
from sloguard.families import declare
from sloguard.histogram import quantile
from sloguard.model import SERVER_QUANTILES, ServerView
from sloguard.windows.histo import HistogramWindow

QUANTILES = SERVER_QUANTILES
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
LABELS = ("target", "replica", "model")
_W = (*LABELS, "window")
# A summary without _sum/_count: the only type promtool accepts with a quantile label.
LATENCY = {sig: declare(f"sloguard_server_{sig}_seconds", "summary",
                        f"Engine-reported {sig} quantile (histogram_quantile semantics), {_FROM}.", _W)
           for sig in LATENCY_SIGNALS}
MEANS = {sig: declare(f"sloguard_server_{sig}_mean_seconds", "gauge", f"Engine-reported mean {sig}, {_FROM}.", _W)
         for sig in LATENCY_SIGNALS}
GAUGE_FAMILIES = {sig: declare(f"sloguard_server_{sig}", "gauge", text, LABELS) for sig, text in GAUGES.items()}
RATE_FAMILIES = {c: declare(f"sloguard_server_{m}", "gauge", f"Engine {c} per second, {_FROM}.", _W)
                 for c, m in RATES.items()}
HIT_RATIO = declare("sloguard_server_prefix_cache_hit_ratio", "gauge",
                    f"Prefix-cache hits / queries (tokens), {_FROM}.", _W)
FINISHED = declare("sloguard_server_requests_finished_per_second", "gauge",
                   f"Requests the engine finished per second by reason, {_FROM}.", (*LABELS, "reason", "window"))
RESTARTS = declare("sloguard_server_restarts", "counter", "Engine restarts detected as counter resets between scrapes.",
                   ("target", "replica"))



class ServerWindowsLike(Protocol):
    """What the families read of sloguard.windows.server.ServerWindows."""

    windows: tuple[float, ...]

    def present(self, counters: bool = False) -> Iterator[tuple[tuple[str, str, str, str], HistogramWindow]]:
        """Yield ((target, replica, model, series), window) of present replicas, sorted."""
        ...

    def views(self) -> list[ServerView]:
        """Return the newest scrape of every present replica."""
        ...

    def restart_counts(self) -> dict[tuple[str, str], int]:
        """Return (target, replica) -> restarts seen, for present replicas."""
        ...


def families(sw: ServerWindowsLike, now: float) -> list[Metric]:
    """Return the `sloguard_server_*` families for `now`; stale or empty windows export nothing."""
    out: list[Metric] = [*_latency(sw, now), *_gauges(sw, now), *_rates(sw, now)]
    restarts = RESTARTS.counter()
    for (target, replica), n in sw.restart_counts().items():
        restarts.add_metric([target, replica], float(n))
    out.append(restarts)
    return out


def _latency(sw: ServerWindowsLike, now: float) -> Iterator[Metric]:
    for sig in LATENCY_SIGNALS:
        q_name = f"sloguard_server_{sig}_seconds"
        q_fam, mean_fam = LATENCY[sig].new(), MEANS[sig].gauge()
        for (target, replica, model, s), win in sw.present():
            if s != sig:
                continue
            for w in sw.windows:
                h = win.over(w, now)
                if h is None or h.count <= 0:
                    continue
                label = format_duration(w)
                mean_fam.add_metric([target, replica, model, label], h.sum / h.count)
                for q in QUANTILES:
                    v = quantile(q, h)
                    if v is not None:
                        labels = {"target": target, "replica": replica, "model": model, "quantile": str(q),
                                  "window": label}
                        q_fam.add_sample(q_name, labels, v)
        yield from (f for f in (q_fam, mean_fam) if f.samples)


def _gauges(sw: ServerWindowsLike, now: float) -> Iterator[Metric]:
    fresh = [v for v in sw.views() if v.ts > now - max(sw.windows, default=60.0)]
    for sig in GAUGES:
        fam = GAUGE_FAMILIES[sig].gauge()
        for view in fresh:
            for model, mv in sorted(view.models.items()):
                if sig in mv.gauges:
                    fam.add_metric([view.target, view.replica, model], mv.gauges[sig])
        if fam.samples:
            yield fam


Delta = tuple[str, str, str, str, float, float]


def _deltas(sw: ServerWindowsLike, name: str, now: float) -> Iterator[Delta]:
    """Yield (target, replica, model, window label, increase, seconds) for one counter name."""
    for (target, replica, model, n), win in sw.present(counters=True):
        if n != name:
            continue
        for w in sw.windows:
            found = win.over_span(w, now)
            if found is not None and found[1] > 0:
                yield target, replica, model, format_duration(w), found[0].count, found[1]


def _rates(sw: ServerWindowsLike, now: float) -> Iterator[Metric]:
    for counter in RATES:
        fam = RATE_FAMILIES[counter].gauge()
        for t, r, m, w, inc, secs in _deltas(sw, counter, now):
            fam.add_metric([t, r, m, w], inc / secs)
        if fam.samples:
            yield fam
    yield from _hit_ratio(sw, now)
    yield from _finished(sw, now)


def _hit_ratio(sw: ServerWindowsLike, now: float) -> Iterator[Metric]:
    fam = HIT_RATIO.gauge()
    hits = {(t, r, m, w): inc for t, r, m, w, inc, _ in _deltas(sw, "prefix_cache_hits", now)}
    for t, r, m, w, queries, _ in _deltas(sw, "prefix_cache_queries", now):
        if queries > 0 and (t, r, m, w) in hits:
            fam.add_metric([t, r, m, w], hits[(t, r, m, w)] / queries)
    if fam.samples:
        yield fam


def _finished(sw: ServerWindowsLike, now: float) -> Iterator[Metric]:
    fam = FINISHED.gauge()
    names = sorted({key[3] for key, _ in sw.present(counters=True) if key[3].startswith("finished:")})
    for name in names:
        for t, r, m, w, inc, secs in _deltas(sw, name, now):
            fam.add_metric([t, r, m, name.removeprefix("finished:"), w], inc / secs)
    if fam.samples:
        yield fam
