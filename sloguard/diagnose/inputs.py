"""Breaches and stage readings of one SLO over the diagnosis window (pure; windows read, never changed).

A breach is an objective the SLO's own status says misses over its breach window (sloguard.slo.breach: the one
definition every surface shows; a handful of slow probes in a minute cannot produce a verdict on a healthy SLO).
Where it misses over the diagnosis window too, the verdict locates it in a stage; where the diagnosis window does
not miss (yet, or any more), the breach is not `recent` and only the causes whose evidence is a state of the engine
now can name it. Objectives, goodput thresholds (at the goodput target's quantile) and stage budgets (p95) all
count. Both judge a probe quantile with one function (sloguard.windows.censor.judge): it misses when, with the
requests cut short (timed out, failed) at +∞, it is over the threshold, and one timeout that cannot move a quantile
over its threshold breaches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from sloguard.diagnose.model import Breach, Reading
from sloguard.slo.breach import breaches as slo_breaches
from sloguard.slo.breach import missed_metrics
from sloguard.slo.evaluate import QuantileReader, ServerReader
from sloguard.slo.model import SLO
from sloguard.slo.result import SLOStatus
from sloguard.slo.stages import STAGE_QS, breakdown
from sloguard.windows import bounds
from sloguard.windows.censor import Quantile, judge

WHOLES = ("ttft", "ttfot", "tpot", "itl", "e2e", "decode")
Quantiles = dict[str, tuple[tuple[float, float, float], ...]]  # name -> per STAGE_QS (value, lo, hi)
Sources = dict[str, str]


def nearest_q(q: float) -> int:
    """Return the index in STAGE_QS of the quantile nearest to q."""
    return min(range(len(STAGE_QS)), key=lambda i: abs(STAGE_QS[i] - q))


def quantiles(slo: SLO, probe: QuantileReader | None, server: ServerReader | None,
              window: float) -> tuple[Quantiles, Sources]:
    """Return every stage's and whole's p50/p95/p99 (value, lo, hi) over the window, and each one's source."""
    out: Quantiles = {}
    sources: Sources = {}
    for st in breakdown(slo, probe, server, window, ""):
        values = (st.p50, st.p95, st.p99)
        if any(v is None for v in values):
            continue
        res = st.resolution or tuple((v, v) for v in values)  # type: ignore[misc]
        out[st.stage] = tuple((float(v), lo, hi) for v, (lo, hi) in zip(values, res, strict=True))  # type: ignore[arg-type]
        sources[st.stage] = st.source
    for metric in WHOLES:
        if metric in out:
            continue
        if probe is not None:
            got = probe.quantiles(metric, STAGE_QS)
            if got is not None:
                out[metric], sources[metric] = tuple((v, v, v) for v in got), "probe"
        elif server is not None:
            b = bounds.quantiles(STAGE_QS, server.histogram(metric))
            if b is not None:
                out[metric], sources[metric] = tuple((x.value, x.lo, x.hi) for x in b), "server"
    return out, sources


class CensoredReader(Protocol):
    def censored_quantiles(self, metric: str, qs: Sequence[float]) -> tuple[Quantile, ...] | None:
        """Return each quantile with whether requests cut short could move it, or None without a value."""
        ...


def censor(q: Quantiles, sources: Sources, probe: CensoredReader | None) -> Quantiles:
    """Return q with every probe whole's hi at its upper bound: cut-short requests at +∞ (inf: unbounded)."""
    if probe is None:
        return q
    out = dict(q)
    for name in WHOLES:
        if sources.get(name) != "probe" or name not in q:
            continue
        got = probe.censored_quantiles(name, STAGE_QS)
        if got is not None:
            out[name] = tuple((v, lo, max(hi, c.upper)) for (v, lo, hi), c in zip(q[name], got, strict=True))
    return out


