"""The burn-rate window table: which windows an SLO with `error_budget_window` W alerts and is evaluated over.

The Google SRE Workbook rows for a 30-day SLO (page 1h/5m at 14.4×, 6h/30m at 6×; ticket 1d/2h at 3×, 3d/6h
at 1×) are scaled to the SLO window W: each long and short window is multiplied by W / 30 d and snapped to the
nearest NICE duration (log scale), no long window is shorter than MIN_LONG (5 min) or longer than W, no short
window is shorter than MIN_SHORT (1 min) or longer than its long window, and the factors stay as they are (a
factor is "times faster than sustainable": ≥ 1× by construction). Rows of one severity that end up with the
same windows keep the lowest factor. 28 d and 30 d get the Workbook table itself; 1 d gets page 5m/1m 14.4×,
10m/1m 6×, ticket 1h/5m 3×, 2h/10m 1×.

The SLO windows, the live alert engine and rulegen (through sloguard.slo.burnrate's evidence guard) and
`sloguard check` (the `window` label values an alert may select) all read this one table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

# Standard evaluation windows (seconds) kept for every SLO, plus the SLO's own and its burn windows.
STANDARD_WINDOWS: tuple[float, ...] = (300.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0, 259200.0)
REFERENCE_PERIOD = 30 * 86400.0
MIN_LONG, MIN_SHORT = 300.0, 60.0
_M, _H, _D = 60.0, 3600.0, 86400.0
NICE: tuple[float, ...] = (1 * _M, 2 * _M, 5 * _M, 10 * _M, 15 * _M, 30 * _M, _H, 2 * _H, 3 * _H, 6 * _H, 12 * _H,
                           _D, 2 * _D, 3 * _D, 7 * _D, 14 * _D, 30 * _D)
Severity = Literal["page", "ticket"]


@dataclass(frozen=True, slots=True)
class BurnWindow:
    """One alert condition: both windows burn faster than `factor` times the sustainable rate."""

    severity: Severity
    long: float
    short: float
    factor: float

    def budget_fraction(self, slo_window: float) -> float:
        """Return the share of the whole budget spent in `long` at exactly `factor`: factor × long / window."""
        return self.factor * self.long / slo_window


# 2% of a 30d budget in 1h = 14.4×, 5% in 6h = 6×, 10% in 1d = 3×, 10% in 3d = 1×.
WORKBOOK: tuple[BurnWindow, ...] = (
    BurnWindow("page", 3600.0, 300.0, 14.4),
    BurnWindow("page", 21600.0, 1800.0, 6.0),
    BurnWindow("ticket", 86400.0, 7200.0, 3.0),
    BurnWindow("ticket", 259200.0, 21600.0, 1.0),
)


def _nice(seconds: float) -> float:
    return min(NICE, key=lambda n: abs(math.log(n / seconds)))


def burn_windows(slo_window: float) -> tuple[BurnWindow, ...]:
    """Return the Workbook rows scaled to an SLO window (module docstring); page rows first."""
    scale = slo_window / REFERENCE_PERIOD
    rows: dict[tuple[str, float, float], BurnWindow] = {}
    for row in WORKBOOK:
        long = min(slo_window, max(MIN_LONG, _nice(row.long * scale)))
        short = min(long, max(MIN_SHORT, _nice(row.short * scale)))
        key = (row.severity, long, short)
        if key not in rows or rows[key].factor > row.factor:
            rows[key] = BurnWindow(row.severity, long, short, row.factor)
    return tuple(sorted(rows.values(), key=lambda r: (r.severity != "page", r.long, r.short)))


def windows_for(slo_window: float) -> tuple[float, ...]:
    """Return the sorted evaluation windows: the standard ones, the SLO's own and its burn rows' windows."""
    rows = burn_windows(slo_window)
    return tuple(sorted({*STANDARD_WINDOWS, slo_window, *(r.long for r in rows), *(r.short for r in rows)}))
