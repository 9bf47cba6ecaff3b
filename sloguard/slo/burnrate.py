"""Burn-rate alerting as data, shared by the live engine and rulegen: the evidence guard over the window table.

The window table (the SRE Workbook rows scaled to the SLO window) is sloguard.config.burnwindows.

Evidence guard (why: probes are few; 1 failure in 10 probes is a 10× "burn"). A row fires only when
  burn(long) > factor  and  burn(short) > factor  and  bad(long) ≥ k_min.
k_min is a one-sided binomial test of the long window's bad count against healthy operation exactly at
the allowed bad ratio p0 = 1 − objective, sized for a sliding window evaluated all the time: the long
window's count can only rise when a bad request arrives, and it reaches k from k − 1 when that request
meets k − 1 bad among the n − 1 others still in the window. So in 30 days of healthy operation with N
requests the count reaches k or more about N·p0·(1 − p0)·P(Bin(n − 1, p0) ≥ k − 1) times, and k_min is
the smallest k ≥ MIN_BAD (2) that keeps this ≤ FALSE_PER_30D (0.2) per row: a test at
α = 0.2 / (N·p0·(1 − p0)) (Bonferroni over the bad arrivals of 30 days). n = ceil(rate × long) and
N = rate × 30 d come from the probe schedule, so k_min is a constant both the live engine and the
generated Prometheus rule (`bad requests over the long window >= k_min`) compare against; using the
scheduled n (not the requests seen) keeps it conservative while a window is still filling.
Server SLOs have no schedule: their clause uses the observed count n of the long window, in a form
PromQL can express: bad ≥ max(MIN_BAD, n·p0 + Z·sqrt(n·(p0·(1 − p0)))), Z = Φ⁻¹(1 − 10⁻⁶) ≈ 4.75 (the
normal approximation at the α of ~10⁵ bad requests per 30 days; engine traffic is large where it matters).
A row cannot mean anything, and is skipped by both paths, when its factor needs a bad ratio above 100 %
(factor × p0 ≥ 1), when even an all-bad long window would not be significant (k_min > n), or when the
short window expects less than one request (it would be empty most of the time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

from sloguard.config.burnwindows import REFERENCE_PERIOD, BurnWindow, burn_windows
from sloguard.config.units import format_duration

FALSE_PER_30D = 0.2  # expected false firings per row per 30 days of healthy operation at the objective
MIN_BAD = 2  # never page or ticket on a single bad request
Z = NormalDist().inv_cdf(1.0 - 1e-6)  # server SLOs' observed-count clause


def burn_rate(error_ratio: float | None, objective: float) -> float | None:
    """Return how many times faster than sustainable the budget burns; None without data."""
    if error_ratio is None:
        return None
    return error_ratio / (1.0 - objective)


def _log_pmf(k: int, n: int, p: float) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)


def binom_tail(k: int, n: int, p: float) -> float:
    """Return P(X ≥ k) for X ~ Binomial(n, p), summed from k up with the pmf recurrence (pure Python, no scipy)."""
    if k <= 0 or p >= 1.0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    term, total, j, odds = math.exp(_log_pmf(k, n, p)), 0.0, k, p / (1.0 - p)
    while j <= n:
        total += term
        if term < total * 1e-17 and j > n * p:
            break
        term *= (n - j) / (j + 1) * odds
        j += 1
    return min(1.0, total)


def min_bad(n: int, per_30d: float, p0: float, floor: int = MIN_BAD) -> int | None:
    """Return the guard's k_min for a long window of n requests among per_30d requests per 30 days.

    The smallest k ≥ floor with per_30d·p0·(1 − p0)·P(Bin(n − 1, p0) ≥ k − 1) ≤ FALSE_PER_30D (module
    docstring); None when even k = n would fire more often than that.
    """
    if n < max(floor, 1):
        return None
    alpha = FALSE_PER_30D / max(per_30d * p0 * (1.0 - p0), 1e-300)
    k = max(floor, int((n - 1) * p0) + 1)
    tail = binom_tail(k - 1, n - 1, p0)
    while tail > alpha:
        if k >= n:
            return None
        tail -= math.exp(_log_pmf(k - 1, n - 1, p0))
        k += 1
    return k


def alpha_of(per_30d: float, p0: float) -> float:
    """Return the per-test significance level the guard uses at per_30d requests per 30 days."""
    return FALSE_PER_30D / max(per_30d * p0 * (1.0 - p0), 1e-300)


def observed_min_bad(n: float, p0: float) -> float:
    """Return the server-SLO clause's bar: max(MIN_BAD, n·p0 + Z·sqrt(n·(p0·(1 − p0)))) for n observed requests."""
    return max(float(MIN_BAD), n * p0 + Z * math.sqrt(max(0.0, n * (p0 * (1 - p0)))))  # as rulegen writes it


