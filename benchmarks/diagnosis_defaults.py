"""Evidence for long_prompts and capacity at the daemon's defaults, in virtual time, through the real signal code.

The diagnosis benchmark runs a 20 s window at 1 s evaluations (a round must fit in minutes, in real time); the
daemon's defaults are a 300 s window, 15 s evaluations and 15 s scrapes, where means over the window move slowly.
This replays them, seeded: per users' rate, fault and seed, one VirtualServer (the simulator's engine model and
background mix, no sleeping) runs healthy for --warmup virtual seconds, then its fault starts (`prompt_scale` ×4:
long_prompts; `load_multiplier` ×3: capacity; the KV cache shrunk to 160 blocks as benchmarks/diagnosis.py's
`kv_blocks`: kv_cache_pressure; healthy runs: none). Its counters (prompt tokens, first tokens, finished requests,
preemptions), the prompt-length histogram observed at finish (vLLM's, in the simulator's buckets) and gauges
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

The daemon's evaluation timer and a target's scrape timer run apart, so each seed draws the phase of its
evaluations after the scrapes (uniform over a scrape interval; --phase S fixes it, --phase 0 evaluates at the
scrape times as before 2026-11-28). The timed arm ("timed") adds sloguard's probes at their defaults, an SLO whose
p95 objectives are --headroom × the seed's worst healthy 5-min probe p95, and times its breach (the probes' p95
over the SLO's shortest window) and the first cause published after it (2 of the last 3 evaluations, state rows
counted breach or not, or at once where a `sure` row holds, in RULES precedence; the stage a verdict also needs is
not modelled).

Measured (commit 8fb023d, 2026-11-28, seeds' own phases): verdict − breach within two evaluations: prompts x4 at
0.5 / 2 / 5 users/s 24/25, 30/30, 30/30 (max +3); load x3 17/17, 30/30, 30/30 (max +2); the right cause named
first in every breached run; healthy runs: no cause named in 30/30 at each rate. Its baselines learn from 30 min,
where the prompt baselines' 100-prefill rule (prompts.settled, applied by the daemon's service) never binds.
Rerun at e63c5c0 (the users' prompt baselines the mean of their healthy values): the same figures, the evidence's
evaluations too. Before the 2.5x long_prompts row (a4a47db): prompts 22/25, 30/30, 29/30 (max +4). Before the
thirty-second span (ac5be04, 7c4398c): prompts 22/25, 30/30 (max +2), 28/30. Before the spans ended at the newest
scrape (4e91663): prompts 22/25, 23/30, 21/23 with capacity named first in 7/30 at 5 users/s.
Rerun with the 2.5x and 3x long_prompts rows named at first sight (`sure`, 2026-11-29): prompts 25/25, 30/30, 30/30
(max +2, +0, +1), load and the healthy runs as before, the evidence's evaluations the same.
With the KV shrink (2026-11-29, 15 seeds per rate; the whole run at 30 seeds takes ~16 min on 2 cores): at the table
of 8b05a1c its first cause was right in 0/1, 12/15, 13/15 of the named runs that breached (else capacity: requests
waiting before the cache read 0.85 or anything was preempted), within two 0/0, 11/12, 13/13. With the third KV
row, the preemption row at a cache half full and capacity's queue asking for more demand (39dc50a): 30 seeds, KV
shrink right 12/12, 30/30, 30/30, within two 9/12 (max +7), 30/30, 30/30 (max +2); at 0.5 users/s the shrunk cache
holds one or two requests, 15/30 breached and 3 of those were never named within --observe (a queue that comes and
goes between 15 s scrapes reads a quarter-mean of 0-0.6 waiting, no preemptions: unknown, not a wrong cause);
prompts 25/25, 30/30, 30/30 and load 17/17, 30/30, 30/30 within two as before; healthy runs name no cause in 30/30
at each rate, and capacity's evidence held in 0/30, 2/30, 3/30 of them (9/30 at 5 users/s before).
With the engine's queue time (queue_seconds_per_second) or the scrapes' most waiting in the third KV row and the
batch guard's floor of two requests (5916947, ~16 min): KV shrink right 15/15, 30/30, 30/30, within two 12/15 (+0 to
+2, then +4, +5, +11), 30/30 (max +1), 30/30 (max +2); prompts, load and the healthy runs exactly as before. In the
three late runs one probe of the ten in the SLO's window waited 0.15-0.4 s for blocks and no scrape saw a request
waiting; at the breach the cache's recent peak read 0.41-0.44 and 0.0 (under the row's 0.5) in two, and the queue
time 2.6x its healthy mean (under 3x) in the third.
With two more kv_cache_pressure rows on the cache's usual share (74e8e91: preemptions with the window's KV p90 >= 0.1
and 5x its baseline, or the recent peak >= 0.5 and 10x its baseline, both with the third row's guards): KV shrink at
0.5 users/s within two 15/15 (median +0, max +2), its evidence a median 6 evaluations after the shrink (10 before,
p90 21 -> 15); every other figure exactly as before.

Run: .venv/bin/python benchmarks/diagnosis_defaults.py [--seeds 30] [--rates 0.5 2 5] [--faults F ...] [--phase S]
(~16 min on 2 cores)
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sloguard.bench.judge import wilson
from sloguard.config.burnwindows import STANDARD_WINDOWS
from sloguard.config.spec import Config, DiagnoseSpec, ProbeSpec, TargetSpec
from sloguard.diagnose.arrivals import ProbeLoad
from sloguard.diagnose.engine import apply
from sloguard.diagnose.history import Baselines, Series
from sloguard.diagnose.model import Inputs
from sloguard.diagnose.prompts import MEAN_BASELINES
from sloguard.diagnose.rules import RULES
from sloguard.diagnose.service import UNLEARNED
from sloguard.diagnose.signals import engine_signals, record_engine
from sloguard.model import Histogram, ModelView, ServerView
from sloguard.sim.metrics import TOKEN_BUCKETS
from sloguard.sim.virtual import VirtualServer
from sloguard.windows.server import ServerWindows

KV_BLOCKS = 160  # benchmarks/diagnosis.py's KV shrink: of the profile's 4,096, one 2,048-token prompt fills 0.8
# fault -> (the cause its rows name, how it starts on the virtual server)
FAULTS: dict[str, tuple[str, Callable[[VirtualServer], None]]] = {
    "long_prompts": ("long_prompts", lambda s: setattr(s, "prompt_scale", 4.0)),
    "load_surge": ("capacity", lambda s: setattr(s, "load_multiplier", 3.0)),
    "kv_shrink": ("kv_cache_pressure", lambda s: s.shrink_kv(KV_BLOCKS)),
}
WATCHED = ("long_prompts", "kv_cache_pressure", "capacity")  # the causes a healthy run must not show
_PROBE = ProbeSpec(name="p", target="t")
PROBE_PROMPT, PROBE_TOKENS = _PROBE.prompts[0].tokens, _PROBE.max_tokens


@dataclass
class Defaults:
    window: float
    evaluation: float
    scrape: float
    baseline: float
    hold: float
    probe: float  # the probe interval
    slo_window: float  # an SLO's shortest window


def defaults() -> Defaults:
    """Return the daemon's default diagnosis window, evaluation, scrape and probe intervals, baseline, restart hold."""
    d = DiagnoseSpec()
    return Defaults(d.window, Config.model_fields["evaluation_interval"].default,
                    TargetSpec.model_fields["scrape_interval"].default, d.baseline, d.restart_hold,
                    ProbeSpec.model_fields["interval"].default, STANDARD_WINDOWS[0])


