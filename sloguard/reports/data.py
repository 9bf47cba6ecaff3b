"""What one side of a comparison holds: per-request columns (bench, store) or bucket counts (Prometheus).

Latency columns are seconds; NaN = undefined for that request (TPOT of a one-token answer, TTFT of an
`empty` answer), +inf = censored: the request failed before that metric's event, so its value is
"more than the time it ran" and ranks above every measured value (docs/reports.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

LATENCY = ("ttft", "ttfot", "tpot", "itl", "e2e")
CENSORABLE = frozenset({"ttft", "ttfot", "e2e"})  # a failed request without them ran "> elapsed"
STAGES = ("connect", "queue", "prefill", "decode", "network")
OUTCOMES = ("success", "empty", "error", "timeout")


class DataError(Exception):
    """Input that cannot be compared: the message names the path or value; the CLI exits 2."""


@dataclass(frozen=True)
class Requests:
    """Per-request columns of one side, all of length `n`."""

    latency: Mapping[str, np.ndarray]  # LATENCY -> float64
    stages: Mapping[str, np.ndarray]  # STAGES -> float64 (NaN where not measured)
    ok: np.ndarray  # bool
    outcome: np.ndarray  # str, one of OUTCOMES
    bucket: np.ndarray  # str, the prompt bucket
    stage: np.ndarray  # int, the load stage (0 outside bench runs)
    ts: np.ndarray  # float, wall-clock seconds (NaN where unknown)
    cycle: np.ndarray  # float, closed loop: scheduled -> ended (Little's law throughput); NaN elsewhere
    elapsed: np.ndarray  # float, t0 -> the request's end (success, timeout, error); NaN where unknown

    @property
    def n(self) -> int:
        """Return the number of requests."""
        return int(self.ok.shape[0])


@dataclass(frozen=True)
class LoadStage:
    """One load level of a bench run, with what its summary record says."""

    index: int
    kind: str  # "concurrency" | "rate"
    level: float
    rps: float | None = None
    ended: str = "completed"

    @property
    def label(self) -> str:
        """Return e.g. 'concurrency 8' or 'rate 2.5/s'."""
        return f"concurrency {self.level:g}" if self.kind == "concurrency" else f"rate {self.level:g}/s"


@dataclass(frozen=True)
class Histograms:
    """Bucket counts read from Prometheus: metric -> prompt bucket -> non-cumulative counts per `bounds`."""

    bounds: Mapping[str, np.ndarray]  # metric -> upper bounds, +inf last
    counts: Mapping[str, Mapping[str, np.ndarray]]
    outcomes: Mapping[str, float] = field(default_factory=dict)  # outcome -> requests
    good: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # slo -> (good, all)


@dataclass
class Side:
    """One release's data and where it came from."""

    role: str  # "baseline" | "candidate"
    kind: str  # "bench" | "store" | "prom"
    spec: str  # what was given on the command line (secrets never)
    requests: Requests | None = None
    histograms: Histograms | None = None
    stages: tuple[LoadStage, ...] = ()
    max_load: Mapping[str, Any] | None = None
    identity: dict[str, Any] = field(default_factory=dict)  # target, engine, engine_version, model, labels
    environment: dict[str, Any] = field(default_factory=dict)  # gpu, driver, sloguard, config digest, machine
    workload: dict[str, Any] = field(default_factory=dict)  # what must match to compare like with like
    slos: list[dict[str, Any]] = field(default_factory=list)  # bench header shape
    time_range: tuple[float | None, float | None] = (None, None)
    excluded: dict[str, int] = field(default_factory=dict)  # reason -> requests left out
    notes: list[str] = field(default_factory=list)

    def count(self) -> int:
        """Return how many requests this side holds (bucket counts for Prometheus)."""
        if self.requests is not None:
            return self.requests.n
        if self.histograms is not None:
            return round(sum(self.histograms.outcomes.values()))
        return 0

    def successes(self) -> int:
        """Return how many requests succeeded."""
        if self.requests is not None:
            return int(self.requests.ok.sum())
        if self.histograms is not None:
            return round(self.histograms.outcomes.get("success", 0.0))
        return 0


def column(values: Sequence[float | None]) -> np.ndarray:
    """Return a float64 array with None as NaN."""
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def censor(latency: dict[str, np.ndarray], ok: np.ndarray) -> None:
    """Mark censored values in place: a failed request without TTFT/TTFOT/E2E ran "> elapsed" (+inf)."""
    failed = ~ok
    for name in CENSORABLE:
        col = latency[name]
        col[failed & np.isnan(col)] = np.inf


def check_finite(where: str, name: str, col: np.ndarray) -> None:
    """Raise DataError naming the first negative or NaN-where-a-number-was-given value (hand-edited files)."""
    bad = np.flatnonzero(col < 0)
    if bad.size:
        raise DataError(f"{where}: {name} is negative ({col[bad[0]]:g}) in request {int(bad[0]) + 1}: a timing "
                        "cannot be below zero (hand-edited file?)")


def build_requests(rows: Sequence[Mapping[str, Any]], where: str) -> Requests:
    """Return columns from request rows holding `<metric>_s`, ok, outcome, bucket, stage, ts, cycle."""
    latency = {m: column([r.get(f"{m}_s") for r in rows]) for m in LATENCY}
    stages = {s: column([r.get(f"{s}_s") for r in rows]) for s in STAGES}
    ok = np.array([bool(r["ok"]) for r in rows], dtype=bool)
    for name, col in (*latency.items(), *stages.items()):
        check_finite(where, f"{name}_s", col)
    censor(latency, ok)
    return Requests(
        latency=latency, stages=stages, ok=ok,
        outcome=np.array([str(r["outcome"]) for r in rows], dtype=object),
        bucket=np.array([str(r.get("prompt_bucket") or "all") for r in rows], dtype=object),
        stage=np.array([int(r.get("stage", 0)) for r in rows], dtype=np.int64),
        ts=column([r.get("ts") for r in rows]), cycle=column([r.get("cycle_s") for r in rows]),
        elapsed=column([r.get("elapsed_s") for r in rows]))


def outcome_of(ok: bool, error: str | None, ttft: float | None) -> str:
    """Return success, empty (succeeded with only EOS: no TTFT), timeout or error."""
    if ok:
        return "success" if ttft is not None else "empty"
    return "timeout" if (error or "").startswith("timeout") else "error"