Meaning = Literal["ok", "one-failure", "never"]


@dataclass(frozen=True, slots=True)
class BurnRule:
    """One row for one budget: its thresholds, the guard's k_min and whether the row can mean anything.

    `min_bad` is None for server SLOs (their bar comes from the observed count: observed_min_bad).
    `meaning`: "never" (skipped by both paths), "one-failure" (the statistics alone would fire on a single
    bad request; MIN_BAD holds it at 2) or "ok". `why` says what makes it "never".
    """

    window: BurnWindow
    allowed: float  # p0 = 1 − objective
    expected_long: float | None  # requests the schedule puts in the long window (None: server SLO)
    expected_short: float | None
    min_bad: int | None
    meaning: Meaning
    why: str = ""

    @property
    def alertable(self) -> bool:
        """Return whether both paths emit this row."""
        return self.meaning != "never"

    def fires(self, burn_long: float, burn_short: float, bad_long: float) -> bool:
        """Return the probe-SLO condition: both burns above the factor and bad(long) ≥ k_min."""
        f = self.window.factor
        return bool(burn_long > f and burn_short > f and self.min_bad is not None and bad_long >= self.min_bad)

    def smallest_burn(self) -> float | None:
        """Return the smallest sustained burn the row detects in a full long window: max(factor, k_min / (n·p0))."""
        if self.min_bad is None or not self.expected_long:
            return None
        return max(self.window.factor, self.min_bad / (self.expected_long * self.allowed))

    def time_to_fire(self, burn: float) -> float | None:
        """Return seconds from the start of a sustained `burn` (after a bad-free window) to the expected firing.

        The long window's burn grows as burn × t / long, its bad count as burn × p0 × rate × t and the short
        window's burn as burn × min(t, short) / short; None below the factor (at it: the long window, on average).
        """
        f, w = self.window.factor, self.window
        if burn < f or self.min_bad is None or not self.expected_long:
            return None
        t_count = self.min_bad * w.long / (burn * self.allowed * self.expected_long)
        return max(f * w.long / burn, f * w.short / burn, t_count)


def plan(slo_window: float, objective: float, rate: float | None) -> tuple[BurnRule, ...]:
    """Return every scaled row for one budget (objective = good ratio; rate = scheduled requests/s or None)."""
    p0 = 1.0 - objective
    out = []
    for w in burn_windows(slo_window):
        n_long = None if rate is None else math.ceil(rate * w.long - 1e-9)
        n_short = None if rate is None else rate * w.short
        per_30d = 0.0 if rate is None else rate * REFERENCE_PERIOD
        k = None if n_long is None else min_bad(n_long, per_30d, p0)
        raw = None if n_long is None else min_bad(n_long, per_30d, p0, floor=1)
        meaning: Meaning = "ok"
        why = ""
        if w.factor * p0 >= 1.0:
            meaning, why = "never", f"a {w.factor:g}x burn needs more than 100% bad at objective {objective:g}"
        elif n_long is not None and k is None:
            meaning, why = "never", f"{n_long} requests in {_fmt(w.long)} can never be significant"
        elif n_short is not None and n_short < 1.0:
            meaning, why = "never", f"the {_fmt(w.short)} short window expects {n_short:.2g} requests"
        elif raw is not None and raw <= 1:
            meaning = "one-failure"
        out.append(BurnRule(w, p0, None if n_long is None else float(n_long), n_short, k, meaning, why))
    return tuple(out)


def _fmt(seconds: float) -> str:
    return format_duration(seconds)


def objectives_burn_rate(misses: Sequence[tuple[float, float]]) -> float | None:
    """Return the fastest burn among (miss share, quantile) objectives: max(miss / (1 − quantile)); None if none."""
    return max((miss / (1.0 - q) for miss, q in misses), default=None)
