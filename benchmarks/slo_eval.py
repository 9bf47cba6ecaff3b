"""Benchmark the SLO engine: insert cost per sample, evaluation time for 20 SLOs × 8 windows, memory per SLO.

Scenario: every SLO receives 1 probe result per second for `--fill` seconds (default 3d = 259,200 results,
the largest standard window), so windows ≥ 1d hold > 100k results and take the sketch path. One SLO is filled
result by result twice: once timing the inserts (tracemalloc off: it slows every allocation) and once under
tracemalloc measuring its memory; the other 19 are copies of it. Memory is also extrapolated to a full 28d
error-budget window (raw rows are capped, bucket sketches grow with the filled span).
Run: .venv/bin/python benchmarks/slo_eval.py [--fill SECONDS] [--slos N]
"""

from __future__ import annotations

import argparse
import copy
import time
import tracemalloc

import numpy as np

from sloguard.clock import FakeClock
from sloguard.model import ProbeResult
from sloguard.slo.engine import SLOEngine
from sloguard.slo.model import SLO, Goodput, Objective
from sloguard.windows.probe import ProbeWindow
from sloguard.windows.rolling import RAW_CAP

NOW = 1_800_000_000.0


def _slo(i: int) -> SLO:
    return SLO(f"slo{i}", f"t{i}", objectives=(Objective("ttft", 95, 1.0), Objective("tpot", 50, 0.1)),
               goodput=Goodput(0.99, ttft=0.5, tpot=0.1), budgets={"ttft": 0.5, "decode": 3.0})


def _results(n: int) -> list[ProbeResult]:
    rng = np.random.default_rng(0)
    ttft, tpot = rng.lognormal(-1.5, 0.6, n), rng.lognormal(-3.2, 0.3, n)
    return [ProbeResult(ts=NOW - n + i, probe="p", target="t0", model="m", api="chat", ok=i % 500 != 0,
                        ttft_s=float(ttft[i]), tpot_s=float(tpot[i]), e2e_s=float(ttft[i] + 63 * tpot[i]),
                        connect_s=0.001, itl_p99_s=float(tpot[i] * 2)) for i in range(n)]


def _full_window_estimate(pw: ProbeWindow, fill: int) -> float:
    """Return raw bytes plus bucket bytes scaled from the filled span to 28 days."""
    raw = pw.nbytes - pw.bucket_nbytes
    return raw + pw.bucket_nbytes * max(1.0, 28 * 86400 / max(fill - RAW_CAP, 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fill", type=int, default=259_200)
    ap.add_argument("--slos", type=int, default=20)
    args = ap.parse_args()
    slos = [_slo(i) for i in range(args.slos)]
    results = _results(args.fill)
    t0 = time.perf_counter()
    SLOEngine(slos, FakeClock(NOW)).add_probe_results(results)
    insert_s = time.perf_counter() - t0
    engine = SLOEngine(slos, FakeClock(NOW))
    tracemalloc.start()
    engine.add_probe_results(results)
    memory = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    template = engine.windows("slo0")
    for slo in slos[1:]:
        engine.windows(slo.name).update(copy.deepcopy(template))
    engine.evaluate(NOW)  # warm-up
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        statuses = engine.evaluate(NOW)
        runs.append(time.perf_counter() - t0)
    series = sum(len(m.samples) for m in engine.families(statuses))
    print(f"{'results per SLO (1/s)':<44}{args.fill:>14,}")
    print(f"{'insert cost per result (µs)':<44}{insert_s / args.fill * 1e6:>14.1f}")
    print(f"{'memory per SLO, windows (MiB, tracemalloc)':<44}{memory / 2**20:>14.2f}")
    print(f"{'memory per SLO, arrays (MiB, nbytes)':<44}{template[''].nbytes / 2**20:>14.2f}")
    full = _full_window_estimate(template[""], args.fill)
    print(f"{'memory per SLO at 28d filled (MiB, est.)':<44}{full / 2**20:>14.2f}")
    label = f"evaluate {args.slos} SLOs x {len(slos[0].windows)} windows (ms, best of 3)"
    print(f"{label:<44}{min(runs) * 1e3:>14.1f}")
    print(f"{'per SLO (ms)':<44}{min(runs) * 1e3 / args.slos:>14.1f}")
    print(f"{'exported series':<44}{series:>14,}")


if __name__ == "__main__":
    main()