def gaps(probe: CensoredReader | None, sources: Sources) -> dict[str, float]:
    """Return per probe whole the share of its requests that no per-request stage covers.

    Stages measured from the server's record cover only the requests that have one; a request cut short before
    its record (timed out, failed) or before the event (a censored TTFT) has no stages. When that share is
    above a quantile's tail (1 − q), the whole's quantile can consist of such requests alone, and comparing a
    stage's rise with the whole's says nothing (engine.locate compares it with the stages' rises instead).
    """
    if probe is None:
        return {}
    recorded = None
    if any(src == "request" for src in sources.values()):
        got = probe.censored_quantiles("request_queue", (0.5,))
        recorded = 0 if got is None else got[0].count
    out = {}
    for name in WHOLES:
        got = probe.censored_quantiles(name, (0.5,)) if sources.get(name) == "probe" else None
        if got is None or got[0].count == 0:
            continue
        n = got[0].count
        covered = n - got[0].censored_count if recorded is None else min(n, recorded)
        out[name] = 1.0 - covered / n
    return out


def _wanted(slo: SLO) -> list[tuple[str, float, float]]:
    """Return (metric, quantile, threshold) of every objective, goodput threshold and stage budget."""
    out = [(o.metric, o.quantile, o.threshold) for o in slo.objectives]
    if slo.goodput is not None:
        out += [(m, slo.goodput.target, t) for m, t in slo.goodput.thresholds()]
    out += [(stage, 0.95, budget) for stage, budget in slo.budgets.items()]
    return out


def slo_misses(status: SLOStatus) -> set[str]:
    """Return the metrics (and stages) the SLO's own status says miss over its breach window (sloguard.slo.breach)."""
    return missed_metrics(status, slo_breaches(status))


def breaches(status: SLOStatus, q: Quantiles, sources: Sources) -> tuple[Breach, ...]:
    """Return the objectives that miss over the SLO's breach window; `recent` where also over the diagnosis window.

    A value from an engine histogram is an interval: it misses only when even its lower end is over the
    threshold (queue p95 somewhere in vLLM's first bucket [0, 0.3 s] does not miss a 100 ms budget). A probe
    quantile (hi from censor()) is judged as the SLO's own status judges it (censor.judge): it misses when its
    upper bound is over the threshold, `censored` when only requests cut short put it there.
    """
    missed = slo_misses(status)
    out = []
    for metric, quantile, threshold in _wanted(status.slo):
        got = q.get(metric)
        if metric not in missed or got is None:
            continue
        value, lo, hi = got[nearest_q(quantile)]
        j = judge(lo, hi if sources.get(metric) == "probe" else lo, threshold)
        if not j.holds:
            out.append(Breach(metric, quantile, value, threshold, censored=j.censored))
        else:
            out.append(Breach(metric, quantile, value, threshold, recent=False))
    return tuple(out)


def readings(q: Quantiles, sources: Sources, at: float, baselines: Mapping[str, float],
             budgets: Mapping[str, float], uncovered: Mapping[str, float] | None = None) -> dict[str, Reading]:
    """Return every stage's and whole's reading at the quantile nearest `at`, with its baseline and budget.

    `uncovered`: gaps(), each whole's share of requests without per-request stages.
    """
    i = nearest_q(at)
    out = {}
    for name, values in q.items():
        value, lo, hi = values[i]
        out[name] = Reading(name, value, lo, hi, sources.get(name, ""), baselines.get(key(name, STAGE_QS[i])),
                            budgets.get(name) if i == nearest_q(0.95) else None, (uncovered or {}).get(name, 0.0))
    return out


def key(name: str, quantile: float) -> str:
    """Return the baseline key of a stage or whole at a quantile, e.g. "queue@0.95"."""
    return f"{name}@{quantile:g}"


def healthy_values(q: Quantiles) -> dict[str, float]:
    """Return the values a healthy evaluation adds to the baselines: every reading at every quantile."""
    return {key(name, qq): values[i][0] for name, values in q.items() for i, qq in enumerate(STAGE_QS)}

