"""Does the SLO hold at one stage's load? A statistical verdict from the stage's own sample (pure).

Every criterion is a share of requests compared with a target share:
- goodput: share of requests that succeeded and met every goodput threshold ≥ `goodput.target`;
- each latency objective "p-th percentile of M ≤ T" (used when the SLO has no goodput block): share of
  requests with M ≤ T ≥ p/100 (a failed request is a miss; a success where M is undefined, e.g. TPOT
  of a one-token answer, is not judged). The value shown is the nearest-rank percentile, which is ≤ T
  exactly when that share is ≥ p/100, so the number and the verdict never disagree;
- error_rate: share of requests that succeeded ≥ `error_rate.target`.
An SLO with `segment_by: prompt_bucket` is judged over all requests and over each prompt bucket's.

Requests under load are not independent (a queue makes neighbours alike), so the sample counts as
n_eff = n · (1 − ρ) / (1 + ρ) requests, ρ = lag-1 autocorrelation of the hit/miss sequence in send order
(clamped to [0, 0.8]: the AR(1) variance inflation). A higher lag-1 correlation is a trend, a queue
growing through the stage, whose misses are evidence of overload, not noise: the sample never counts
as fewer than n / 9 independent requests. The interval is Wilson's score interval at
z = 1.645 (one-sided 95% on each side). A criterion **holds** when its lower bound ≥ target, **breaks**
when its upper bound < target, else it is **uncertain** and leans on the point estimate. A stage holds
when every criterion holds, breaks when any breaks; otherwise it is uncertain. False-positive rate and
power of this test on seeded synthetic stages: benchmarks/bench_judge.py.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from sloguard.bench.record import RequestRecord
from sloguard.censoring import METRICS
from sloguard.config.units import format_duration
from sloguard.slo.model import SLO, Goodput, is_good

Z = 1.645  # one-sided 95%
MAX_RHO = 0.8  # beyond it the dependence is a trend (a queue growing through the stage), not noise
HOPELESS_ERROR_RATIO = 0.5  # a stage failing more than this is hopeless: higher loads are not tried
Verdict = Literal["holds", "breaks", "uncertain"]
Indicator = Callable[[RequestRecord], bool | None]  # None: this request is not judged by the criterion


@dataclass(frozen=True, slots=True)
class Criterion:
    """One share-of-requests test taken from an SLO."""

    slo: str
    name: str  # e.g. "p95 ttft <= 500ms", "goodput >= 0.95"
    kind: Literal["goodput", "objective", "success"]
    target: float  # the share that must hit
    hit: Indicator
    metric: str = ""
    quantile: float = 0.0
    threshold: float = 0.0
    segmented: bool = False  # the SLO's `segment_by: prompt_bucket`: judged per bucket too, as the daemon does


@dataclass(frozen=True, slots=True)
class CriterionResult:
    """A criterion judged over one sample."""

    criterion: Criterion
    n: int
    hits: int
    n_eff: float
    share: float | None
    low: float | None
    high: float | None
    value: float | None  # objectives: the nearest-rank percentile (inf when failures push it past every value)
    verdict: Verdict

    @property
    def margin(self) -> float:
        """Return (share − target) / (1 − target): > 0 holds, < 0 breaks; −1 = every request missed."""
        if self.share is None:
            return 0.0
        return (self.share - self.criterion.target) / (1.0 - self.criterion.target)


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict of one stage: holds / breaks / uncertain, which way it leans, and the worst criterion."""

    verdict: Verdict
    holds: bool  # the point estimate: every criterion's share ≥ its target (and not hopeless)
    margin: float  # the worst criterion's margin
    worst: str  # name of the criterion with the smallest margin ("" without criteria)
    hopeless: bool
    error_ratio: float | None
    results: tuple[CriterionResult, ...]


def _objective_hit(metric: str, threshold: float) -> Indicator:
    attr = METRICS.get(metric, "")

    def hit(rec: RequestRecord) -> bool | None:
        r = rec.result
        if not r.ok:
            return False
        if metric == "decode":
            value = None if r.e2e_s is None or r.ttft_s is None else r.e2e_s - r.ttft_s
        else:
            value = getattr(r, attr, None) if attr else None
        return None if value is None else value <= threshold
    return hit


def _good_hit(goodput: Goodput) -> Indicator:
    return lambda rec: is_good(rec.result, goodput)


def _success_hit(rec: RequestRecord) -> bool | None:
    return rec.result.ok


def _value(rec: RequestRecord, metric: str) -> float | None:
    r = rec.result
    if not r.ok:
        return math.inf
    if metric == "decode":
        return None if r.e2e_s is None or r.ttft_s is None else r.e2e_s - r.ttft_s
    attr = METRICS.get(metric, "")
    value = getattr(r, attr, None) if attr else None
    return value if isinstance(value, float) else None


