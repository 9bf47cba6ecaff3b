"""The internal SLO model: what the live evaluator and the rule generator both read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from sloguard.config.spec import Config, SLOSpec
from sloguard.model import ProbeResult
from sloguard.slo.burnrate import windows_for

Source = Literal["probe", "server"]
StageSource = Literal["probe", "server", "request"]  # request: measured per request (sloguard.traces)
BudgetSLI = Literal["goodput", "success", "objectives"]

# Used only when an SLO sets neither `error_rate` nor `goodput`: 99% of requests must succeed.
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

    def __post_init__(self) -> None:
        if not self.windows:
            object.__setattr__(self, "windows", windows_for(self.window))

    @property
    def key(self) -> tuple[object, ...]:
        """Return what decides the contents of the SLO's probe windows (kept across a reload iff equal).

        Name, target, probe, source, goodput (the stored good flags), window (how far back rows are kept)
        and segment_by. Objectives, budgets and error_rate are read at evaluation from rows that keep both
        the ok and good flags, so changing only those keeps the windows as they are.
        """
        return (self.name, self.target, self.probe, self.source, self.goodput, self.window, self.segment_by)


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


def budget_sli(slo: SLO) -> BudgetSLI:
    """Return what spends the error budget: not-good requests (goodput), failed ones (success) or objectives.

    Server SLOs: observations above each objective's threshold, beyond its 1 − percentile/100 allowance
    (sloguard.slo.evaluate). Probe SLOs: an explicit `error_rate` wins; else a `goodput` block makes every
    request that fails or misses a goodput threshold spend budget; with neither, failures spend it
    against DEFAULT_SUCCESS_OBJECTIVE.
    """
    if slo.source == "server":
        return "objectives"
    if slo.error_objective is None and slo.goodput is not None:
        return "goodput"
    return "success"


def budget_objective(slo: SLO) -> float:
    """Return the good-ratio the error budget is measured against (burn rate = bad ratio / (1 - this)).

    Server SLOs: the strictest objective's percentile / 100 (see budget_sli).
    """
    if slo.source == "server" and slo.objectives:
        return max(o.quantile for o in slo.objectives)
    if slo.error_objective is not None:
        return slo.error_objective
    if slo.goodput is not None:
        return slo.goodput.target
    return DEFAULT_SUCCESS_OBJECTIVE


def slo_from_spec(spec: SLOSpec) -> SLO:
    """Return the internal SLO for one config entry."""
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
        budgets=MappingProxyType({str(k): v for k, v in spec.budgets.items()}),
        segment_by=spec.segment_by,
        windows=windows_for(spec.error_budget_window),
        runbook_url=spec.runbook_url,
        dashboard_url=spec.dashboard_url,
    )


def slos_from_config(cfg: Config) -> tuple[SLO, ...]:
    """Return the internal SLOs of a config, in config order."""
    return tuple(slo_from_spec(s) for s in cfg.slos)


@dataclass(frozen=True, slots=True)
class ObjectiveStatus:
    """One objective over one window (and segment): the quantile read and whether it holds."""

    metric: str
    percentile: float
    threshold: float
    window: float
    segment: str
    value: float | None  # None = no data, never 0
    compliant: bool | None
    fraction_le: float | None = None  # server SLOs: share of observations ≤ threshold
    exact: bool = True


@dataclass(frozen=True, slots=True)
class StageStatus:
    """One stage over one window: p50/p95/p99, its budget, share of E2E and budget overrun."""

    stage: str
    window: float
    segment: str
    source: StageSource
    p50: float | None
    p95: float | None
    p99: float | None
    budget: float | None
    share: float | None  # stage p50 / e2e p50 at the same window
    overrun: float | None  # p95 / budget
    estimate: bool = False  # kept for compatibility: stages are measured per request or bounded, never mixed
    # Per p50/p95/p99, the interval the true quantile is known to lie in (server histograms: the bucket,
    # the mean bound and the whole; sloguard.windows.bounds); empty for quantiles of per-request values.
    resolution: tuple[tuple[float, float], ...] = ()
    bounded: bool = False  # a histogram's own sum or the stage's whole moved a value: it is an upper bound


@dataclass(frozen=True, slots=True)
class WindowStatus:
    """Request counts and ratios over one window (and segment); ratios None when the window is empty."""

    window: float
    segment: str
    requests: float
    good: int | None  # probe SLOs only: succeeded and met every goodput threshold
    failed: int | None
    goodput_ratio: float | None
    goodput_rate: float | None  # good requests per observed second of the window (evaluate: covered)
    error_ratio: float | None  # share of requests that spent error budget (see budget_sli)
    failure_ratio: float | None
    burn_rate: float | None
    exact: bool = True


@dataclass(frozen=True)
class SLOStatus:
    """Everything known about one SLO at `now`."""

    slo: SLO
    now: float
    objective: float
    sli: BudgetSLI
    windows: tuple[WindowStatus, ...]
    objectives: tuple[ObjectiveStatus, ...]
    stages: tuple[StageStatus, ...]
    error_budget_remaining: float | None
    worst_stage: str | None
