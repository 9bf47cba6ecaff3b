"""Pure SLO evaluation: SLO × windows × now → SLOStatus. Empty windows give None ("no data"), never 0.

Definitions (README "Exact definitions"):
- quantiles: probe SLOs use numpy `linear` percentiles while exact (sloguard.windows.probe), with every
  censored request (it ended before the metric's event) at its lower bound (the value), and at +∞ (`upper`).
  Server SLOs: Prometheus `histogram_quantile` maths on the window's bucket deltas (sloguard.histogram).
- compliance: probe: sloguard.windows.censor.judge: holds when upper ≤ threshold, `censored` (missed only
  because of requests cut short) when value ≤ threshold < upper; server: share of observations ≤ threshold ≥
  percentile/100 (engine histograms hold completed requests only: aborted ones spend the budget instead).
- goodput ratio = good / requests, rate = good / covered seconds (probe SLOs only: histograms cannot
  tell which request met every threshold). Covered = min(window, now − since), since = when the SLO's
  windows began observing (engine start or reload) or the oldest row added (restart rebuild), if older.
- budgets (sloguard.slo.model.indicators): availability bad = failed requests; latency bad = requests not
  good (goodput), or per objective the requests missing its threshold (censored ones included) out of
  those with a value or a censoring for its metric. Server SLOs: per objective, bad = observations above
  the threshold (histogram fraction) + requests the engine reports aborted (finished reason abort/error),
  out of observations + aborted. error ratio = bad / requests; burn = error ratio / (1 − objective).
- the guard's evidence over a window = bad / min_bad: min_bad from the probe schedule (a constant per
  window, sloguard.slo.burnrate.min_bad) or, without one, from the observed count (observed_min_bad).
- budget remaining over the SLO window W = 1 − bad / allowed, allowed = (1 − objective) × expected, and
  expected = max(rate × W, requests seen) with a probe schedule, else requests seen × W / covered (the
  observed rate extrapolated); covered = the seconds of W the data spans. Not clamped (−1 = spent twice).
- stages (sloguard.slo.stages): share = stage p50 / E2E p50 (same window); overrun = stage p95 / its
  budget; measured per request where a server record exists (source "request"), network = time to the
  response head otherwise, server histograms as intervals consistent with their sum and the whole.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Protocol, cast

from sloguard import histogram
from sloguard.config.burnwindows import REFERENCE_PERIOD
from sloguard.model import Histogram
from sloguard.slo.breach import breach_window
from sloguard.slo.burnrate import burn_rate, min_bad, observed_min_bad
from sloguard.slo.model import SLO, Indicator, indicators
from sloguard.slo.replicas import ReplicaStatus, ReplicaWindows, replica_statuses
from sloguard.slo.result import BudgetStatus, BurnStatus, ObjectiveStatus, SLOStatus, StageStatus, WindowStatus
from sloguard.slo.stages import breakdown
from sloguard.windows.censor import judge_quantile
from sloguard.windows.probe import MISS, ProbeWindow, WindowView

WORST_STAGE_WINDOW = 3600.0  # worst_stage is judged on the 1h window: recent, yet not one noisy probe
ABORT_REASONS = frozenset({"abort", "error"})  # engine finished reasons that mean the request never completed


class ServerWindowsLike(Protocol):
    def histogram(self, target: str, model: str | None, signal: str, window: float, now: float) -> Histogram | None:
        """Return the window's histogram delta for a target's signal (model None = all models)."""
        ...

    def span(self, target: str, signal: str, window: float, now: float) -> float:
        """Return the seconds of the window the signal's scrapes span (0 without two scrapes)."""
        ...

    def finished(self, target: str, reasons: frozenset[str], window: float, now: float) -> float:
        """Return the requests the engine finished with one of `reasons` in the window (0 if it does not say)."""
        ...


class QuantileReader(Protocol):
    def quantiles(self, metric: str, qs: Sequence[float]) -> tuple[float, ...] | None:
        """Return the metric's quantiles over one window, or None without data."""
        ...