class Scraper:
    """Builds the virtual server's scrapes: cumulative counters, the prompt-length histogram and the gauges now."""

    def __init__(self, sim: VirtualServer) -> None:
        self.sim = sim
        self.prefills, self.finishes = sim.record_requests()
        self.prefilled = self.finished = 0
        self.prompt_tokens = 0.0
        self.length = [0.0] * (len(TOKEN_BUCKETS) + 1)  # vLLM's request_prompt_tokens, observed at finish
        self.length_sum = 0.0
        self.queues, self.queued, self.queue_sum = sim.record_queue_times(), 0, 0.0

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
        while self.queued < len(self.queues) and self.queues[self.queued][0] <= ts:
            self.queue_sum += self.queues[self.queued][1]
            self.queued += 1
        n, bounds = float(self.prefilled), (*map(float, TOKEN_BUCKETS), float("inf"))
        cumulative = tuple(zip(bounds, itertools.accumulate(self.length), strict=True))
        hists = {"ttft": Histogram(((float("inf"), n),), n, 0.0),
                 "queue": Histogram(((float("inf"), float(self.queued)),), float(self.queued), self.queue_sum),
                 "prompt_length": Histogram(cumulative, float(self.finished), self.length_sum)}
        e = self.sim.engine
        gauges = {"requests_waiting": float(len(e.waiting)), "requests_running": float(len(e.running)),
                  "kv_cache_usage_ratio": e.kv_usage()}
        return ServerView("t", "vllm", ts, {"m": ModelView("m", histograms=hists, gauges=gauges,
                                                           counters={"prompt_tokens": self.prompt_tokens,
                                                                     "preemptions": float(self.sim.preemptions)},
                                                           finished_by_reason={"stop": float(self.finished)})})


