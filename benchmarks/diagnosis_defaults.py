"""Evidence for long_prompts and capacity at the daemon's defaults, in virtual time, through the real signal code.

The diagnosis benchmark runs a 20 s window at 1 s evaluations (a round must fit in minutes, in real time); the
daemon's defaults are a 300 s window, 15 s evaluations and 15 s scrapes, where means over the window move slowly.
This replays them, seeded: per users' rate, fault and seed, one VirtualServer (the simulator's engine model and
background mix, no sleeping) runs healthy for --warmup virtual seconds, then its fault starts (`prompt_scale` ×4:
long_prompts; `load_multiplier` ×3: capacity; healthy runs: none). Its counters (prompt tokens, first tokens,
finished requests), the prompt-length histogram observed at finish (vLLM's, in the simulator's buckets) and gauges
(waiting, running, KV usage) are scraped into sloguard's ServerWindows every scrape interval; every evaluation
interval `signals.engine_signals` reads them over the diagnosis window, history.Baselines
learns every signal's baseline before the fault (after it nothing is learned: as if the SLO had breached at once),
and the rule table's rows for the fault's cause are applied (`engine.apply`, the rows' evidence only: a verdict
also needs a breach and two of three evaluations to confirm it).

Per rate and fault it prints the evaluations from the fault to the first that holds a row of its cause (median,
p90, misses within --observe) and how many runs held the other cause's rows first; per rate, the share of
healthy runs in which a row held at any of the --observe evaluations after warm-up (the evidence's
false-positive rate per stretch, not the verdict's), with 95% Wilson intervals. `--only-whole` reads the
long_prompts rows without prompt_tokens_recent (the whole window's mean only).

Run: .venv/bin/python benchmarks/diagnosis_defaults.py [--seeds 30] [--rates 0.5 2 5]   (~6 min on 2 cores)
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sloguard.bench.judge import wilson
from sloguard.config.spec import Config, DiagnoseSpec, TargetSpec
from sloguard.diagnose.arrivals import ProbeLoad
from sloguard.diagnose.engine import apply
from sloguard.diagnose.history import Baselines, Series
from sloguard.diagnose.model import Inputs
from sloguard.diagnose.rules import RULES
from sloguard.diagnose.service import UNLEARNED
from sloguard.diagnose.signals import engine_signals, record_engine
from sloguard.model import Histogram, ModelView, ServerView
from sloguard.sim.metrics import TOKEN_BUCKETS
from sloguard.sim.virtual import VirtualServer
from sloguard.windows.server import ServerWindows

# fault -> (the cause its rows name, how it starts on the virtual server)
FAULTS: dict[str, tuple[str, Callable[[VirtualServer], None]]] = {
    "long_prompts": ("long_prompts", lambda s: setattr(s, "prompt_scale", 4.0)),
    "load_surge": ("capacity", lambda s: setattr(s, "load_multiplier", 3.0)),
}
WATCHED = ("long_prompts", "capacity")  # the causes a healthy run must not show


@dataclass
class Defaults:
    window: float
    evaluation: float
    scrape: float
    baseline: float
    hold: float


def defaults() -> Defaults:
    """Return the daemon's default diagnosis window, evaluation and scrape intervals, baseline and restart hold."""
    d = DiagnoseSpec()
    return Defaults(d.window, Config.model_fields["evaluation_interval"].default,
                    TargetSpec.model_fields["scrape_interval"].default, d.baseline, d.restart_hold)


class Scraper:
    """Builds the virtual server's scrapes: cumulative counters, the prompt-length histogram and the gauges now."""

    def __init__(self, sim: VirtualServer) -> None:
        self.sim = sim
        self.prefills, self.finishes = sim.record_requests()
        self.prefilled = self.finished = 0
        self.prompt_tokens = 0.0
        self.length = [0.0] * (len(TOKEN_BUCKETS) + 1)  # vLLM's request_prompt_tokens, observed at finish
        self.length_sum = 0.0

    def view(self, ts: float) -> ServerView:
        """Return the scrape at `ts` (called with growing `ts`)."""
        while self.prefilled < len(self.prefills) and self.prefills[self.prefilled][0] <= ts:
            self.prompt_tokens += self.prefills[self.prefilled][1]
            self.prefilled += 1
        while self.finished < len(self.finishes) and self.finishes[self.finished][0] <= ts:
            tokens = self.finishes[self.finished][1]
            self.length[bisect.bisect_left(TOKEN_BUCKETS, tokens)] += 1
            self.length_sum += tokens
            self.finished += 1
        n, bounds = float(self.prefilled), (*map(float, TOKEN_BUCKETS), float("inf"))
        cumulative = tuple(zip(bounds, itertools.accumulate(self.length), strict=True))
        hists = {"ttft": Histogram(((float("inf"), n),), n, 0.0),
                 "prompt_length": Histogram(cumulative, float(self.finished), self.length_sum)}
        e = self.sim.engine
        gauges = {"requests_waiting": float(len(e.waiting)), "requests_running": float(len(e.running)),
                  "kv_cache_usage_ratio": e.kv_usage()}
        return ServerView("t", "vllm", ts, {"m": ModelView("m", histograms=hists, gauges=gauges,
                                                           counters={"prompt_tokens": self.prompt_tokens},
                                                           finished_by_reason={"stop": float(self.finished)})})


