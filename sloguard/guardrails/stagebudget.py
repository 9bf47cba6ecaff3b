"""Stage-budget alerts: is a stage's p95 over its budget, with evidence the burn alerts would accept?

A budget says "p95 of this stage ≤ B": healthy operation at exactly that has 5 % of requests above B. Over
the budget's window (1h by default) the stage breaches when its p95 is above B **and** the requests above B
are significant against that healthy rate, with the guard of the burn alerts (sloguard.slo.burnrate): at
least k_min of them, k_min from the probe schedule (a one-sided binomial test Bonferroni-corrected over a
month of arrivals), or, without one, from the observed count. For per-request values (probe stages and
stages measured from the server's own record) "at least k_min above B" is "the k_min-th largest value is
above B", a quantile of the window. For stages read from engine histograms the count above B comes from the
buckets. An estimated network stage (probe TTFT − server TTFT) has no per-request values: never alerted on.

`sloguard_stage_budget_breach_ratio` = p95 / B while the evidence holds, else at most 1: its alert is
`> 1`, the same text in the live engine and the generated rules. Which series a stage reads: a stage
measured per request where the window has it (queue, prefill, network, decode excluded: decode is the
client's E2E − TTFT), else the probe's own (connect, ttft, decode, e2e), else the engine's histogram.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.metrics_core import Metric

from sloguard import histogram
from sloguard.config.guard import StageBudgetSpec, budget_spec
from sloguard.config.spec import Config
from sloguard.config.units import format_duration
from sloguard.families import declare
from sloguard.model import Histogram
from sloguard.slo.burnrate import observed_min_bad
from sloguard.slo.evaluate import scheduled_min_bad
from sloguard.slo.model import SLO

ALLOWED = 0.05  # a p95 budget: 5 % of requests may exceed it
PROBE_METRICS = {"connect": "connect", "ttft": "ttft", "decode": "decode", "e2e": "e2e"}
MEASURED = {"queue": "request_queue", "prefill": "request_prefill", "network": "request_network"}
SERVER = ("queue", "prefill", "ttft", "decode", "e2e")
BREACH = declare("sloguard_stage_budget_breach_ratio", "gauge", "Stage p95 / its budget over the budget's alert "
                 "window while enough requests exceed the budget to rule out healthy operation (the burn alerts' "
                 "guard), else at most 1; the stage-budget alert fires above 1.", ("slo", "stage", "window"))
EVIDENCE = declare("sloguard_stage_budget_evidence_ratio", "gauge", "How close the window is to the guard: the "
                   "k_min-th largest stage value / budget (per-request stages), or requests above the budget / k_min "
                   "(engine histograms); above 1 the guard holds.", ("slo", "stage", "window"))
OWNERS = declare("sloguard_stage_budget_owner_info", "gauge", "Who owns each budgeted stage (1 per stage with an "
                 "owner).", ("slo", "stage", "owner"))


class View(Protocol):
    def population(self, metric: str) -> int: ...
    def quantiles(self, metric: str, qs: Sequence[float]) -> tuple[float, ...] | None: ...


class Windows(Protocol):
    def view(self, window: float, now: float) -> View: ...


class Server(Protocol):
    def histogram(self, target: str, model: str | None, signal: str, window: float, now: float) -> Histogram | None:
        ...


@dataclass(frozen=True, slots=True)
class StageBudgetStatus:
    """One budgeted stage over its alert window: p95, the evidence and the breach ratio (None: no data)."""

    slo: str
    stage: str
    window: float
    budget: float
    source: str  # probe | request | server
    p95: float | None
    evidence: float | None  # k_min-th largest / budget (per request) or above / k_min (histogram); > 1: enough
    breach: float | None


def from_values(view: View, metric: str, budget: float, k_min: int | None) -> tuple[float | None, float | None]:
    """Return (p95, evidence ratio) of per-request values: evidence = the k_min-th largest value / budget."""
    n = view.population(metric)
    if n == 0:
        return None, None
    got = view.quantiles(metric, (0.95,))
    p95 = got[0] if got else None
    if k_min is None or n < k_min:
        return p95, 0.0
    q = 0.0 if n == 1 else min(1.0, (n - k_min + 1e-9) / (n - 1))
    top = view.quantiles(metric, (q,))
    return p95, (top[0] / budget if top else None)


def from_histogram(h: Histogram | None, budget: float) -> tuple[float | None, float | None]:
    """Return (p95, evidence ratio) of an engine histogram: requests above the budget / the observed k_min."""
    if h is None or h.count <= 0:
        return None, None
    share = histogram.fraction_le(h, budget)
    above = h.count * (1.0 - share[0]) if share is not None else 0.0
    return histogram.quantile(0.95, h), above / observed_min_bad(h.count, ALLOWED)


def breach(p95: float | None, evidence: float | None, budget: float) -> float | None:
    """Return p95 / budget while the evidence holds (> 1), else that ratio capped at 1 (never an alert)."""
    if p95 is None:
        return None
    ratio = p95 / budget
    return ratio if evidence is not None and evidence > 1.0 else min(ratio, 1.0)


def status(slo: SLO, stage: str, spec: StageBudgetSpec, probe: Windows | None, server: Server | None,
           now: float) -> StageBudgetStatus | None:
    """Return one budgeted stage's status at `now` (None when the stage has no readable series)."""
    w, b = spec.window, spec.p95
    if probe is not None and slo.source == "probe":
        view = probe.view(w, now)
        for source, metric in (("request", MEASURED.get(stage)), ("probe", PROBE_METRICS.get(stage))):
            n = view.population(metric) if metric is not None else 0
            if metric is not None and n > 0:
                k_min = (scheduled_min_bad(slo.probe_rate, w, ALLOWED) if slo.probe_rate
                         else math.ceil(observed_min_bad(n, ALLOWED)))
                p95, ev = from_values(view, metric, b, k_min)
                return StageBudgetStatus(slo.name, stage, w, b, source, p95, ev, breach(p95, ev, b))
    if server is not None and stage in SERVER:
        p95, ev = from_histogram(server.histogram(slo.target, None, stage, w, now), b)
        return StageBudgetStatus(slo.name, stage, w, b, "server", p95, ev, breach(p95, ev, b))
    return None


