"""When an SLO's burn rows held, computed from the daemon's stored requests: the measured truth a page is judged on.

A loaded runner can keep a cured simulator slower than the objectives calibrated before (measured: 1-5 of 60
requests a minute over a 250 ms TTFT floor at load 10, so a 6x row held again after the page had resolved). A
page that fires again, or stays, is then right about its requests; one that does so while its rows never held is
a flapping or stuck alert. The rows (windows, factor, evidence) are the config's own; the counting is this file's.
"""

from __future__ import annotations

import bisect
import itertools
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sloguard.alerts.rules import burn_groups
from sloguard.config.load import load_config_text
from sloguard.slo.model import slos_from_config

STEP_S = 0.5  # the scan's resolution: finer than the 1 s rule evaluations and the 2 s probe interval


@dataclass(frozen=True)
class Row:
    """One burn row: both windows' bad ratio above factor x allowed, and at least `min_bad` bad in the long one."""

    long: float
    short: float
    limit: float  # factor x allowed
    min_bad: int
    metric: str | None  # a per-objective budget's metric, else None (goodput: every limit)
    threshold: float | None


def burn_rows(config_text: str) -> dict[tuple[str, str, str], list[Row]]:
    """Return each (slo, sli, severity)'s rows, from the config the daemon runs."""
    out: dict[tuple[str, str, str], list[Row]] = {}
    for slo in slos_from_config(load_config_text(config_text)):
        for sli, severity, rows in burn_groups(slo):
            out[(slo.name, sli, severity)] = [Row(r.window.long, r.window.short, r.window.factor * r.allowed,
                                            max(r.min_bad or 1, 1), ind.metric, ind.threshold) for ind, r in rows]
    return out


class Requests:
    """One target's stored probe results in time order, with which were bad for an SLI."""

    def __init__(self, store: Path, target: str) -> None:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30) as db:
            self.rows = db.execute("SELECT ts, ok, ttft_s, tpot_s FROM probe_results WHERE target = ? ORDER BY ts",
                                   (target,)).fetchall()
        self.ts = [r[0] for r in self.rows]

    def _bad(self, sli: str, row: Row, limits: dict[str, float]) -> list[bool]:
        def slow(ttft: float | None, tpot: float | None) -> bool:
            got = {"ttft": ttft, "tpot": tpot}
            if row.metric is not None:
                return (got.get(row.metric) or 0.0) > (row.threshold or float("inf"))
            return any((got[m] or 0.0) > limits[m] for m in limits)
        return [not ok or (sli != "availability" and slow(tt, tp)) for _, ok, tt, tp in self.rows]

    def held(self, sli: str, rows: list[Row], limits: dict[str, float], start: float, end: float) -> float | None:
        """Return the first time in [start, end] at which any row held for `sli`, else None."""
        return next(self._holding(sli, rows, limits, start, end), None)

    def held_for(self, sli: str, rows: list[Row], limits: dict[str, float], start: float, end: float) -> float:
        """Return for how many seconds of [start, end] any row held for `sli` (to STEP_S)."""
        return sum(1 for _ in self._holding(sli, rows, limits, start, end)) * STEP_S

    def _holding(self, sli: str, rows: list[Row], limits: dict[str, float], start: float,
                 end: float) -> Iterator[float]:
        """Yield each scan time in [start, end] (STEP_S apart) at which any row held for `sli`."""
        cums = [(row, list(itertools.accumulate(self._bad(sli, row, limits), initial=0))) for row in rows]
        t = start
        while t <= end:
            if any(self._holds(row, cum, t) for row, cum in cums):
                yield t
            t += STEP_S

    def _holds(self, row: Row, cum: list[int], t: float) -> bool:
        hi = bisect.bisect_right(self.ts, t)
        lo_long, lo_short = bisect.bisect_right(self.ts, t - row.long), bisect.bisect_right(self.ts, t - row.short)
        n_long, n_short = hi - lo_long, hi - lo_short
        bad_long, bad_short = cum[hi] - cum[lo_long], cum[hi] - cum[lo_short]
        return (n_short > 0 and bad_long >= row.min_bad and bad_long > row.limit * n_long
                and bad_short > row.limit * n_short)
