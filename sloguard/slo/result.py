"""What one evaluation of one SLO found (SLOStatus): per window, objective, stage, burn row and budget."""

from __future__ import annotations

from dataclasses import dataclass

from sloguard.slo.model import SLO, Indicator, StageSource
from sloguard.slo.replicas import ReplicaStatus


@dataclass(frozen=True, slots=True)
class ObjectiveStatus:
    """One objective over one window (and segment): the quantile read and whether it holds.

    Probe SLOs (sloguard.windows.censor): `value` puts every request that ended before the metric's event
    (`censored_count` of the window's `count`) at the time it ran, `upper` at +∞ (inf: unbounded); the
    objective holds when upper ≤ threshold. `censored`: missed only because of those requests (value ≤
    threshold < upper); a value over the threshold is missed on measured values and is not `censored`.
    """

    metric: str
    percentile: float
    threshold: float
    window: float
    segment: str
    value: float | None  # None = no data, never 0
    compliant: bool | None
    fraction_le: float | None = None  # server SLOs: share of observations ≤ threshold
    exact: bool = True
    censored: bool = False
    censored_count: int = 0
    count: int = 0
    upper: float | None = None  # None = no data; == value where nothing was cut short, or server SLOs


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
    failure_ratio: float | None
    exact: bool = True


@dataclass(frozen=True, slots=True)
class BurnStatus:
    """One budget over one window (all requests): bad count, its share, burn rate and the guard's evidence.

    `requests`: the budget's population (probe: requests with a value or a censoring for a per-objective
    budget, else all; server: histogram observations plus aborted requests). `evidence` = bad / the guard's
    minimum bad count (≥ 1: the bad count is significant, see sloguard.slo.burnrate).
    """

    indicator: Indicator
    window: float
    requests: float
    bad: float
    error_ratio: float | None
    burn_rate: float | None
    min_bad: float | None
    evidence: float | None


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """One budget over the SLO window: remaining = 1 − bad / allowed, allowed = (1 − objective) × expected.

    `expected`: requests the whole window is expected to hold (probe SLOs: the schedule, never fewer than
    seen; otherwise the observed rate extrapolated over the window). `covered`: seconds of the window the
    data spans (now − oldest data point, ≤ window), from the data itself, so a restart keeps it.
    """

    indicator: Indicator
    window: float
    remaining: float | None
    bad: float
    allowed: float | None
    expected: float | None
    covered: float

    @property
    def coverage(self) -> float:
        """Return the share of the window the data spans (0..1)."""
        return min(1.0, self.covered / self.window) if self.window > 0 else 0.0


@dataclass(frozen=True)
class SLOStatus:
    """Everything known about one SLO at `now`."""

    slo: SLO
    now: float
    windows: tuple[WindowStatus, ...]
    objectives: tuple[ObjectiveStatus, ...]
    stages: tuple[StageStatus, ...]
    budgets: tuple[BudgetStatus, ...]
    burns: tuple[BurnStatus, ...]
    worst_stage: str | None
    replicas: tuple[ReplicaStatus, ...] = ()  # a service's server SLO: each replica over the breach window
