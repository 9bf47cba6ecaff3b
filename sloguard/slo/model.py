"""The internal SLO model: what the live evaluator and the rule generator both read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from sloguard.config.burnwindows import windows_for
from sloguard.config.guard import budget_p95
from sloguard.config.spec import Config, SLOSpec
from sloguard.model import ProbeResult

Source = Literal["probe", "server"]
SLI = Literal["availability", "latency"]
StageSource = Literal["probe", "server", "request"]  # request: measured per request (sloguard.traces)

# The implicit availability objective of an SLO that sets neither `error_rate` nor `goodput`.
DEFAULT_SUCCESS_OBJECTIVE = 0.99


@dataclass(frozen=True, slots=True)
class Objective:
    """One latency objective: the `percentile`th percentile of `metric` stays at or below `threshold`."""

    metric: str
    percentile: float  # 0 < percentile < 100
    threshold: float  # seconds

    @property
    def quantile(self) -> float:
        """Return the percentile as a quantile in 0..1 (95 -> 0.95)."""
        return self.percentile / 100.0


@dataclass(frozen=True, slots=True)
class Goodput:
    """Per-request thresholds (seconds; None = not judged) and the share of requests that must be good."""

    target: float
    ttft: float | None = None
    tpot: float | None = None
    e2e: float | None = None
    itl: float | None = None

    def thresholds(self) -> tuple[tuple[str, float], ...]:
        """Return the set thresholds as (metric, seconds) pairs, in a fixed order."""
        pairs = (("ttft", self.ttft), ("tpot", self.tpot), ("e2e", self.e2e), ("itl", self.itl))
        return tuple((m, t) for m, t in pairs if t is not None)


@dataclass(frozen=True)
class SLO:
    """One SLO as evaluated: objectives, goodput, error objective, stage budgets and its windows."""

    name: str
    target: str
    source: Source = "probe"
    probe: str | None = None
    objectives: tuple[Objective, ...] = ()
    goodput: Goodput | None = None
    error_objective: float | None = None  # success-ratio target, e.g. 0.999
    window: float = 28 * 86400.0
    budgets: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    segment_by: str | None = None
    windows: tuple[float, ...] = ()
    runbook_url: str | None = None
    dashboard_url: str | None = None
    probe_rate: float | None = None  # requests/s the matching probes' schedules send (None: unknown)

    def __post_init__(self) -> None:
        if not self.windows:
            object.__setattr__(self, "windows", windows_for(self.window))

    @property
    def key(self) -> tuple[object, ...]:
        """Return what decides the contents of the SLO's probe windows (kept across a reload iff equal).

        Name, target, probe, source, goodput (the stored good flags), objectives (the stored miss flags),
        window (how far back rows are kept) and segment_by. Budgets, error_rate and the probe rate are read
        at evaluation, so changing only those keeps the windows as they are.
        """
        return (self.name, self.target, self.probe, self.source, self.goodput, self.objectives, self.window,
                self.segment_by)


# Goodput criterion -> ProbeResult field; ITL is judged on the request's p99 gap.
GOODPUT_FIELDS: Mapping[str, str] = {"ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s", "itl": "itl_p99_s"}
SKIPPED_WHEN_UNDEFINED = frozenset({"tpot", "itl"})  # undefined for ≤1 output token


def is_good(result: ProbeResult, goodput: Goodput | None) -> bool:
    """Return whether a request succeeded and met every goodput threshold.

    TPOT and ITL are undefined for ≤1 output token: that criterion is skipped for the request. An
    `empty` answer (only the end-of-sequence token: a success with E2E and no TTFT) skips TTFT too. A
    succeeded request without E2E fails the criteria it lacks.
    """
    if not result.ok:
        return False
    empty = result.ttft_s is None and result.e2e_s is not None
    for metric, threshold in goodput.thresholds() if goodput is not None else ():
        value = getattr(result, GOODPUT_FIELDS[metric])
        if value is None and (metric in SKIPPED_WHEN_UNDEFINED or (empty and metric == "ttft")):
            continue
        if value is None or value > threshold:
            return False
    return True


_OBJECTIVE_FIELDS = {**GOODPUT_FIELDS, "ttfot": "ttfot_s"}


def missed_slo(r: ProbeResult, slos: Sequence[SLO]) -> bool:
    """Return True if a request missed a goodput threshold or exceeded an objective threshold of its SLOs."""
    for s in slos:
        if s.source != "probe" or s.target != r.target or (s.probe is not None and s.probe != r.probe):
            continue
        if s.goodput is not None and not is_good(r, s.goodput):
            return True
        for o in s.objectives:
            attr = _OBJECTIVE_FIELDS.get(o.metric)
            value = getattr(r, attr) if attr else None
            if value is not None and value > o.threshold:
                return True
    return False


@dataclass(frozen=True, slots=True)
class Indicator:
    """One error budget of an SLO: what spends it (`sli`) and the good ratio it is measured against.

    availability: failed requests spend it; latency: requests that are not good (goodput block; a failed
    request is never good) or, per objective, requests missing that objective's threshold (censored ones
    included: a request that ended before the metric's event is a miss). `implicit`: the availability
    budget sloguard adds against DEFAULT_SUCCESS_OBJECTIVE when neither error_rate nor goodput is set.
    """

    sli: SLI
    objective: float
    metric: str | None = None  # per-objective latency budgets only
    percentile: float | None = None
    threshold: float | None = None
    implicit: bool = False

    @property
    def allowed(self) -> float:
        """Return the allowed bad ratio, 1 − objective."""
        return 1.0 - self.objective

    def labels(self) -> dict[str, str]:
        """Return the labels that name this budget in every exported series and alert.

        A per-objective budget adds `metric` and `percentile` (95, not 0.95: promtool reserves the
        `quantile` label for summaries, and these series are gauges and counters).
        """
        if self.metric is None or self.percentile is None:
            return {"sli": self.sli}
        return {"sli": self.sli, "metric": self.metric, "percentile": f"{self.percentile:g}"}


def indicators(slo: SLO) -> tuple[Indicator, ...]:
    """Return the SLO's budgets, availability first (README "Exact definitions").

    Probe SLOs: `error_rate` gives availability; `goodput` gives one latency budget (target = goodput
    target); without goodput, each objective "p-th percentile of m ≤ T" is a latency budget of its own
    (objective p/100: at most 1 − p/100 of the requests may miss T). Neither error_rate nor goodput: the
    implicit availability budget (DEFAULT_SUCCESS_OBJECTIVE), so failures always reach a budget and a page.
    Server SLOs: one latency budget per objective (engine histograms; aborted requests count as misses).
    """
    per_objective = tuple(Indicator("latency", o.quantile, o.metric, o.percentile, o.threshold)
                          for o in slo.objectives)
    if slo.source == "server":
        return per_objective
    out: list[Indicator] = []
    if slo.error_objective is not None:
        out.append(Indicator("availability", slo.error_objective))
    elif slo.goodput is None:
        out.append(Indicator("availability", DEFAULT_SUCCESS_OBJECTIVE, implicit=True))
    if slo.goodput is not None:
        out.append(Indicator("latency", slo.goodput.target))
    else:
        out.extend(per_objective)
    return tuple(out)


def slo_from_spec(spec: SLOSpec, probe_rate: float | None = None) -> SLO:
    """Return the internal SLO for one config entry (`probe_rate`: requests/s its probes schedule)."""
    gp = spec.goodput
    return SLO(
        name=spec.name,
        target=spec.target,
        source=spec.source,
        probe=spec.probe,
        objectives=tuple(Objective(o.metric, o.percentile, o.threshold) for o in spec.objectives),
        goodput=None if gp is None else Goodput(gp.target, gp.ttft, gp.tpot, gp.e2e, gp.itl),
        error_objective=None if spec.error_rate is None else spec.error_rate.target,
        window=spec.error_budget_window,
        budgets=MappingProxyType({str(k): budget_p95(v) for k, v in spec.budgets.items()}),
        segment_by=spec.segment_by,
        windows=windows_for(spec.error_budget_window),
        runbook_url=spec.runbook_url,
        dashboard_url=spec.dashboard_url,
        probe_rate=probe_rate if spec.source == "probe" else None,
    )


def scheduled_rate(cfg: Config, spec: SLOSpec) -> float | None:
    """Return the requests/s the probes feeding a probe SLO send (1 / interval each); None without probes.

    Guardrail checks (kind abort, oversized_prompt) are not user requests and feed no SLO.
    """
    rate = sum(1.0 / p.interval for p in cfg.probes if p.kind == "latency"
               and p.target == spec.target and (spec.probe is None or p.name == spec.probe))
    return rate or None


def slos_from_config(cfg: Config) -> tuple[SLO, ...]:
    """Return the internal SLOs of a config, in config order."""
    return tuple(slo_from_spec(s, scheduled_rate(cfg, s)) for s in cfg.slos)
