"""One comparison: point estimates, 95 % interval and p-value of a change, from bootstrap replicates.

Latency quantiles and ratios compare on the log scale (θ = log candidate − log baseline; relative
delta = e^θ − 1); error rates as a difference of shares. The standard error is the replicates'
interquartile range / 1.349, robust to the few replicates in which a quantile lands on a censored (+inf)
request; the interval is θ ± 1.96 SE and the p-value two-sided normal. Where over a quarter of the
replicates are infinite (the quantile sits among censored requests), the interval is the replicates'
2.5–97.5 percentiles and the p-value comes from how many replicates fall on each side of zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054
IQR_TO_SD = 1.3489795003921634


@dataclass(frozen=True)
class Change:
    """A change from baseline to candidate on the comparison's scale (log ratio or difference)."""

    estimate: float  # θ̂ (may be ±inf: one side's quantile is censored)
    low: float
    high: float
    p: float


def normal_p(z: float) -> float:
    """Return the two-sided p-value of a standard normal z."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def _finite_share(reps: np.ndarray) -> float:
    return float(np.isfinite(reps).mean()) if reps.size else 0.0


def change(estimate: float, reps: np.ndarray) -> Change | None:
    """Return the change and its 95 % interval and p-value; None when the replicates say nothing (all NaN)."""
    valid = reps[~np.isnan(reps)]
    if valid.size == 0 or math.isnan(estimate):
        return None
    if math.isfinite(estimate) and _finite_share(valid) >= 0.75:
        q25, q75 = np.percentile(valid, [25, 75], method="inverted_cdf")
        se = float(q75 - q25) / IQR_TO_SD
        if se > 0:
            return Change(estimate, estimate - Z95 * se, estimate + Z95 * se, normal_p(estimate / se))
    low, high = np.percentile(valid, [2.5, 97.5], method="inverted_cdf")
    below, above = int((valid <= 0).sum()), int((valid >= 0).sum())
    p = min(1.0, 2.0 * (min(below, above) + 1) / (valid.size + 1))
    if estimate == 0 and low == 0 and high == 0:
        p = 1.0
    return Change(estimate, float(low), float(high), p)


def log_ratio(cand: np.ndarray | float, base: np.ndarray | float) -> np.ndarray:
    """Return log(cand / base) with inf/inf and 0/0 as NaN (nothing can be said) and x/0 as +inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.log(cand) - np.log(base), dtype=np.float64)


def holm(ps: list[float]) -> list[float]:
    """Return Holm-adjusted p-values (family-wise error rate), in the input order."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adjusted[i] = running
    return adjusted


def needed(n: int, half_width: float, room: float) -> int:
    """Return about how many requests per side would shrink an interval's half-width to `room` (√n scaling)."""
    if room <= 0 or not math.isfinite(half_width):
        return 0
    return math.ceil(n * (half_width / room) ** 2)