class ServerReader:
    """Read quantiles of one target's server histograms over one window."""

    def __init__(self, server: ServerWindowsLike, target: str, window: float, now: float) -> None:
        self._server, self._target, self._window, self._now = server, target, window, now

    def histogram(self, metric: str) -> Histogram | None:
        """Return the window's histogram for a signal, or None when empty."""
        h = self._server.histogram(self._target, None, metric, self._window, self._now)
        return h if h is not None and h.count > 0 else None

    def quantiles(self, metric: str, qs: Sequence[float]) -> tuple[float, ...] | None:
        h = self.histogram(metric)
        values = [histogram.quantile(q, h) for q in qs] if h is not None else [None]
        return None if any(v is None for v in values) else tuple(float(v or 0.0) for v in values)

    def aborted(self) -> float:
        """Return the requests the engine reports aborted (finished reason abort/error) in the window."""
        return self._server.finished(self._target, ABORT_REASONS, self._window, self._now)

    def span(self, metric: str) -> float:
        """Return the seconds the metric's scrapes span in the window."""
        return self._server.span(self._target, metric, self._window, self._now)


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


@lru_cache(maxsize=4096)
def scheduled_min_bad(rate: float, window: float, allowed: float) -> int | None:
    """Return the guard's k_min for a window from the probe schedule (cached: a constant per SLO and window)."""
    return min_bad(math.ceil(rate * window - 1e-9), rate * REFERENCE_PERIOD, allowed)


def _burn(slo: SLO, ind: Indicator, window: float, requests: float, bad: float) -> BurnStatus:
    ratio = _ratio(bad, requests)
    k: float | None = (scheduled_min_bad(slo.probe_rate, window, ind.allowed) if slo.probe_rate
                       else observed_min_bad(requests, ind.allowed))
    evidence = None if ratio is None else (bad / k if k else 0.0)
    return BurnStatus(ind, window, requests, bad, ratio, burn_rate(ratio, ind.objective), k, evidence)


def miss_bit(slo: SLO, ind: Indicator) -> int:
    """Return the flag bit of a per-objective latency budget in the SLO's probe windows."""
    for i, o in enumerate(slo.objectives):
        if (o.metric, o.percentile, o.threshold) == (ind.metric, ind.percentile, ind.threshold):
            return MISS << i
    raise KeyError(ind)


def _probe_bad(slo: SLO, ind: Indicator, view: WindowView) -> tuple[float, float]:
    """Return (requests, bad) of one budget in a probe window."""
    if ind.sli == "availability":
        return view.total, view.total - view.ok
    if ind.metric is None:
        return view.total, view.total - view.good
    return view.population(ind.metric), view.count(miss_bit(slo, ind))


def _probe_counts(slo: SLO, view: WindowView, window: float, segment: str, covered: float) -> WindowStatus:
    total = view.total
    has_goodput = slo.goodput is not None and total > 0
    return WindowStatus(
        window, segment, total, view.good, total - view.ok,
        _ratio(view.good, total) if slo.goodput is not None else None,
        _ratio(view.good, covered) if has_goodput else None,
        _ratio(total - view.ok, total), view.exact,
    )


def _probe_objectives(slo: SLO, view: WindowView, window: float, segment: str) -> list[ObjectiveStatus]:
    out = []
    for o in slo.objectives:
        got = view.censored_quantiles(o.metric, (o.quantile,)) if o.metric in _PROBE_READABLE else None
        if got is None:
            out.append(ObjectiveStatus(o.metric, o.percentile, o.threshold, window, segment, None, None,
                                       exact=view.exact))
            continue
        q = got[0]
        j = judge_quantile(q, o.threshold)
        out.append(ObjectiveStatus(o.metric, o.percentile, o.threshold, window, segment, q.value, j.holds,
                                   exact=view.exact, censored=j.censored, censored_count=q.censored_count,
                                   count=q.count, upper=q.upper))
    return out


_PROBE_READABLE = frozenset({"ttft", "ttfot", "tpot", "itl", "e2e", "decode"})


def _budget(slo: SLO, burn: BurnStatus, covered: float, rate: float | None) -> BudgetStatus:
    """Return the budget over the SLO window from the budget's burn over that window (module docstring)."""
    ind, seen = burn.indicator, burn.requests
    if rate is not None:
        expected: float | None = max(rate * slo.window, seen)
    else:
        expected = seen * slo.window / covered if covered > 0 else None
    allowed = None if expected is None else ind.allowed * expected
    remaining = None if not seen or not allowed else 1.0 - burn.bad / allowed
    return BudgetStatus(ind, slo.window, remaining, burn.bad, allowed, expected, covered)