class Probes:
    """sloguard's probes at the daemon's defaults on the virtual server, and the SLO's p95 over its shortest window.

    One probe every `interval` virtual seconds (the probe defaults: 30 s, 64 prompt tokens, 64 tokens out) from a
    seeded offset. ProbeLoad is fed its start at once and its prefill (first token) when its result comes back at
    the end of the stream, so the users' signals leave the probes out. The daemon learns the first token as it
    comes (sloguard.probes.prefill); a default probe, in flight ~2 s of its 30, is not worth modelling that here.
    """

    def __init__(self, sim: VirtualServer, seed: int, interval: float) -> None:
        self.sim, self.interval = sim, interval
        self.next_at = random.Random(f"{seed}/probes").uniform(0.0, interval)
        self.load = ProbeLoad(horizon=3600.0)
        self.results: list[tuple[float, float, float | None]] = []  # (finish, ttft, tpot)

    def submit_until(self, t: float) -> None:
        """Schedule the probes that start in (last call, t] and tell ProbeLoad their starts."""
        started = []
        while self.next_at <= t:
            self.sim.submit(self.next_at, PROBE_PROMPT, PROBE_TOKENS)
            started.append(("t", self.next_at))
            self.next_at += self.interval
        self.load.observe(started, t)

    def collect(self, t: float) -> None:
        """Take the probe results that finished by `t` (the virtual server keeps them in `done`)."""
        done, self.sim.done = self.sim.done, []
        self.load.observe((), t, [("t", r.arrival + r.ttft_s, r.prompt_tokens, "") for r in done])
        self.results += [(r.arrival + r.e2e_s, r.ttft_s, r.tpot_s) for r in done]

    def p95(self, window: float, now: float) -> tuple[float, float] | None:
        """Return the p95 TTFT and TPOT (nearest rank) of the probes finished in (now − window, now]."""
        inside = [r for r in self.results if now - window < r[0] <= now]
        if not inside:
            return None
        return _nearest(sorted(r[1] for r in inside)), _nearest(sorted(r[2] or 0.0 for r in inside))


def _nearest(values: Sequence[float], q: float = 0.95) -> float:
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