class Judge:
    """Learns baselines before the fault; afterwards applies the rows of the watched causes."""

    def __init__(self, d: Defaults, only_whole: bool) -> None:
        self.d, self.only_whole = d, only_whole
        self.base = Baselines(d.baseline, min_span=d.window, adopt=d.baseline / 4)
        self.first: dict[str, int] = {}

    def evaluate(self, sig: dict[str, float], k: int) -> None:
        """Record the first evaluation k after the fault at which a row of each watched cause held."""
        if self.only_whole:
            sig = {n: v for n, v in sig.items() if n != "prompt_tokens_recent"}
        inp = Inputs("slo", 0.0, self.d.window, (), {}, sig, self.base.all())
        for rule in RULES:
            if rule.cause in WATCHED and rule.cause not in self.first and apply(rule, inp)[0]:
                self.first[rule.cause] = k


def one_run(seed: int, rps: float, fault: str | None, warmup: float, observe: int, d: Defaults,
            only_whole: bool) -> dict[str, int]:
    """Return, per watched cause, the first evaluation after the fault (or warm-up) at which one of its rows held."""
    sim = VirtualServer(seed, background_rps=rps)
    scraper = Scraper(sim)
    server, series = ServerWindows(), Series(horizon=d.hold + d.window)
    probes = ProbeLoad(horizon=2 * d.window)  # no probes: every request is a user's
    judge = Judge(d, only_whole)
    next_eval, t, end = d.evaluation, 0.0, warmup + observe * d.evaluation
    while t < end and (fault is None or FAULTS[fault][0] not in judge.first):
        t += d.scrape
        if fault is not None and t - d.scrape < warmup <= t:
            sim.run_until(warmup)
            FAULTS[fault][1](sim)
        sim.run_until(t)
        server.add(scraper.view(t))
        while next_eval <= t:
            record_engine(series, server, "t")
            learned = judge.base.all()
            users, over = learned.get("user_request_rate"), judge.base.span("user_request_rate")
            sig = engine_signals(series, server, "t", d.window, d.hold, next_eval, probes,
                                 None if users is None or over is None else (users, over + d.window))
            if next_eval <= warmup:
                judge.base.record(next_eval, {n: v for n, v in sig.items() if n not in UNLEARNED})
            else:
                judge.evaluate(sig, round((next_eval - warmup) / d.evaluation))
            next_eval += d.evaluation
    return judge.first


def _lags(found: Sequence[int | None], observe: int) -> str:
    got = sorted(x for x in found if x is not None)
    if not got:
        return f"never within {observe}"
    p90 = got[min(len(got) - 1, int(0.9 * len(found)))] if len(got) == len(found) else "—"
    return f"median {statistics.median(got):g}, p90 {p90}, max {got[-1]}, missed {len(found) - len(got)}/{len(found)}"


def _share(k: int, n: int) -> str:
    lo, hi = wilson(k / n, n, 1.96)  # two-sided 95%, as benchmarks/diagnosis.py
    return f"{k}/{n} [{100 * lo:.0f}, {100 * hi:.0f}]%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--rates", type=float, nargs="+", default=[0.5, 2.0, 5.0], help="users' requests per second")
    ap.add_argument("--warmup", type=float, default=1800.0)
    ap.add_argument("--observe", type=int, default=40, help="evaluations watched after the fault / warm-up")
    ap.add_argument("--only-whole", action="store_true", help="long_prompts without prompt_tokens_recent")
    args = ap.parse_args()
    d = defaults()
    print(f"window {d.window:g}s, evaluation {d.evaluation:g}s, scrapes {d.scrape:g}s, baseline {d.baseline:g}s, "
          f"fault after {args.warmup:g}s, {args.seeds} seeds per rate and arm"
          + (", long_prompts on the whole window's mean only" if args.only_whole else ""))
    for rps in args.rates:
        t0 = time.monotonic()
        lines = []
        for fault, (cause, _) in FAULTS.items():
            runs = [one_run(s, rps, fault, args.warmup, args.observe, d, args.only_whole) for s in range(args.seeds)]
            got = [r.get(cause) for r in runs]
            # another watched cause's evidence before (or without) the fault's own: the verdict could go there
            other = sum(any(c != cause and k < r.get(cause, args.observe + 1) for c, k in r.items()) for r in runs)
            lines.append(f"  {fault:13s} evaluations fault → {cause} evidence: {_lags(got, args.observe)}; "
                         f"another cause's first: {other}/{len(runs)}")
        healthy = [one_run(10_000 + s, rps, None, args.warmup, args.observe, d, args.only_whole)
                   for s in range(args.seeds)]
        per = ", ".join(f"{c} {_share(sum(c in h for h in healthy), len(healthy))}" for c in WATCHED)
        lines.append(f"  healthy runs whose evidence held within {args.observe} evaluations: {per}")
        print(f"users {rps:g}/s ({time.monotonic() - t0:.0f}s):", *lines, sep="\n")


if __name__ == "__main__":
    main()
