"""Benchmark burn-rate alerting at probe volumes: false pages/tickets and time to page/ticket, sloguard vs Workbook.

Seeded probe streams (no sleeping: times are numbers) at 1 probe per 1 s, 15 s, 30 s and 60 s against an
objective of 99% (allowed bad ratio p0 = 1%), evaluated every 15 s (the default evaluation_interval):
- healthy: bad ~ Bernoulli(p0) ("at the allowed ratio") and Bernoulli(p0 / 2) ("below"), each simulated
  month starting from a fresh install (empty windows); false pages / tickets are firing episodes (no row
  of that severity firing -> some firing) per 30 days;
- burns: after healthy history (p0 / 2) long enough to fill every window, bad ~ Bernoulli(B × p0) for
  B = 2, 6, 14.4, 30; time from the fault's start to the first page / ticket, median over seeds ("—": the
  median run saw none within 3 days (30d SLO) or half the SLO window (shorter SLOs)).
Two rules over the same streams: sloguard's (sloguard.slo.burnrate.plan: windows scaled to the SLO window,
burn(long) > f and burn(short) > f and bad(long) ≥ k_min) and the plain Workbook rule (what Sloth and Pyrra
generate: the Workbook table scaled proportionally to the SLO window, burn(long) > f and burn(short) > f).
The vectorised evaluation applies the live rules' exact thresholds to exact window counts (t − w, t]; a
cross-check first runs the LIVE code (SLOEngine -> exported series -> alert engine with burn_rules) over
a seeded day and requires identical firing at every evaluation.
Run: .venv/bin/python benchmarks/slo_alerting.py [--months N] [--seeds N] [--windows 1d,30d]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sloguard.alerts import engine
from sloguard.alerts.rules import burn_rules
from sloguard.clock import FakeClock
from sloguard.config.burnwindows import REFERENCE_PERIOD, WORKBOOK
from sloguard.config.units import format_duration, parse_duration
from sloguard.model import ProbeResult, Sample
from sloguard.slo.burnrate import plan
from sloguard.slo.engine import SLOEngine
from sloguard.slo.model import SLO

OBJECTIVE, P0, EVAL = 0.99, 0.01, 15.0
INTERVALS = (1.0, 15.0, 30.0, 60.0)
BURNS = (2.0, 6.0, 14.4, 30.0)
MONTH = 30 * 86400.0


@dataclass(frozen=True)
class Row:
    """One alert row as evaluated here: windows, factor and the guard's k_min (None: no guard)."""

    severity: str
    long: float
    short: float
    factor: float
    min_bad: int | None


def sloguard_rows(window: float, interval: float) -> list[Row]:
    """Return sloguard's alertable rows for an SLO window at a probe interval (the live rules' thresholds)."""
    return [Row(r.window.severity, r.window.long, r.window.short, r.window.factor, r.min_bad)
            for r in plan(window, OBJECTIVE, 1.0 / interval) if r.alertable]


def workbook_rows(window: float) -> list[Row]:
    """Return the Workbook table scaled proportionally to the SLO window, without a guard (Sloth / Pyrra)."""
    scale = window / REFERENCE_PERIOD
    return [Row(w.severity, w.long * scale, w.short * scale, w.factor, None) for w in WORKBOOK]


def _counts(bad: np.ndarray, interval: float, times: np.ndarray, w: float) -> tuple[np.ndarray, np.ndarray]:
    """Return (requests, bad) in (t − w, t] at each evaluation time; request i ends at (i + 0.5) × interval."""
    cum = np.concatenate([[0], np.cumsum(bad)])

    def upto(t: np.ndarray) -> np.ndarray:
        return np.clip(np.floor(t / interval - 0.5) + 1, 0, bad.size).astype(np.int64)

    hi, lo = upto(times), upto(times - w)
    return hi - lo, cum[hi] - cum[lo]


def firing(rows: Sequence[Row], bad: np.ndarray, interval: float, times: np.ndarray) -> dict[str, np.ndarray]:
    """Return severity -> whether any row of it fires at each evaluation time (vectorised live condition)."""
    cache: dict[float, tuple[np.ndarray, np.ndarray]] = {}
    out = {"page": np.zeros(times.size, bool), "ticket": np.zeros(times.size, bool)}
    for r in rows:
        for w in (r.long, r.short):
            if w not in cache:
                cache[w] = _counts(bad, interval, times, w)
        (nl, bl), (ns, bs) = cache[r.long], cache[r.short]
        with np.errstate(divide="ignore", invalid="ignore"):
            cond = (bl / nl / (1 - OBJECTIVE) > r.factor) & (bs / ns / (1 - OBJECTIVE) > r.factor)
        if r.min_bad is not None:
            cond &= bl >= r.min_bad
        out[r.severity] |= cond
    return out


def episodes(fire: np.ndarray) -> int:
    """Return how many times the condition went from not firing to firing."""
    return int(np.count_nonzero(fire[1:] & ~fire[:-1]) + int(fire[0]))


def false_alerts(rows: Sequence[Row], interval: float, p: float, months: int, seed: int) -> tuple[float, float]:
    """Return (pages, tickets) per 30 days of healthy operation at bad ratio p, fresh start each month."""
    rng = np.random.default_rng(seed)
    times = np.arange(EVAL, MONTH + EVAL / 2, EVAL)
    pages = tickets = 0
    for _ in range(months):
        bad = rng.random(int(MONTH / interval)) < p
        f = firing(rows, bad, interval, times)
        pages, tickets = pages + episodes(f["page"]), tickets + episodes(f["ticket"])
    return pages / months, tickets / months


