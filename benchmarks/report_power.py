"""False-positive rate and power of `sloguard report`, from the simulator's own latency model (no wall clock).

Requests come from the simulator's engine run in virtual time (`sloguard.sim.virtual`: the same
continuous-batching model, background load and seeded draws as `sloguard sim`), written as bench results
records (`sloguard.sim.benchfile`) and read by the report's own reader, so the whole report path is what
is measured. A true regression is the same server with every step 10 % slower and the background
arrivals 10 % sparser: every latency distribution is exactly 1.1 × the baseline's (so p95 TTFT is +10 %).

Scenarios:
- probe-idle: probe-like requests on a server with no other traffic (the example config's prompt mix).
- probe: the same with the simulator's default background load (2 requests/s, long prompts among them).
  Probes run 30 s apart, far beyond the server's memory, so each side draws its requests independently
  from a large population simulated once per release.
- bench-c8: closed-loop bench runs at concurrency 8 on a server with no other traffic (a load test
  controls the load), each side its own run, so the dependence between requests of a run is in the data.
- bench-c8-shared: the same beside the default background load. Which other traffic a run happened to
  meet is a run-level effect that no resampling of one run's requests can see; this row shows the
  false-positive rate that leaves (repeat the run, or bench on a server of your own).
For each (scenario, size): --pairs A/A pairs (two independent draws of the same release) and --pairs
pairs with the true 10 % regression; printed: how often the report's verdict is `regression` (A/A: the
false-positive rate; the goal is ≤ 5 %) and how often the p95 TTFT cell is (goal ≥ 95 %).

    .venv/bin/python benchmarks/report_power.py                      # the defaults (~10 min on 2 cores)
    .venv/bin/python benchmarks/report_power.py --scenario probe --sizes 5000,20000 --pairs 100
"""

from __future__ import annotations

import argparse
import os
import random
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from sloguard.bench.header import digest
from sloguard.bench.judge import wilson
from sloguard.reports.bench import side_from_records
from sloguard.reports.cells import overall
from sloguard.reports.regression import Settings, compare
from sloguard.reports.report import DEFAULT_REQUESTS
from sloguard.sim.benchfile import closed_run, end_row, header, spaced_run

SCALE = 1.1
PROBE_INTERVAL_S = 30.0  # ProbeSpec.interval's default
SCENARIOS = ("probe-idle", "probe", "bench-c8", "bench-c8-shared")
POPULATION = 100_000
_population: dict[tuple[str, float], list[dict[str, Any]]] = {}  # (scenario, scale) -> the run's records


