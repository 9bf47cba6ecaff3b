"""Value types of the diagnosis: what goes in (breaches, stage readings, signals, baselines), what comes out."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Protocol

from sloguard.model import Histogram, ServerView

Stage = Literal["network", "queue", "prefill", "decode", "none"]
# The closed set of causes (docs/diagnosis.md); "none" = no objective breached, "unknown" = breached but
# the evidence does not name a cause (the verdict says what was missing).
Cause = Literal["capacity", "kv_cache_pressure", "long_prompts", "gpu_throttled", "gpu_unhealthy",
                "serving_cpu_bound", "engine_restart", "network", "replica_outlier", "unknown", "none"]
CAUSES: tuple[str, ...] = ("capacity", "kv_cache_pressure", "long_prompts", "gpu_throttled", "gpu_unhealthy",
                           "serving_cpu_bound", "engine_restart", "network", "replica_outlier", "unknown", "none")
STAGES: tuple[str, ...] = ("network", "queue", "prefill", "decode")
_EMPTY: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Breach:
    """One objective the SLO misses: `metric` quantile `value` over the diagnosis window against `threshold` (s).

    `recent` False: it misses over the SLO's shortest window but not over the diagnosis window (a shorter one),
    so `value` is at or under the threshold: the breach is easing, or comes and goes.
    """

    metric: str
    quantile: float
    value: float
    threshold: float
    censored: bool = False  # value is a lower bound at or under the threshold: requests cut short could exceed it
    recent: bool = True

    @property
    def severity(self) -> float:
        """Return how far over its threshold the objective is (value / threshold)."""
        return self.value / self.threshold if self.threshold > 0 else float("inf")


@dataclass(frozen=True, slots=True)
class Reading:
    """One stage (or whole) over the diagnosis window at one quantile, with its interval and its baseline.

    `lo`/`hi`: the interval the true quantile lies in (equal for per-request quantiles); `source`: request
    (measured from the server's record), probe (measured by the probe), server (engine histogram, bounded).
    `baseline`: the median of this reading over recent healthy evaluations; None until enough exist.
    `uncovered`: for a whole, the share of its requests that have no per-request stages (cut short before the
    server's record or the event); its tail may consist of them alone (inputs.gaps).
    """

    stage: str
    value: float
    lo: float
    hi: float
    source: str
    baseline: float | None = None
    budget: float | None = None
    uncovered: float = 0.0
    vs_objective: bool = False  # `budget` holds the breached objective: no baseline learned (engine.locate)

    @property
    def excess(self) -> float | None:
        """Return seconds above the baseline (else above the budget); None with neither; never below 0."""
        ref = self.baseline if self.baseline is not None else self.budget
        return None if ref is None else max(0.0, self.value - ref)


@dataclass(frozen=True)
class Inputs:
    """Everything one verdict is decided from; `signals` holds only what is available (absent = not available)."""

    slo: str
    now: float
    window: float
    breaches: tuple[Breach, ...]
    readings: Mapping[str, Reading]  # stage or whole name (ttft, e2e, tpot, ...) -> reading at the breach quantile
    signals: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    baselines: Mapping[str, float] = field(default_factory=lambda: _EMPTY)  # signal -> healthy baseline
    notes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # signal -> detail text


@dataclass(frozen=True, slots=True)
class Evidence:
    """One signal with its value and what it was compared with; value None = not available."""

    signal: str
    value: float | None
    compared: str
    holds: bool
    detail: str = ""


@dataclass(frozen=True)
class Verdict:
    """Where the time goes and why, for one SLO at one evaluation."""

    slo: str
    at: float
    stage: Stage
    cause: Cause
    confidence: float
    evidence: tuple[Evidence, ...] = ()
    lever: str = ""
    missing: tuple[str, ...] = ()
    breach: Breach | None = None
    share: float | None = None  # share of the whole's increase the stage explains

    @property
    def healthy(self) -> bool:
        """Return True when no objective was breached (cause none)."""
        return self.cause == "none"


class ServerLike(Protocol):
    """What the diagnosis reads of the server windows (sloguard.windows.server.ServerWindows)."""

    def increase(self, target: str, names: Collection[str], window: float, now: float) -> tuple[float, float] | None:
        """Return (summed counter increase, span) in the window, or None."""
        ...

    def counter_names(self, target: str) -> set[str]:
        """Return the counter names a target has reported."""
        ...

    def latest(self, target: str) -> ServerView | None:
        """Return the target's newest scrape."""
        ...

    def restarts(self) -> dict[str, int]:
        """Return engine restarts seen per target."""
        ...

    def histogram(self, target: str, model: str | None, signal: str, window: float, now: float) -> Histogram | None:
        """Return the window's histogram delta of a target's signal (all models when model is None)."""
        ...

    def span(self, target: str, signal: str, window: float, now: float) -> float:
        """Return the seconds the window's delta of a target's signal spans (0 if none)."""
        ...
