"""The bench's statistics on seeded synthetic stages: how often the 'SLO holds' test is wrong, how often the
max-load search lands near the truth, and how often its interval covers it.

Part 1 (sloguard.bench.judge): stages of n requests whose share under a p95 threshold is exactly known
(p), drawn independently or as a sticky chain (lag-1 correlation 0.5 or 0.8, as a queue makes neighbours
alike). For p above the target a "breaks" verdict is a false alarm; below it, "holds" is a false pass;
"uncertain" is the honest answer near the target or for small n.

Part 2 (sloguard.bench.search with the real judge): a server whose TTFT is log-normal (sigma 0.3) with
median 0.1 s / (1 - load / 10): p95 <= 0.5 s holds up to load 6.72 exactly. Each stage draws `--stage-n`
requests; the search starts at 1 (rate kind, tolerance 5%, one confirmation). Reported over seeds: the
estimate's relative error, how often [low, high] contains 6.72, and the stages spent.

Run: .venv/bin/python benchmarks/bench_judge.py [--runs 1000] [--seeds 200]   (~1 min)
"""

from __future__ import annotations

import argparse
import math
import random

import numpy as np

from sloguard.bench.judge import criteria_for, judge, judge_criterion
from sloguard.bench.record import RequestRecord
from sloguard.bench.search import SearchSpec, search
from sloguard.model import ProbeResult
from sloguard.slo.model import SLO, Objective

THRESHOLD = 0.5
SLO_P95 = SLO("lat", "sim", objectives=(Objective("ttft", 95, THRESHOLD),))
(P95,) = criteria_for([SLO_P95])
CAPACITY, SIGMA, BASE = 10.0, 0.3, 0.1
TRUTH = CAPACITY * (1 - BASE * math.exp(1.645 * SIGMA) / THRESHOLD)


def _rec(i: int, ttft: float) -> RequestRecord:
    r = ProbeResult(ts=0.0, probe="b", target="sim", model="m", api="chat", ok=True, ttft_s=ttft, e2e_s=ttft)
    return RequestRecord(0, i, 0, "normal", 16, float(i), float(i), float(i), float(i) + ttft, False, r)


def hits(rng: random.Random, n: int, p: float, rho: float) -> list[bool]:
    """A 0/1 chain with stationary share p and lag-1 correlation rho (rho = 0: independent draws)."""
    out, prev = [], rng.random() < p
    for _ in range(n):
        stay = p + rho * (1 - p) if prev else p * (1 - rho)
        prev = rng.random() < stay
        out.append(prev)
    return out


def part1(runs: int) -> None:
    print("Part 1: verdicts of a p95 objective (target share 0.95) over stages with a known share p")
    print("| n | lag-1 corr | p | holds | uncertain | breaks | wrong |\n|---|---|---|---|---|---|---|")
    for n in (50, 200, 1000):
        for rho in (0.0, 0.5, 0.8):
            for p in (0.90, 0.93, 0.95, 0.97, 0.99):
                counts = {"holds": 0, "uncertain": 0, "breaks": 0}
                for seed in range(runs):
                    rng = random.Random(f"{n}/{rho}/{p}/{seed}")
                    recs = [_rec(i, 0.1 if h else 0.9) for i, h in enumerate(hits(rng, n, p, rho))]
                    counts[judge_criterion(P95, recs).verdict] += 1
                wrong = counts["breaks"] if p >= 0.95 else counts["holds"]
                cells = (n, rho, p, *(f"{counts[k] / runs:.3f}" for k in ("holds", "uncertain", "breaks")),
                         f"{wrong / runs:.3f}")
                print("| " + " | ".join(map(str, cells)) + " |", flush=True)


def part2(seeds: int, stage_n: int) -> None:
    print(f"\nPart 2: max-load search on a synthetic queue, {stage_n} requests per stage; truth {TRUTH:.3f} req/s")
    errors, covered, stages, bounded = [], 0, [], 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)

        def measure(load: float, attempt: int, rng: np.random.Generator = rng) -> object:
            median = BASE / (1 - load / CAPACITY) if load < CAPACITY else 1e3
            ttft = rng.lognormal(math.log(median), SIGMA, stage_n)
            return judge([P95], [_rec(i, float(t)) for i, t in enumerate(ttft)])
        r = search(SearchSpec("rate", 1.0, 100.0, 1 / 64, tolerance=0.05, max_stages=16, confirm=1),
                   measure)  # type: ignore[arg-type]
        if r.estimate is not None:
            errors.append((r.estimate - TRUTH) / TRUTH)
        if r.low is not None and r.high is not None:
            bounded += 1
            covered += r.low <= TRUTH <= r.high
        stages.append(r.stages)
    err = np.abs(errors)
    print(f"estimate error |est - truth| / truth: median {np.median(err):.1%}, p95 {np.percentile(err, 95):.1%}, "
          f"max {err.max():.1%} ({len(errors)} of {seeds} runs gave an estimate)")
    print(f"interval [low, high] established in {bounded} of {seeds} runs; it contains the truth in "
          f"{covered} of them ({covered / max(bounded, 1):.1%})")
    print(f"stages per search: median {np.median(stages):.0f}, max {max(stages)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1000, help="stages per Part 1 cell")
    ap.add_argument("--seeds", type=int, default=200, help="searches in Part 2")
    ap.add_argument("--stage-n", type=int, default=200, help="requests per stage in Part 2")
    args = ap.parse_args()
    part1(args.runs)
    part2(args.seeds, args.stage_n)


if __name__ == "__main__":
    main()