def _population_of(scenario: str, scale: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Return the request rows and the stage row of a release's probe population (simulated once)."""
    key = (scenario, scale)
    if key not in _population:
        bg = 0.0 if scenario == "probe-idle" else 2.0
        # the same seed at both scales: the slower population is exactly 1.1 x the other, request by request
        rows = spaced_run(0 if bg else 7, POPULATION, time_scale=scale, background_rps=bg)
        _population[key] = rows
    rows = _population[key]
    return [r for r in rows if r["type"] == "request"], next(r for r in rows if r["type"] == "stage")


def _one_workload(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give a run the workload identity (seed 0) every run of the benchmark shares: its own seed only
    decides which requests the simulator's draws make, so both sides stay comparable by workload_digest."""
    head = records[0]
    head["workload"]["seed"] = 0
    head["workload_digest"] = digest(head["workload"], head["load"])
    return records


def _probe_side(scenario: str, scale: float, n: int, seed: int, role: str) -> Any:
    rng = random.Random(seed)
    pop, stage = _population_of(scenario, scale)
    rows = [dict(pop[rng.randrange(len(pop))], seq=i) for i in range(n)]
    rows.sort(key=lambda r: r["ts"])
    # the stage row is the population's (reports read only its load level and status from it)
    records = _one_workload([header(0, "rate", [stage["load"]], {}, 64), *rows, stage, end_row(1)])
    return side_from_records(records, role, f"{scenario}:{seed}")


def _bench_side(scale: float, n: int, seed: int, role: str, background: float) -> Any:
    records = _one_workload(closed_run(seed, [8], n, time_scale=scale, background_rps=background))
    return side_from_records(records, role, f"bench:{seed}")


def one_pair(args: tuple[str, int, float, int]) -> tuple[str, bool]:
    """Return (report verdict, p95 TTFT flagged as a regression) of one seeded pair."""
    scenario, n, scale, k = args
    if scenario.startswith("bench"):
        bg = 2.0 if scenario.endswith("shared") else 0.0
        base = _bench_side(1.0, n, 10_000 + 2 * k, "baseline", bg)
        cand = _bench_side(scale, n, 10_001 + 2 * k, "candidate", bg)
    else:
        base = _probe_side(scenario, 1.0, n, 20_000 + 2 * k, "baseline")
        cand = _probe_side(scenario, scale, n, 20_001 + 2 * k, "candidate")
    cells = compare(base, cand, Settings(seed=k))
    p95 = next(c for c in cells if c.metric == "ttft" and c.stat == "p95" and c.scope == "overall")
    return overall(cells), p95.verdict == "regression"


def bench_rate(n: int = 2000) -> float:
    """Return the requests/s of the bench-c8 scenario (virtual time): what a bench run of n requests takes."""
    rows = closed_run(1, [8], n, background_rps=0.0)
    return float(next(r for r in rows if r["type"] == "stage")["rps"])


def run(scenario: str, n: int, pairs: int, pool: ProcessPoolExecutor) -> dict[str, Any]:
    """Return the A/A and 10 % rows of one (scenario, size)."""
    start = time.perf_counter()
    aa = list(pool.map(one_pair, [(scenario, n, 1.0, k) for k in range(pairs)], chunksize=4))
    reg = list(pool.map(one_pair, [(scenario, n, SCALE, k) for k in range(pairs)], chunksize=4))
    return {"scenario": scenario, "n": n, "pairs": pairs,
            "aa_regression": sum(v == "regression" for v, _ in aa) / pairs,
            "aa_any": sum(v in ("regression", "improvement") for v, _ in aa) / pairs,
            "power_report": sum(v == "regression" for v, _ in reg) / pairs,
            "power_p95": sum(p for _, p in reg) / pairs, "seconds": time.perf_counter() - start}


def share(p: float, n: int) -> str:
    """Return a share with its two-sided 95 % Wilson interval, e.g. '2.0 % [0.6, 7.0]'."""
    lo, hi = wilson(p, n, 1.96)
    return f"{p:.1%} [{lo * 100:.1f}, {hi * 100:.1f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", action="append", choices=SCENARIOS, help="default: all")
    ap.add_argument("--sizes", default="", help=f"requests per side, comma list (default {DEFAULT_REQUESTS})")
    ap.add_argument("--pairs", type=int, default=100, help="pairs per row for A/A and for the 10 %% regression")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x] or [DEFAULT_REQUESTS]
    rate = bench_rate()
    print(f"default sample size: {DEFAULT_REQUESTS} requests per side; at the probe's default interval "
          f"({PROBE_INTERVAL_S:g} s) {DEFAULT_REQUESTS * PROBE_INTERVAL_S / 3600:.1f} h per side; in a bench run at "
          f"concurrency 8 on the simulator ({rate:.1f} req/s) {DEFAULT_REQUESTS / rate:.0f} s per side")
    print("| scenario | requests per side | pairs | A/A: verdict regression [95 % CI] | A/A: any flag | 10 %: "
          "verdict regression (power) | 10 %: p95 TTFT cell flagged | run time |")
    print("|---|---|---|---|---|---|---|---|")
    with ProcessPoolExecutor(args.workers) as pool:
        for scenario in args.scenario or SCENARIOS:
            for n in sizes:
                r = run(scenario, n, args.pairs, pool)
                shares = (share(r[k], r["pairs"]) for k in ("aa_regression", "aa_any", "power_report", "power_p95"))
                print(f"| {scenario} | {n} | {r['pairs']} | {' | '.join(shares)} | {r['seconds']:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
