"""Pure SLO evaluation: SLO × windows × now → SLOStatus. Empty windows give None ("no data"), never 0.

Definitions (README-ready):
- quantiles: probe SLOs use numpy `linear` percentiles while exact (sloguard.windows.probe), server SLOs
  Prometheus `histogram_quantile` maths on the window's bucket deltas (sloguard.windows.histo).
- compliance: probe: quantile ≤ threshold; server: share of observations ≤ threshold ≥ percentile/100.
- goodput ratio = good / requests, rate = good / covered seconds (probe SLOs only: histograms cannot
  tell which request met every threshold). Covered = min(window, now − since), since = when the SLO's
  windows began observing (engine start or reload) or the oldest row added (restart rebuild), if older:
  a 1h window 10 min after a first start divides by 600 s, not 3600 s. No covered time: no rate.
- probe SLOs: error_ratio = the share of requests that spent error budget (model.budget_sli);
  burn rate = error_ratio / (1 − budget_objective).
- server SLOs (histograms cannot tell which request failed or met every threshold): each objective
  "p-th percentile ≤ T" is its own budget: miss_i = 1 − fraction_le(T_i) of the window's observations,
  allowed 1 − p_i/100, burn_i = miss_i / (1 − p_i/100); burn rate = max_i burn_i over the objectives
  with data (the fastest-burning objective). budget_objective = the strictest p_i/100 (model), and
  error_ratio = burn rate × (1 − budget_objective): the worst miss share scaled to that allowance (equal
  to max_i miss_i when all objectives share one percentile), so burn = error_ratio / (1 − objective)
  holds for every SLO. A max of raw miss shares against one percentile would hide a p99 objective
  burning 2× behind a p95 one missing more observations but within its larger allowance.
- error budget remaining over the SLO window = 1 − bad / allowed = 1 − burn rate over that window, not
  clamped (−1 = budget spent twice over).
- stages (sloguard.slo.stages): share = stage p50 / E2E p50 (same window); overrun = stage p95 / its
  budget; measured per request where a server record exists (source "request"), network = time to the
  response head otherwise, server histograms as intervals consistent with their sum and the whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from sloguard.model import Histogram
from sloguard.slo.burnrate import burn_rate, objectives_burn_rate
from sloguard.slo.model import (
    SLO,
    ObjectiveStatus,
    SLOStatus,
    StageStatus,
    WindowStatus,
    budget_objective,
    budget_sli,
)
from sloguard.slo.stages import breakdown
from sloguard.windows import histo
from sloguard.windows.probe import ProbeWindow, WindowView

WORST_STAGE_WINDOW = 3600.0  # worst_stage is judged on the 1h window: recent, yet not one noisy probe


class ServerWindowsLike(Protocol):
    def histogram(self, target: str, model: str | None, signal: str, window: float, now: float) -> Histogram | None:
        """Return the window's histogram delta for a target's signal (model None = all models)."""
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
        values = [histo.quantile(q, h) for q in qs] if h is not None else [None]
        return None if any(v is None for v in values) else tuple(float(v or 0.0) for v in values)


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def _probe_counts(slo: SLO, view: WindowView, window: float, segment: str, covered: float) -> WindowStatus:
    total = view.total
    bad = total - (view.good if budget_sli(slo) == "goodput" else view.ok)
    error_ratio = _ratio(bad, total)
    has_goodput = slo.goodput is not None and total > 0
    return WindowStatus(
        window, segment, total, view.good, total - view.ok,
        _ratio(view.good, total) if slo.goodput is not None else None,
        _ratio(view.good, covered) if has_goodput else None,
        error_ratio, _ratio(total - view.ok, total),
        burn_rate(error_ratio, budget_objective(slo)), view.exact,
    )


def _probe_objectives(slo: SLO, view: WindowView, window: float, segment: str) -> list[ObjectiveStatus]:
    out = []
    for o in slo.objectives:
        qs = view.quantiles(o.metric, (o.quantile,)) if o.metric in _PROBE_READABLE else None
        value = None if qs is None else qs[0]
        compliant = None if value is None else value <= o.threshold
        out.append(ObjectiveStatus(o.metric, o.percentile, o.threshold, window, segment, value, compliant,
                                   exact=view.exact))
    return out


_PROBE_READABLE = frozenset({"ttft", "ttfot", "tpot", "itl", "e2e", "decode"})


def _server_window(slo: SLO, reader: ServerReader, window: float) -> tuple[WindowStatus, list[ObjectiveStatus]]:
    objectives, misses, requests = [], [], 0.0
    for o in slo.objectives:
        h = reader.histogram(o.metric)
        value = None if h is None else histo.quantile(o.quantile, h)
        frac = None if h is None else histo.fraction_le(h, o.threshold)
        requests = max(requests, 0.0 if h is None else h.count)
        ok = None if frac is None else frac[0] >= o.quantile
        objectives.append(ObjectiveStatus(o.metric, o.percentile, o.threshold, window, "", value, ok,
                                          None if frac is None else frac[0], frac is None or frac[1]))
        if frac is not None:
            misses.append((1.0 - frac[0], o.quantile))
    burn = objectives_burn_rate(misses)
    error_ratio = None if burn is None else burn * (1.0 - budget_objective(slo))
    status = WindowStatus(window, "", requests, None, None, None, None, error_ratio, None, burn, False)
    return status, objectives


def _worst_stage(stages: Sequence[StageStatus]) -> str | None:
    judged = [s for s in stages if s.window == WORST_STAGE_WINDOW and not s.segment and s.overrun is not None]
    worst = max(judged, key=lambda s: s.overrun or 0.0, default=None)
    return worst.stage if worst is not None and (worst.overrun or 0.0) > 1.0 else None


def evaluate(slo: SLO, probe: Mapping[str, ProbeWindow] | None, now: float,
             server: ServerWindowsLike | None = None) -> SLOStatus:
    """Return the SLO's status at `now` from its probe windows (segment -> window; "" = all) and server windows."""
    windows: list[WindowStatus] = []
    objectives: list[ObjectiveStatus] = []
    stages: list[StageStatus] = []
    for w in slo.windows:
        sreader = ServerReader(server, slo.target, w, now) if server is not None else None
        if slo.source == "server" and sreader is not None:
            status, objs = _server_window(slo, sreader, w)
            windows.append(status)
            objectives += objs
            stages += breakdown(slo, None, sreader, w, "")
            continue
        for segment, pw in sorted((probe or {}).items()):
            view = pw.view(w, now)
            covered = (probe or {}).get("", pw).covered(w, now)  # segments share the SLO's observed span
            windows.append(_probe_counts(slo, view, w, segment, covered))
            objectives += _probe_objectives(slo, view, w, segment)
            stages += breakdown(slo, view, sreader if not segment else None, w, segment)
    budget = next((s.burn_rate for s in windows if s.window == slo.window and not s.segment), None)
    return SLOStatus(slo, now, budget_objective(slo), budget_sli(slo), tuple(windows), tuple(objectives),
                     tuple(stages), None if budget is None else 1.0 - budget, _worst_stage(stages))