def time_to_alert(rows: Sequence[Row], interval: float, burn: float, history: float, horizon: float,
                  seeds: int, seed: int) -> tuple[float | None, float | None]:
    """Return the median seconds from a fault's start to the first page and ticket (None: most never fire)."""
    rng = np.random.default_rng(seed)
    n_hist, n_fault = int(history / interval), int(horizon / interval)
    times = np.arange(history + EVAL, history + horizon + EVAL / 2, EVAL)
    found: dict[str, list[float]] = {"page": [], "ticket": []}
    for _ in range(seeds):
        bad = np.concatenate([rng.random(n_hist) < P0 / 2, rng.random(n_fault) < min(1.0, burn * P0)])
        for sev, fire in firing(rows, bad, interval, times).items():
            hits = np.flatnonzero(fire)
            found[sev].append(float(times[hits[0]] - history) if hits.size else math.inf)

    def median(xs: list[float]) -> float | None:
        m = float(np.median(xs))
        return None if math.isinf(m) else m

    return median(found["page"]), median(found["ticket"])


def _live_vs_vectorised(window: float, interval: float, hours: float, seed: int) -> int:
    """Run the live engine and the vectorised rule on one seeded stream; return evaluations compared."""
    rng = np.random.default_rng(seed)
    n = int(hours * 3600 / interval)
    p = np.where(np.arange(n) * interval > hours * 3600 / 2, 14.4 * P0, P0 / 2)  # a 14.4x burn half-way
    bad = rng.random(n) < p
    slo = SLO("bench", "t", error_objective=OBJECTIVE, window=window, probe_rate=1.0 / interval)
    base = 1_000_000.0
    live, rules, active = SLOEngine((slo,), FakeClock(base)), burn_rules(slo), {}
    times = np.arange(EVAL, hours * 3600 + EVAL / 2, EVAL)
    want = firing(sloguard_rows(window, interval), bad, interval, times)
    fed = 0
    for j, t in enumerate(times):
        upto = min(n, math.floor(t / interval - 0.5) + 1)
        live.add_probe_results(ProbeResult(ts=base + (i + 0.5) * interval, probe="p", target="t", model="m",
                                           api="chat", ok=not bad[i]) for i in range(fed, upto))
        fed = upto
        samples = [Sample(s.name, dict(s.labels), float(s.value)) for f in live.families(live.evaluate(base + t))
                   for s in f.samples]
        active, _ = engine.evaluate(rules, active, samples, base + t)
        got = {sev: any(dict(a.labels)["severity"] == sev and a.state == "firing" for a in active.values())
               for sev in ("page", "ticket")}
        if got != {sev: bool(want[sev][j]) for sev in got}:
            raise AssertionError(f"live engine and vectorised rule differ at t={t:g}s: {got}")
    return times.size


def _fmt_time(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s / 3600:.1f}h" if s >= 5400 else f"{s / 60:.1f}m" if s >= 60 else f"{s:.0f}s"


def _table(window: float, months: int, seeds: int) -> None:
    print(f"\nSLO window {format_duration(window)}, objective {OBJECTIVE:.0%}, evaluated every {EVAL:g}s; "
          f"{months} seeded months per healthy cell, median of {seeds} seeds per burn")
    head = ("probe every", "rule", "false pages/30d", "false tickets/30d", "time to page", "time to ticket")
    print(f"{head[0]:>11}  {head[1]:9}  {head[2]:>18}  {head[3]:>18}  {head[4]:>34}  {head[5]:>34}")
    print(f"{'':>11}  {'':9}  {'at p0 / p0÷2':>18}  {'at p0 / p0÷2':>18}  "
          f"{'  '.join(f'{b:g}x'.rjust(7) for b in BURNS):>34}  {'  '.join(f'{b:g}x'.rjust(7) for b in BURNS):>34}")
    history = 3 * 86400.0 if window > 86400 else 4 * 3600.0  # fills every long window
    horizon = 3 * 86400.0 if window > 86400 else window / 2  # how long a burn runs before "—"
    for interval in INTERVALS:
        for name, rows in (("sloguard", sloguard_rows(window, interval)), ("workbook", workbook_rows(window))):
            fp = [false_alerts(rows, interval, p, months, seed=7) for p in (P0, P0 / 2)]
            tt = [time_to_alert(rows, interval, b, history, horizon, seeds, seed=11) for b in BURNS]
            pages = "  ".join(_fmt_time(t[0]).rjust(7) for t in tt)
            tickets = "  ".join(_fmt_time(t[1]).rjust(7) for t in tt)
            print(f"{format_duration(interval):>11}  {name:9}  {fp[0][0]:8.2f} / {fp[1][0]:<7.2f}  "
                  f"{fp[0][1]:8.2f} / {fp[1][1]:<7.2f}  {pages:>34}  {tickets:>34}")


def main() -> None:
    """Print the cross-check and one table per SLO window."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--months", type=int, default=10, help="seeded healthy months per cell")
    ap.add_argument("--seeds", type=int, default=21, help="seeds per burn")
    ap.add_argument("--windows", default="1d,30d", help="SLO windows, comma-separated")
    args = ap.parse_args()
    start = time.perf_counter()
    checked = _live_vs_vectorised(86400.0, 15.0, hours=6.0, seed=3)
    print(f"cross-check: live engine (SLOEngine -> series -> alert engine) == vectorised rule at all {checked} "
          f"evaluations of 6 h at 1 probe / 15 s with a 14.4x burn ({time.perf_counter() - start:.0f}s)")
    for w in args.windows.split(","):
        _table(parse_duration(w), args.months, args.seeds)
    print(f"\ntotal {time.perf_counter() - start:.0f}s")


if __name__ == "__main__":
    main()
