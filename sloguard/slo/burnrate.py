"""The multi-window, multi-burn-rate table (Google SRE Workbook), shared by the live engine and rulegen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

# Standard evaluation windows (seconds) kept for every SLO, plus the SLO's own error-budget window.
STANDARD_WINDOWS: tuple[float, ...] = (300.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0, 259200.0)
REFERENCE_PERIOD = 30 * 86400.0


@dataclass(frozen=True, slots=True)
class BurnWindow:
    """One alert condition: both windows burn faster than `factor` times the sustainable rate."""

    severity: Literal["page", "ticket"]
    long: float
    short: float
    budget_fraction: float  # share of the whole error budget this condition lets burn in `long`

    def factor(self, slo_window: float) -> float:
        """Return the burn-rate threshold for an SLO window: budget_fraction × window / long."""
        return self.budget_fraction * slo_window / self.long

    def alertable(self, slo_window: float) -> bool:
        """Return whether the row means something for this SLO window: its factor is at least 1×.

        Below 1× the condition fires while the budget is not even on course to be spent within the SLO
        window (a 1d window gives 0.48×, 0.2×, 0.1× and 0.033×), so alert rules should skip such rows
        rather than configs being rejected. The live engine still exports burn rates for every window.
        """
        return self.factor(slo_window) >= 1.0


# 2% of a 30d budget in 1h = 14.4×, 5% in 6h = 6×, 10% in 1d = 3×, 10% in 3d = 1×.
BURN_WINDOWS: tuple[BurnWindow, ...] = (
    BurnWindow("page", 3600.0, 300.0, 0.02),
    BurnWindow("page", 21600.0, 1800.0, 0.05),
    BurnWindow("ticket", 86400.0, 7200.0, 0.10),
    BurnWindow("ticket", 259200.0, 21600.0, 0.10),
)


def burn_rate(error_ratio: float | None, objective: float) -> float | None:
    """Return how many times faster than sustainable the budget burns; None without data."""
    if error_ratio is None:
        return None
    return error_ratio / (1.0 - objective)


def objectives_burn_rate(misses: Sequence[tuple[float, float]]) -> float | None:
    """Return the fastest burn among (miss share, quantile) objectives: max(miss / (1 − quantile)); None if none.

    Server SLOs: an objective "p95 ≤ T" allows 5% of observations above T, so a miss share m burns m / 0.05.
    """
    return max((miss / (1.0 - q) for miss, q in misses), default=None)


def windows_for(slo_window: float) -> tuple[float, ...]:
    """Return the sorted evaluation windows for an SLO: the standard ones plus its own window."""
    return tuple(sorted({*STANDARD_WINDOWS, slo_window}))