def _server_window(slo: SLO, reader: ServerReader, window: float,
                   ) -> tuple[WindowStatus, list[ObjectiveStatus], list[BurnStatus]]:
    objectives, burns, requests = [], [], 0.0
    aborted = reader.aborted()
    for ind, o in zip(indicators(slo), slo.objectives, strict=True):
        h = reader.histogram(o.metric)
        value = None if h is None else histogram.quantile(o.quantile, h)
        frac = None if h is None else histogram.fraction_le(h, o.threshold)
        requests = max(requests, 0.0 if h is None else h.count)
        ok = None if frac is None else frac[0] >= o.quantile
        objectives.append(ObjectiveStatus(o.metric, o.percentile, o.threshold, window, "", value, ok,
                                          None if frac is None else frac[0], frac is None or frac[1], upper=value))
        good = None if h is None else histogram.count_le(h, o.threshold)
        if h is not None and good is not None:  # count - good: integers on a bucket edge, as the exported counters
            burns.append(_burn(slo, ind, window, h.count + aborted, h.count - good[0] + aborted))
    status = WindowStatus(window, "", requests, None, None, None, None, None, False)
    return status, objectives, burns


def _worst_stage(stages: Sequence[StageStatus]) -> str | None:
    judged = [s for s in stages if s.window == WORST_STAGE_WINDOW and not s.segment and s.overrun is not None]
    worst = max(judged, key=lambda s: s.overrun or 0.0, default=None)
    return worst.stage if worst is not None and (worst.overrun or 0.0) > 1.0 else None


def _budgets(slo: SLO, burns: Sequence[BurnStatus], covered: float) -> tuple[BudgetStatus, ...]:
    at_window = {b.indicator: b for b in burns if b.window == slo.window}
    return tuple(_budget(slo, at_window[ind], covered, slo.probe_rate) for ind in indicators(slo) if ind in at_window)


def evaluate(slo: SLO, probe: Mapping[str, ProbeWindow] | None, now: float,
             server: ServerWindowsLike | None = None) -> SLOStatus:
    """Return the SLO's status at `now` from its probe windows (segment -> window; "" = all) and server windows."""
    windows: list[WindowStatus] = []
    objectives: list[ObjectiveStatus] = []
    stages: list[StageStatus] = []
    burns: list[BurnStatus] = []
    covered = 0.0
    for w in slo.windows:
        sreader = ServerReader(server, slo.target, w, now) if server is not None else None
        if slo.source == "server" and sreader is not None:
            status, objs, bs = _server_window(slo, sreader, w)
            windows.append(status)
            objectives += objs
            burns += bs
            stages += breakdown(slo, None, sreader, w, "")
            if w == slo.window:
                covered = max((sreader.span(o.metric) for o in slo.objectives), default=0.0)
            continue
        for segment, pw in sorted((probe or {}).items()):
            view = pw.view(w, now)
            covered_w = (probe or {}).get("", pw).covered(w, now)  # segments share the SLO's observed span
            windows.append(_probe_counts(slo, view, w, segment, covered_w))
            objectives += _probe_objectives(slo, view, w, segment)
            stages += breakdown(slo, view, sreader if not segment else None, w, segment)
            if not segment:
                burns += [_burn(slo, ind, w, *_probe_bad(slo, ind, view)) for ind in indicators(slo)]
                if w == slo.window:
                    covered = pw.data_span(w, now)
    return SLOStatus(slo, now, tuple(windows), tuple(objectives), tuple(stages),
                     _budgets(slo, burns, covered), tuple(burns), _worst_stage(stages), _replicas(slo, server, now))


def _replicas(slo: SLO, server: ServerWindowsLike | None, now: float) -> tuple[ReplicaStatus, ...]:
    """Return a server SLO's replicas over its breach window, where the server windows know replicas."""
    if slo.source != "server" or server is None or not hasattr(server, "replica_histograms"):
        return ()
    return replica_statuses(slo, cast(ReplicaWindows, server), breach_window(slo), now)