class Judge:
    """Learns baselines at evaluations without a breach; records which watched causes' rows hold at each."""

    def __init__(self, d: Defaults, only_whole: bool) -> None:
        self.d, self.only_whole = d, only_whole
        self.base = Baselines(d.baseline, min_span=d.window, adopt=d.baseline / 4, means=MEAN_BASELINES)
        self.first: dict[str, int] = {}
        self.held: dict[int, frozenset[str]] = {}
        self.sure: dict[int, frozenset[str]] = {}  # per evaluation, the causes a `sure` row names at once

    def evaluate(self, sig: dict[str, float], k: int) -> None:
        """Record the watched causes whose rows hold at evaluation k after the fault, and the first k of each."""
        if self.only_whole:
            sig = {n: v for n, v in sig.items() if n != "prompt_tokens_recent"}
        inp = Inputs("slo", 0.0, self.d.window, (), {}, sig, self.base.all())
        rows = [r for r in RULES if r.cause in WATCHED and apply(r, inp)[0]]
        held = frozenset(r.cause for r in rows)
        self.held[k] = held
        self.sure[k] = frozenset(r.cause for r in rows if r.sure)
        for cause in held:
            self.first.setdefault(cause, k)

    def named(self, breach: int, now: int) -> str | None:
        """Return the cause published at evaluation `now` ≥ the breach: its rows held at 2 of the last 3, or a
        `sure` row holds now.

        Both watched causes' rows are state rows, counted breach or not (confirm.Confirmer, engine.holding), in
        RULES precedence; the stage a verdict also needs is not modelled here.
        """
        recent = [self.held.get(now - i, frozenset()) for i in range(3)]
        sure = self.sure.get(now, frozenset())
        for cause in dict.fromkeys(r.cause for r in RULES):
            if cause in recent[0] and (cause in sure or sum(cause in h for h in recent) >= 2):
                return cause
        return None


@dataclass
class Run:
    first: dict[str, int] = field(default_factory=dict)  # per watched cause, its rows' first evaluation after the fault
    breach: int | None = None  # the first evaluation after the fault whose probe p95 missed an objective
    named: tuple[str, int] | None = None  # the first cause published at or after the breach, and when


def one_run(seed: int, rps: float, fault: str | None, warmup: float, observe: int, d: Defaults,
            only_whole: bool, limits: tuple[float, float] | None = None, phase: float = 0.0) -> Run:
    """Return one run: the watched causes' first evidence after the fault and, with `limits`, breach and verdict.

    `limits`: the SLO's p95 TTFT and TPOT objectives (probes run and the breach is timed); without them no probe
    runs, and baselines learn until the fault as if it had breached at once. `phase`: how long after a scrape
    each evaluation comes (the daemon's evaluation timer and a target's scrape timer run apart; 0: together,
    the scrape first).
    """
    sim = VirtualServer(seed, background_rps=rps)
    scraper = Scraper(sim)
    server, series = ServerWindows(), Series(horizon=d.hold + d.window)
    probes = Probes(sim, seed, d.probe) if limits is not None else None
    load = probes.load if probes is not None else ProbeLoad(horizon=2 * d.window)  # no probes: all are users'
    judge, run = Judge(d, only_whole), Run()
    next_scrape, next_eval, end, faulted = d.scrape, d.evaluation + phase, warmup + observe * d.evaluation, False
    while (t := min(next_scrape, next_eval)) <= end:
        if probes is not None:
            probes.submit_until(t)
        if fault is not None and not faulted and warmup <= t:
            sim.run_until(warmup)
            FAULTS[fault][1](sim)
            faulted = True
        sim.run_until(t)
        if probes is not None:
            probes.collect(t)
        if t == next_scrape:
            server.add(scraper.view(t))
            next_scrape += d.scrape
        if t == next_eval:
            _evaluate(judge, run, (series, server, load), probes, limits, d, (t, warmup))
            next_eval += d.evaluation
        if fault is not None and FAULTS[fault][0] in judge.first and (limits is None or run.named is not None):
            break
    run.first = judge.first
    return run