def criteria_for(slos: Sequence[SLO]) -> list[Criterion]:
    """Return the criteria of probe SLOs: goodput where set, else every latency objective; plus error_rate."""
    out: list[Criterion] = []
    for slo in slos:
        if slo.source != "probe":
            continue
        seg = slo.segment_by == "prompt_bucket"
        if slo.goodput is not None:
            gp = slo.goodput
            out.append(Criterion(slo.name, f"goodput >= {gp.target:g}", "goodput", gp.target, _good_hit(gp),
                                 segmented=seg))
        else:
            for o in slo.objectives:
                if o.metric not in METRICS:
                    continue
                name = f"p{o.percentile:g} {o.metric} <= {format_duration(o.threshold)}"
                out.append(Criterion(slo.name, name, "objective", o.quantile, _objective_hit(o.metric, o.threshold),
                                     o.metric, o.quantile, o.threshold, seg))
        if slo.error_objective is not None:
            out.append(Criterion(slo.name, f"success >= {slo.error_objective:g}", "success", slo.error_objective,
                                 _success_hit, segmented=seg))
    return out


def _segments(criteria: Sequence[Criterion], records: Sequence[RequestRecord]) -> list[Criterion]:
    """Return per-prompt-bucket copies of segmented criteria, one per bucket present in the records."""
    buckets = sorted({r.result.prompt_bucket for r in records})
    out = []
    for c in criteria:
        if c.segmented:
            for b in buckets:
                out.append(dataclasses.replace(c, name=f"{c.name} [{b}]", hit=_in_bucket(c.hit, b), segmented=False))
    return out


def _in_bucket(hit: Indicator, bucket: str) -> Indicator:
    return lambda rec: hit(rec) if rec.result.prompt_bucket == bucket else None


def lag1_autocorrelation(xs: Sequence[bool]) -> float:
    """Return the lag-1 autocorrelation of a 0/1 sequence (0 for constant or too-short sequences)."""
    n = len(xs)
    if n < 3:
        return 0.0
    mean = sum(xs) / n
    var = sum((x - mean) ** 2 for x in xs)
    if var == 0:
        return 0.0
    cov = sum((xs[i] - mean) * (xs[i + 1] - mean) for i in range(n - 1))
    return cov / var


def effective_n(n: int, rho: float) -> float:
    """Return the AR(1) effective sample size n · (1 − ρ) / (1 + ρ), ρ clamped to [0, MAX_RHO]."""
    rho = min(max(rho, 0.0), MAX_RHO)
    return n * (1.0 - rho) / (1.0 + rho)


def wilson(share: float, n: float, z: float = Z) -> tuple[float, float]:
    """Return Wilson's score interval for a share observed over n (possibly fractional) trials."""
    if n <= 0:
        return 0.0, 1.0
    denom = 1.0 + z * z / n
    centre = (share + z * z / (2 * n)) / denom
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def nearest_rank(values: Sequence[float], q: float) -> float | None:
    """Return the nearest-rank q-quantile (the ceil(q·n)-th smallest value), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def judge_criterion(c: Criterion, records: Sequence[RequestRecord]) -> CriterionResult:
    """Judge one criterion over records in send order."""
    judged = [(r, h) for r in records if (h := c.hit(r)) is not None]
    hits = [h for _, h in judged]
    n, k = len(hits), sum(hits)
    value = None
    if c.kind == "objective":
        value = nearest_rank([v for r, _ in judged if (v := _value(r, c.metric)) is not None], c.quantile)
    if n == 0:
        return CriterionResult(c, 0, 0, 0.0, None, None, None, value, "uncertain")
    share = k / n
    n_eff = effective_n(n, lag1_autocorrelation(hits))
    low, high = wilson(share, n_eff)
    verdict: Verdict = "holds" if low >= c.target else "breaks" if high < c.target else "uncertain"
    return CriterionResult(c, n, k, n_eff, share, low, high, value, verdict)


def judge(criteria: Sequence[Criterion], records: Sequence[RequestRecord]) -> Judgement:
    """Judge a stage; a stage with more than HOPELESS_ERROR_RATIO failed requests breaks whatever else."""
    ordered = sorted(records, key=lambda r: (r.scheduled_s, r.seq))
    results = tuple(judge_criterion(c, ordered) for c in (*criteria, *_segments(criteria, ordered)))
    errors = sum(1 for r in ordered if not r.result.ok)
    error_ratio = errors / len(ordered) if ordered else None
    hopeless = error_ratio is not None and error_ratio > HOPELESS_ERROR_RATIO
    worst = min(results, key=lambda r: r.margin, default=None)
    margin = worst.margin if worst is not None else 0.0
    point = all(r.share is not None and r.share >= r.criterion.target for r in results)
    if hopeless or any(r.verdict == "breaks" for r in results):
        verdict: Verdict = "breaks"
    elif results and all(r.verdict == "holds" for r in results):
        verdict = "holds"
    else:
        verdict = "uncertain"
    return Judgement(verdict, point and not hopeless and bool(ordered), margin if not hopeless else min(margin, -1.0),
                     worst.criterion.name if worst is not None else "", hopeless, error_ratio, results)