def budget_specs(cfg: Config) -> dict[tuple[str, str], StageBudgetSpec]:
    """Return (slo, stage) -> the budget's long form, for every budget in the config."""
    return {(s.name, str(stage)): budget_spec(v) for s in cfg.slos for stage, v in s.budgets.items()}


class StageBudgets:
    """Evaluate every budgeted stage after each SLO evaluation and export the families its alerts read."""

    def __init__(self, cfg: Config) -> None:
        self.reconfigure(cfg)
        self.statuses: list[StageBudgetStatus] = []

    def reconfigure(self, cfg: Config) -> None:
        """Adopt a config's budgets."""
        self.specs = budget_specs(cfg)

    def evaluate(self, slos: Sequence[SLO], probe: Mapping[str, Windows], server: Server | None,
                 now: float) -> list[StageBudgetStatus]:
        """Return the status of every budgeted stage; `probe` maps an SLO name to its all-requests window."""
        out = []
        for slo in slos:
            for (name, stage), spec in sorted(self.specs.items()):
                if name == slo.name and (got := status(slo, stage, spec, probe.get(name), server, now)) is not None:
                    out.append(got)
        self.statuses = out
        return out

    def families(self) -> list[Metric]:
        """Return `sloguard_stage_budget_{breach,evidence}_ratio` and the owners' info series."""
        breach_fam, evidence, owners = BREACH.gauge(), EVIDENCE.gauge(), OWNERS.gauge()
        for st in self.statuses:
            lab = [st.slo, st.stage, format_duration(st.window)]
            if st.breach is not None:
                breach_fam.add_metric(lab, st.breach)
            if st.evidence is not None:
                evidence.add_metric(lab, st.evidence)
        for (slo, stage), spec in sorted(self.specs.items()):
            if spec.owner:
                owners.add_metric([slo, stage, spec.owner], 1.0)
        return [breach_fam, evidence, owners]
