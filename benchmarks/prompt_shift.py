"""prompt_shift_z vs the whole window's mean: time to name a 4x prompt shift, and how often healthy traffic trips it.

An idealised, seeded replay of the statistic alone (sloguard.diagnose.prompts.prompt_shift_z, the function the
daemon runs): users arrive as a Poisson stream with the simulator's prompt mix (sloguard.sim.scheduler
BACKGROUND_MIX), prefills are instant, the baseline is exact (mean, second moment) and learned over 40 s of
users. At `shift` every user's prompt is 4x longer. Reported per traffic level: healthy evaluations whose z
reaches 4 (false-positive rate per evaluation), and evaluations from the shift to z ≥ 4 (median, p90) beside
those to the first long_prompts row's "mean of all prompts ≥ 2x" (the probes' 2/s of 128 tokens included
where --probes, as the benchmark's engine counts them). What it leaves out: prefills that jam (the engine counts
a prompt when its prefill ends), the KV cache, and a baseline learned from few requests.

Run: .venv/bin/python benchmarks/prompt_shift.py [--runs 2000] [--seed 1]   (~6 s)

Measured (seed 1): users 1/s, 20 s window, 1 s evaluations, probes included: healthy z ≥ 4 in 4 of 10,000
evaluations; to z ≥ 4 a median 6 evaluations (p90 15) where the mean took 12 (p90 22). At the shipped 300 s
window and 15 s evaluations, 1 user/s: 0 of 2,000 healthy; 2 evaluations (p90 3) where the mean took 7 (p90 9).
"""

from __future__ import annotations

import argparse
import random
import statistics

from sloguard.diagnose.arrivals import SURGE_SPANS
from sloguard.diagnose.prompts import PromptBaseline, prompt_shift_z
from sloguard.sim.scheduler import BACKGROUND_MIX

LENGTHS = [p for p, _, _ in BACKGROUND_MIX]
WEIGHTS = [w for *_, w in BACKGROUND_MIX]
PROBE_TOKENS, PROBES_PER_S = 128, 2.0


def arrivals(rng: random.Random, rate: float, seconds: float, shift: float, scale: float) -> list[tuple[float, int]]:
    """Return (time, prompt tokens) of Poisson users; prompts × scale from `shift` on."""
    out, t = [], 0.0
    while (t := t + rng.expovariate(rate)) < seconds:
        out.append((t, round(rng.choices(LENGTHS, WEIGHTS)[0] * (scale if t >= shift else 1.0))))
    return out


def z_at(users: list[tuple[float, int]], now: float, window: float, base: PromptBaseline) -> float:
    spans = []
    for f in SURGE_SPANS:
        inside = [p for t, p in users if now - window * f < t <= now]
        spans.append((float(sum(inside)), float(len(inside))))
    return prompt_shift_z(spans, base)


def mean_doubled(users: list[tuple[float, int]], now: float, window: float, mean0: float, probes: bool) -> bool:
    inside = [p for t, p in users if now - window < t <= now]
    n_probes = PROBES_PER_S * window if probes else 0.0
    total, n = sum(inside) + n_probes * PROBE_TOKENS, len(inside) + n_probes
    return n > 0 and total / n >= 2.0 * mean0


def run(rate: float, window: float, step: float, runs: int, probes: bool, rng: random.Random) -> str:
    total_w = sum(WEIGHTS)
    mean = sum(p * w for p, w in zip(LENGTHS, WEIGHTS, strict=True)) / total_w
    m2 = sum(p * p * w for p, w in zip(LENGTHS, WEIGHTS, strict=True)) / total_w
    base = PromptBaseline(mean, m2, 40.0 * rate)
    mean0 = (mean * rate + PROBE_TOKENS * PROBES_PER_S) / (rate + PROBES_PER_S) if probes else mean
    false = sum(z_at(arrivals(rng, rate, window, window, 1.0), window, window, base) >= 4.0 for _ in range(runs))
    to_z, to_mean = [], []
    for _ in range(runs // 4):
        users = arrivals(rng, rate, 3 * window, window, 4.0)
        times = [window + step * k for k in range(1, int(2 * window / step))]
        to_z.append(next((k + 1 for k, now in enumerate(times) if z_at(users, now, window, base) >= 4.0), len(times)))
        to_mean.append(next((k + 1 for k, now in enumerate(times) if mean_doubled(users, now, window, mean0, probes)),
                            len(times)))
    to_z.sort()
    to_mean.sort()
    p90 = int(0.9 * len(to_z))
    return (f"users {rate:g}/s, window {window:g}s, evaluation every {step:g}s{', probes 2/s' if probes else ''}: "
            f"healthy z>=4 in {false}/{runs} evaluations; evaluations to z>=4 median {statistics.median(to_z):g} "
            f"(p90 {to_z[p90]}), to the window's mean 2x median {statistics.median(to_mean):g} (p90 {to_mean[p90]})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    print(run(1.0, 20.0, 1.0, args.runs * 5, True, rng))  # the diagnosis benchmark's lanes
    print(run(1.0, 20.0, 1.0, args.runs * 5, False, rng))
    print(run(1.0, 300.0, 15.0, args.runs, False, rng))  # the shipped defaults, 1 user request/s
    print(run(5.0, 300.0, 15.0, args.runs // 4, False, rng))


if __name__ == "__main__":
    main()
