"""long_prompts' evidence at the daemon's defaults: the whole window's mean prompt against prompt_tokens_recent.

The diagnosis benchmark runs a 20 s window at 1 s evaluations (a round must fit in minutes); the daemon's defaults
are a 300 s window, 15 s evaluations and 15 s scrapes, where a mean over the whole window takes long to move.
This replays them in virtual time, seeded, through the real code: per users' rate and seed, one VirtualServer
(the simulator's engine model and background mix, no sleeping) runs healthy for --warmup virtual seconds, then
every users' prompt is scaled × --scale (the `prompt_scale` fault; a healthy run has no shift). Its prompt-token
and first-token counters are scraped into sloguard's ServerWindows every scrape interval; every evaluation
interval `prompts.prompt_length` reads them over the diagnosis window and, before the shift, history.Baselines
learns each signal's baseline (after it, nothing is learned: as if the SLO had breached at once; the daemon
records until the breach, which only delays a baseline that `adopt` keeps from moving for a quarter hour).

Per rate it prints, for the 3x long_prompts row (`prompt_tokens_per_request` ≥ 3× its baseline) on the whole
window's mean alone and with `prompt_tokens_recent` (either at 3×): evaluations from the shift to the first that
holds (median, p90, misses within --observe evaluations) and the share of healthy runs in which it held at any
of the --observe evaluations after warm-up, with its 95% Wilson interval. (The row names a cause only at a
breach; these are the evidence's own rates.)

Run: .venv/bin/python benchmarks/prompt_spans.py [--seeds 40] [--rates 0.5 2 5] [--scale 4]   (~5 min on 2 cores)
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sloguard.bench.judge import wilson
from sloguard.config.spec import Config, DiagnoseSpec, TargetSpec
from sloguard.diagnose.arrivals import ProbeLoad
from sloguard.diagnose.history import Baselines, Series
from sloguard.diagnose.prompts import prompt_length
from sloguard.model import Histogram, ModelView, ServerView
from sloguard.sim.virtual import VirtualServer
from sloguard.windows.server import ServerWindows

ROW = 3.0  # the 3x long_prompts row (sloguard.diagnose.rules)


@dataclass
class Defaults:
    window: float
    evaluation: float
    scrape: float
    baseline: float


def defaults() -> Defaults:
    """Return the daemon's default diagnosis window, evaluation and scrape intervals and baseline horizon."""
    d = DiagnoseSpec()
    return Defaults(d.window, Config.model_fields["evaluation_interval"].default,
                    TargetSpec.model_fields["scrape_interval"].default, d.baseline)


def _view(ts: float, first: int, prompt: int) -> ServerView:
    ttft = Histogram(((float("inf"), float(first)),), float(first), 0.0)
    return ServerView("t", "vllm", ts, {"m": ModelView("m", histograms={"ttft": ttft}, gauges={},
                                                       counters={"prompt_tokens": float(prompt)})})


def one_run(seed: int, rps: float, shift: bool, scale: float, warmup: float, observe: int, d: Defaults,
            ) -> tuple[int | None, int | None]:
    """Return the first evaluation (from the shift, or from warm-up's end) at which the whole window's mean and
    the mean with the recent spans held the 3x row; None where it never did within `observe` evaluations."""
    sim = VirtualServer(seed, background_rps=rps)
    prefills = sim.record_prefills()
    server, series, probes = ServerWindows(), Series(horizon=2 * d.window), ProbeLoad(horizon=2 * d.window)
    base = Baselines(d.baseline, min_span=d.window, adopt=d.baseline / 4)
    first: list[int | None] = [None, None]
    end = warmup + observe * d.evaluation
    next_eval, t = d.evaluation, 0.0
    while t <= end and None in first:
        t += d.scrape
        if shift and t - d.scrape < warmup <= t:
            sim.run_until(warmup)
            sim.prompt_scale = scale
        sim.run_until(t)
        n = bisect.bisect_right(prefills, (t, float("inf")))
        server.add(_view(t, n, sum(p for _, p in prefills[:n])))
        while next_eval <= t:
            sig = prompt_length(series, server, "t", {"prompt_tokens"}, (), d.window, next_eval, probes)
            if next_eval <= warmup:
                base.record(next_eval, sig)
            else:
                _judge(sig, base, round((next_eval - warmup) / d.evaluation), first)
            next_eval += d.evaluation
    return first[0], first[1]


def _judge(sig: dict[str, float], base: Baselines, k: int, first: list[int | None]) -> None:
    learned = base.all()

    def holds(name: str) -> bool:
        b = learned.get(name)
        return name in sig and b is not None and sig[name] > 0 and sig[name] >= ROW * b

    whole = holds("prompt_tokens_per_request")
    if whole and first[0] is None:
        first[0] = k
    if (whole or holds("prompt_tokens_recent")) and first[1] is None:
        first[1] = k


def _lags(found: Sequence[int | None], observe: int) -> str:
    got = sorted(x for x in found if x is not None)
    if not got:
        return f"never within {observe}"
    p90 = got[min(len(got) - 1, int(0.9 * len(found)))] if len(got) == len(found) else "—"
    return (f"median {statistics.median(got):g}, p90 {p90}, missed {len(found) - len(got)}/{len(found)}")


def _share(found: Sequence[int | None]) -> str:
    k, n = sum(x is not None for x in found), len(found)
    lo, hi = wilson(k / n, n, 1.96)  # two-sided 95%, as benchmarks/diagnosis.py
    return f"{k}/{n} [{100 * lo:.0f}, {100 * hi:.0f}]%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--rates", type=float, nargs="+", default=[0.5, 2.0, 5.0], help="users' requests per second")
    ap.add_argument("--scale", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=1800.0)
    ap.add_argument("--observe", type=int, default=40, help="evaluations watched after the shift / warm-up")
    args = ap.parse_args()
    d = defaults()
    print(f"window {d.window:g}s, evaluation {d.evaluation:g}s, scrapes {d.scrape:g}s, prompts x{args.scale:g} "
          f"after {args.warmup:g}s, {args.seeds} seeds per rate and arm")
    for rps in args.rates:
        t0 = time.monotonic()
        shifted = [one_run(s, rps, True, args.scale, args.warmup, args.observe, d) for s in range(args.seeds)]
        healthy = [one_run(10_000 + s, rps, False, args.scale, args.warmup, args.observe, d)
                   for s in range(args.seeds)]
        print(f"users {rps:g}/s ({time.monotonic() - t0:.0f}s):")
        for i, label in enumerate(("whole window's mean", "with prompt_tokens_recent")):
            print(f"  {label:27s} evaluations shift → 3x: {_lags([r[i] for r in shifted], args.observe)}; "
                  f"healthy runs reaching 3x: {_share([r[i] for r in healthy])}")


if __name__ == "__main__":
    main()