def _evaluate(judge: Judge, run: Run, state: tuple[Series, ServerWindows, ProbeLoad], probes: Probes | None,
              limits: tuple[float, float] | None, d: Defaults, at: tuple[float, float]) -> None:
    (series, server, load), (now, warmup) = state, at
    record_engine(series, server, "t")
    learned = judge.base.all()
    users, over = learned.get("user_request_rate"), judge.base.span("user_request_rate")
    sig = engine_signals(series, server, "t", d.window, d.hold, now, load,
                         None if users is None or over is None else (users, over + d.window))
    p95 = probes.p95(d.slo_window, now) if probes is not None else None
    k = math.ceil((now - warmup) / d.evaluation - 1e-9)  # the first evaluation after the fault is 1
    if k > 0 and run.breach is None and limits is not None and p95 is not None and \
            (p95[0] > limits[0] or p95[1] > limits[1]):
        run.breach = k
    if now <= warmup or (limits is not None and run.breach is None):
        judge.base.record(now, {n: v for n, v in sig.items() if n not in UNLEARNED})
    if now > warmup:
        judge.evaluate(sig, k)
        if run.breach is not None and run.named is None and (cause := judge.named(run.breach, k)) is not None:
            run.named = cause, k


def objectives(seed: int, rps: float, warmup: float, d: Defaults, headroom: float) -> tuple[float, float]:
    """Return `headroom` × the largest 5-min probe p95 TTFT and TPOT of the seed's healthy warm-up.

    An SLO set just above what the healthy engine reaches: the hardest for lag, as a fault breaches it early.
    """
    sim = VirtualServer(seed, background_rps=rps)
    probes, worst, t = Probes(sim, seed, d.probe), (0.0, 0.0), 0.0
    while t < warmup:
        t += d.evaluation
        probes.submit_until(t)
        sim.run_until(t)
        probes.collect(t)
        p95 = probes.p95(d.slo_window, t) if t >= d.slo_window else None
        if p95 is not None:
            worst = (max(worst[0], p95[0]), max(worst[1], p95[1]))
    return headroom * worst[0], headroom * worst[1]


def _lags(found: Sequence[int | None], observe: int) -> str:
    got = sorted(x for x in found if x is not None)
    if not got:
        return f"never within {observe}"
    p90 = got[min(len(got) - 1, int(0.9 * len(found)))] if len(got) == len(found) else "—"
    return f"median {statistics.median(got):g}, p90 {p90}, max {got[-1]}, missed {len(found) - len(got)}/{len(found)}"


def _faults(args: argparse.Namespace) -> list[tuple[str, tuple[str, Callable[[VirtualServer], None]]]]:
    return [(f, FAULTS[f]) for f in args.faults]


def _share(k: int, n: int) -> str:
    lo, hi = wilson(k / n, n, 1.96)  # two-sided 95%, as benchmarks/diagnosis.py
    return f"{k}/{n} [{100 * lo:.0f}, {100 * hi:.0f}]%"


def _evidence(rps: float, args: argparse.Namespace, d: Defaults) -> list[str]:
    lines = []
    for fault, (cause, _) in _faults(args):
        runs = [one_run(s, rps, fault, args.warmup, args.observe, d, args.only_whole, phase=_phase(args, d, s)).first
                for s in range(args.seeds)]
        got = [r.get(cause) for r in runs]
        # another watched cause's evidence before (or without) the fault's own: the verdict could go there
        other = sum(any(c != cause and k < r.get(cause, args.observe + 1) for c, k in r.items()) for r in runs)
        lines.append(f"  {fault:13s} evaluations fault → {cause} evidence: {_lags(got, args.observe)}; "
                     f"another cause's first: {other}/{len(runs)}")
    healthy = [one_run(10_000 + s, rps, None, args.warmup, args.observe, d, args.only_whole,
                       phase=_phase(args, d, 10_000 + s)).first
               for s in range(args.seeds)]
    per = ", ".join(f"{c} {_share(sum(c in h for h in healthy), len(healthy))}" for c in WATCHED)
    lines.append(f"  healthy runs whose evidence held within {args.observe} evaluations: {per}")
    return lines


def _timed(rps: float, args: argparse.Namespace, d: Defaults, fault: str | None, seed: int) -> Run:
    limits = objectives(seed, rps, args.warmup, d, args.headroom)
    return one_run(seed, rps, fault, args.warmup, args.observe, d, args.only_whole, limits, _phase(args, d, seed))


def _phase(args: argparse.Namespace, d: Defaults, seed: int) -> float:
    """Return --phase, or the seed's own: uniform over a scrape interval (the daemon's timers run apart)."""
    return float(args.phase) if args.phase is not None else random.Random(f"{seed}/phase").uniform(0.0, d.scrape)


def _breaches(rps: float, args: argparse.Namespace, d: Defaults) -> list[str]:
    lines = []
    for fault, (cause, _) in _faults(args):
        runs = [_timed(rps, args, d, fault, s) for s in range(args.seeds)]
        timed = [r for r in runs if r.breach is not None]
        named = [r for r in timed if r.named is not None]
        right = [r for r in named if r.named is not None and r.named[0] == cause]
        lags = [r.named[1] - (r.breach or 0) for r in right if r.named is not None]
        within = sum(x <= 2 for x in lags)
        wrong = ", ".join(sorted({r.named[0] for r in named if r.named is not None and r.named[0] != cause}))
        lines.append(f"  {fault:13s} breached {len(timed)}/{len(runs)} (fault → breach: "
                     f"{_lags([r.breach for r in timed], args.observe)}); first cause named right "
                     f"{_share(len(right), len(named)) if named else '0/0'}{f' (else {wrong})' if wrong else ''}; "
                     f"verdict − breach: {_lags(list(lags), args.observe)}, within two {within}/{len(lags)}")
    healthy = [_timed(rps, args, d, None, 10_000 + s) for s in range(args.seeds)]
    false = sum(r.named is not None for r in healthy)
    lines.append(f"  healthy runs: breached {sum(r.breach is not None for r in healthy)}/{len(healthy)}, "
                 f"a cause named {_share(false, len(healthy))}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--rates", type=float, nargs="+", default=[0.5, 2.0, 5.0], help="users' requests per second")
    ap.add_argument("--faults", nargs="+", choices=list(FAULTS), default=list(FAULTS))
    ap.add_argument("--warmup", type=float, default=1800.0)
    ap.add_argument("--observe", type=int, default=40, help="evaluations watched after the fault / warm-up")
    ap.add_argument("--only-whole", action="store_true", help="long_prompts without prompt_tokens_recent")
    ap.add_argument("--headroom", type=float, default=1.25,
                    help="SLO objectives: this × the largest healthy 5-min probe p95 of the seed's warm-up")
    ap.add_argument("--phase", type=float, default=None, help="seconds from a scrape to the evaluation after it "
                    "(default: each seed draws its own over a scrape interval)")
    ap.add_argument("--evidence-only", action="store_true", help="skip the timed runs (probes, breach, verdict)")
    args = ap.parse_args()
    d = defaults()
    print(f"window {d.window:g}s, evaluation {d.evaluation:g}s, scrapes {d.scrape:g}s, baseline {d.baseline:g}s, "
          f"probes every {d.probe:g}s, SLO window {d.slo_window:g}s, fault after {args.warmup:g}s, "
          f"{args.seeds} seeds per rate and arm"
          + (", long_prompts on the whole window's mean only" if args.only_whole else "")
          + (f", evaluations {args.phase:g}s after a scrape" if args.phase is not None
             else ", evaluations at each seed's own phase after the scrapes"))
    for rps in args.rates:
        t0 = time.monotonic()
        lines = ["  evidence (no probes; baselines learn until the fault):", *_evidence(rps, args, d)]
        if not args.evidence_only:
            lines += [f"  timed (probes; objectives {args.headroom:g}× the healthy p95; baselines learn until the "
                      f"breach; published at 2 of 3, a sure row at once):", *_breaches(rps, args, d)]
        print(f"users {rps:g}/s ({time.monotonic() - t0:.0f}s):", *lines, sep="\n")


if __name__ == "__main__":
    main()
