"""Bottleneck verdicts against the simulator: every fault class × seeds, plus healthy runs.

Each run ("lane") is one simulator process (its own seed, in-band per-request records, its dcgm-exporter page)
and one SLO of one sloguard daemon that probes, scrapes, watches the simulator's process (host source) and
its dcgm page. A round starts a daemon and several lanes, lets them run healthy for --warmup seconds (the
diagnosis learns each stage's and signal's baseline), injects each lane's fault through `POST /sim/faults`
and watches `/api/v1/slos` every evaluation interval for --observe seconds.

Per faulted run: the first cause other than none/unknown after injection (right when it is the fault's
cause), the time from injection to the first correct verdict, and the time from the SLO's own objective
breach (first evaluation after injection whose shortest-window objective is non-compliant) to the correct
verdict, in evaluation intervals, counted between the daemon's own evaluation times (the status's
`evaluated_at`, the verdict's `at`) of the first polls that show each, not between poll times. A lane whose
objective already missed at injection (machine load pushed a healthy SLO over it before the fault) has no
breach after injection to time from: its lag is reported as "pre" and listed apart, not counted from
injection (it still counts for the right cause). Per healthy run: any cause other than none/unknown over
the whole run is a false cause; beside it the report prints the most of the users' arrivals in 5 s and 20 s
before it, from the simulator's own record (GET /sim/arrivals), which tells a burst of the users' from a false
cause without changing the count. Goals (issue 12): right cause ≥ 90% of faulted runs, no false cause in ≥ 95%
of healthy runs, verdict within two evaluation intervals after the objective breaches. --trace FILE writes
every poll's verdict, evidence and signals (with baselines) per lane, to see why a verdict came late.

Per source (issue 48): the real engines' recorded incidents are the judge, the simulator secondary:
     .venv/bin/python benchmarks/diagnosis.py --recorded   (llama.cpp and vLLM recordings, replayed in seconds)
Run: .venv/bin/python benchmarks/diagnosis.py [--seeds 5] [--healthy 10] [--seed-base 100] [--profile P]
     (the daemon's default timing: five rounds of nine lanes, ~89 min on 2 cores; --profile compressed, the
     defaults' time compressed 15x with 4 lanes a round, ~56 min; tune on the default seeds, validate on new
     --seed-base values); shares print with their 95% Wilson interval
     .venv/bin/python benchmarks/diagnosis.py --pool A.json B.json   (pools --trace files)
     .venv/bin/python benchmarks/diagnosis.py --cost   (the diagnosis step's own cost per evaluation, ~1 min)

Measured (2026-11-28, each run on its commit's unchanged tree, load average 0.0-1.6; README "Diagnosis" has the
per-fault detail, docs/diagnosis-history.md the runs before). With the 60 s warm-up (~1,650 s a set): at 4e91663
the default seeds 35/35 right, 10/10 healthy, verdict − breach of the explained objective within 2 in 27/30 timed
runs (median +0, max +8); --seed-base 1000: 35/35, 10/10, 29/33 (max +35); 2000: 35/35, 10/10, 31/34 (max +10);
the default seeds at 17c5260: 35/35, 9/10, 29/32 (max +14); seeds 3000 at 680a35b: 34/35, 10/10, 29/34 (max +12);
1000 at a4a47db: 35/35, 10/10, 29/32 (max +10); 2000 at fdd826e: 35/35, 10/10, 31/34 (max +12); held-out 4000 at
f03cd7c: 32/35 (three runs of one seed named long_prompts against a prompt baseline learned from ~45 prefills),
10/10, 25/30 (max +37). The eight pooled: 276/280, 79/80, 230/259. With the 100-prefill prompt baselines and a
150 s warm-up (8fb023d, ~2,730 s a set): seed 4002 alone 6/6 breached runs right, 1/1, 6/6; new seeds 5000: 34/35
(a KV shrink never breached), 10/10, 27/32 (max +33). The warm-up is 200 s since: at 150 s 13 of 45 lanes began
their fault with the prompt baseline still withheld; seed set 5000's long-prompt runs at 200 s (a3c36d4): 5/5, 3/3
healthy, 2/4 within two (+0, +3, +0, +7), every one with a prompt baseline at injection. New seeds 6000 at 200 s:
at 38b1594 35/35, 10/10, 30/33 (max +9); at 3d02c25 (probe prefills counted at their first token, ~3,330 s a set)
35/35, 10/10, 34/35 (max +4), the long-prompt runs +4, +2, +4, +9, +0 → +0, +0, +0, +4, +0; seeds 7000's long
prompts alone (--faults long_prompts --seeds 8 --healthy 0): 4/7 → 7/7 within two. At 3d5f5de (a second KV row:
preemptions with the recent peak full): seeds 8000-8001 (--seeds 2 --healthy 2) 14/14, 2/2, 11/13; new seeds 9000
34/35 (a KV shrink named engine_restart on cold starts that were a wall-clock change, fixed in b7cb580; 35/35 and
34/35 within two through the fix), 10/10, 33/35 (max +17), every long-prompt run +0. New seeds 10000 at 0d835a1
(--seeds 4 --healthy 4, 2,222 s): 28/28, 4/4, 28/28 within two (max +2). New seeds 11000 at 9c316b4 (3,335 s):
35/35, 10/10, 31/33 (long prompts +7, +9); new seeds 12000 at a5457bb: 32/35 (three CPU burns never breached),
10/10, 30/31 (a long-prompt run +9); new seeds 13000 at 543dc25: 34/35 (an engine restart named long_prompts
first, fixed by 5df4da8's restart at first sight), 9/10, 30/31 (+5); new seeds 14000 at 04a6ea3: 34/35 (a KV
shrink named long_prompts on a natural run of long prompts), 10/10, 33/34 (+9); new seeds 15000 at f595f1d (mean
prompt baselines): 35/35, 9/10 (a real cluster of the users' arrivals in the warm-up, named capacity), 34/35 (+8);
new seeds 16000 at bf4a288: 35/35, 10/10, 29/32 (+52 and +4 counted from breaches that cleared at once; 31/32 from
the onset of the breach episode).
At the daemon's defaults (--profile defaults --parallel 9 --seed-base 19000, 2026-11-29, commit 92622db, 5,311 s):
29/30 right of the runs that breached (a KV shrink named capacity first: requests waiting, the cache's recent peak
0.83), the five CPU burns never breached the 150 ms TPOT, 10/10 healthy, verdict - breach within two 29/30 (median
+0, max +4: that KV shrink); every load surge and prompt shift +0 or +1. One round on the daemon's fixed evaluation
cadence (b1b73ab, --seeds 1 --healthy 2 --tpot 100ms --seed-base 20000): 7/7, 2/2, 6/6 within two (CPU burn +1).
Through the third KV row (39dc50a, --seeds 4 --healthy 8 --tpot 100ms --seed-base 21000, 4,260 s): 28/28, 8/8,
26/28 within two (median +0, max +3: two CPU burns, whose serving CPU was a 75 s rate; every KV shrink +1 or +2).
The same seeds with serving_cpu_cores the higher of that rate and the newest host read's (5b47ad5, 4,258 s): 28/28,
8/8, 28/28 within two (median +0, max +2: two CPU burns that breached before any host read had seen the burn).
New seed set 22000 at the compressed timing (5b47ad5, 3,346 s): 34/35 (a CPU burn never breached), 10/10, 33/34
within two (max +10: a prompt shift at 1 user request/s).
New seed set 23000 at the defaults (5916947, --seeds 4 --healthy 8, 4,258 s): 28/28, 8/8, 28/28 within two (max +2).
New seed set 25000 at the defaults with every fault x 5 seeds and 10 healthy runs (c535c1e, today's default
arguments, 5,323 s): 35/35, 10/10, 32/32 within two (median +0, max +2; three runs missed at injection, 'pre');
the same through 74e8e91's table (diagnosis_retable.py).
benchmarks/diagnosis_retable.py re-decides the traces through today's rule table in seconds. Late verdicts left: at
the compressed timing, long_prompts at 1 user request/s (the users' mean prompt of ~20 requests per window, against a
baseline learned from ~60-200, fills slowly while long prefills jam the engine) and load surges whose arrivals stand
out of Poisson noise only after the SLO's probes breached. benchmarks/detection_bound.py measures both against the
fastest detector there is at the same false-alarm rate: it too misses two evaluations after the breach in an expected
5% of the traced surges, sloguard in 6 of 72; in 19% of the long-prompt runs, sloguard in 29 of 89. The daemon's
defaults (300 s window, 15 s evaluations) are replayed in virtual time by benchmarks/diagnosis_defaults.py.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sloguard.bench.judge import wilson

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
RECORDED = ROOT / "tests" / "fixtures" / "incidents"


@dataclass(frozen=True)
class Profile:
    """The daemon's timing in a round: evaluations, scrapes, host reads, probes, the diagnosis window."""

    eval_s: float
    scrape: str  # the targets' scrape_interval and scrape_timeout lines ("" = the daemon's defaults)
    host: str  # the host source's interval line ("" = its default)
    probes: int  # probes per lane, each `probe_interval` apart
    probe_interval: str
    probe_timeout: str
    window: float  # diagnose.window, seconds
    diagnose: str  # the rest of the diagnose block ("" = its defaults)
    warmup: float
    observe: float
    restart_s: float  # engine_restart_s: a restart that breaches at this profile's scale
    tpot: str  # the SLO's p95 TPOT objective: one a CPU burn breaches at this profile's probe load
    parallel: int  # lanes per daemon round: one CPU burn a round, and the 2-core machine's load under ~1.5


# "compressed": the benchmark since 2026-11-27, the defaults' time compressed 15x (1 s evaluations, a 20 s window) so
# a seed set fits in an hour; the users' traffic is not compressed, so its windows hold 1/15 of the defaults' prompts.
# "defaults": the daemon's own defaults (15 s evaluations and scrapes, host source every 15 s, a 300 s diagnosis
# window, a 1 h baseline horizon, a 600 s restart hold); what the defaults do not fix is how many probes there are:
# three every 9 s put ~100 in the SLO's 5 min window (one default probe every 30 s would make its p95 the max of 10;
# one every 3 s needs a timeout under 3 s, and every slower request then counts against TPOT as cut short).
# Warm-up 750 s: the users' prompt baselines came at 611 s in a 900 s warm-up (settled values spanning a window,
# history.Baselines, after the first window). A restart of 30 s (vLLM reloading a model) instead of 6 s: the
# compressed 6 s is 90 s at this scale.
# The TPOT objective: healthy runs read a p95 of ~90-130 ms at the compressed profile's 2 probes/s, ~45-80 ms at the
# defaults' 1 probe per 3 s (a lighter engine), where a CPU burn reads ~95 ms: at 150 ms none of five burns breached.
# "defaults" is the default since 2026-11-29 (f6f4367): the goals are the daemon's at its own timing; the compressed
# timing gives its windows 1/15 of the users' traffic, where a change in their prompts is late for any detector.
PROFILES = {
    "compressed": Profile(1.0, "    scrape_interval: 1s\n    scrape_timeout: 900ms\n", "  interval: 1s\n", 10, "5s",
                          "4900ms", 20.0, ", baseline: 10m, restart_hold: 60s", 200.0, 75.0, 6.0, "150ms", 4),
    "defaults": Profile(15.0, "", "", 3, "9s", "8900ms", 300.0, "", 750.0, 300.0, 30.0, "100ms", 9),
}
PROFILE = PROFILES["defaults"]
TIME_SCALE = 2.0  # every model time × 2 (TPOT ~30 ms, TTFT ~0.15 s): a loaded 2-core machine's jitter stays small
BACKGROUND_RPS = 1.0  # with the time scale, the engine as busy as the default simulator at 2 requests/s
# p95 TTFT; healthy runs read ~0.3-0.8 s with the compressed profile's 2 probes/s, ~0.2-0.6 s with the defaults'
TTFT_OBJECTIVE, TPOT_OBJECTIVE = "1s", PROFILE.tpot
# fault class -> (expected cause, POST /sim/faults payload). Strong enough that the SLO breaches in every run: a
# fault that never breaches leaves nothing to diagnose (kv_blocks 288 and 192 did not breach in 1 of 5 runs each:
# they fill only when long background requests coincide; cpu_burn 0.85 and 0.95 did not in 3 of 5 until the
# simulator's burn slice followed --time-scale like its other model times, and 0.9 still did not in 2 of 5:
# ~2x the median TPOT, under the p95 objective where prefills of long background prompts set the p95).
FAULTS: dict[str, tuple[str, dict[str, Any]]] = {
    "load_surge": ("capacity", {"load_multiplier": 3.0}),
    "kv_shrink": ("kv_cache_pressure", {"kv_blocks": 160}),
    "long_prompts": ("long_prompts", {"prompt_scale": 4.0}),
    "gpu_throttle": ("gpu_throttled", {"gpu_clock_ratio": 0.4}),
    "cpu_burn": ("serving_cpu_bound", {"cpu_burn": 0.95}),
    "network_delay": ("network", {"network_delay_s": 0.8}),
    "engine_restart": ("engine_restart", {"engine_restart_s": 6.0}),
}


def free_port() -> int:
    """Return a TCP port that was free on loopback a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Lane:
    """One simulator + one SLO: a fault class (or healthy) and what was observed."""

    name: str
    fault: str  # "" = healthy
    seed: int
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    pid_file: str = ""
    causes: list[tuple[float, str, str]] = field(default_factory=list)  # (t since injection, stage, cause)
    breach_t: float | None = None
    pre_breach: bool = False  # an objective already missed at injection (no breach after injection to time)
    breach_at: float | None = None  # the daemon's evaluation time of the first breach seen after injection
    verdict_at: float | None = None  # ... and of the first correct verdict seen after injection
    pre_missed: frozenset[str] = frozenset()  # the objectives (metrics) missing at injection
    metric_breach_at: dict[str, float] = field(default_factory=dict)  # metric -> its first breach after injection
    verdict_metric: str | None = None  # the objective the first correct verdict explains (its `breach`)
    metric_onsets: dict[str, list[float]] = field(default_factory=dict)  # metric -> evaluation times it began missing
    missing: frozenset[str] = frozenset()  # the objectives missing at the previous poll
    summary: str = ""
    why: list[tuple[float, str]] = field(default_factory=list)  # (t, lever) whenever an unknown's lever changes
    trace: list[dict[str, Any]] = field(default_factory=list)  # every poll's diagnosis (--trace)
    arrivals: list[float] = field(default_factory=list)  # the simulator's record of its users' arrivals (wall time)

    @property
    def expected(self) -> str:
        return FAULTS[self.fault][0] if self.fault else "none"


def lane_config(lane: Lane) -> tuple[str, str, str, str]:
    p = PROFILE
    probes = "\n".join(
        f"  - {{name: {lane.name}-p{i}, target: {lane.name}, api: chat, interval: {p.probe_interval}, timeout:"
        f" {p.probe_timeout}, max_tokens: 24, prompts: [{{tokens: 128}}]}}" for i in range(p.probes))
    return f"""
  - name: {lane.name}
    engine: vllm
    metrics_url: http://127.0.0.1:{lane.port}/metrics
    api_url: http://127.0.0.1:{lane.port}
    model: sim-llama-3-8b
{p.scrape}    dcgm_url: http://127.0.0.1:{lane.port}/dcgm/metrics
""", probes, f"""
  - name: {lane.name}
    target: {lane.name}
    objectives: [{{metric: ttft, percentile: 95, threshold: {TTFT_OBJECTIVE}}},
                 {{metric: tpot, percentile: 95, threshold: {TPOT_OBJECTIVE}}}]
""", f"    - {{name: {lane.name}, target: {lane.name}, pid_file: {lane.pid_file}}}"


def daemon_config(lanes: list[Lane], listen: int, state: str, window: float) -> str:
    parts = [lane_config(lane) for lane in lanes]
    return (f"version: sloguard/v1\nlisten: 127.0.0.1:{listen}\nstate_dir: {state}\n"
            f"evaluation_interval: {PROFILE.eval_s:g}s\n"
            f"builtin_alerts: false\ntargets:{''.join(p[0] for p in parts)}probes:\n"
            + "\n".join(p[1] for p in parts) + f"\nslos:{''.join(p[2] for p in parts)}host:\n{PROFILE.host}"
            f"  processes:\n" + "\n".join(p[3] for p in parts)
            + f"\ndiagnose: {{window: {window:g}s{PROFILE.diagnose}}}\n")


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _post(url: str, body: dict[str, Any]) -> None:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5):
        pass


def _wait(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def _start_sim(lane: Lane, tmp: Path) -> None:
    lane.port = free_port()
    lane.proc = subprocess.Popen([PY, "-m", "sloguard", "sim", "--listen", f"127.0.0.1:{lane.port}", "--seed",
                                  str(lane.seed), "--enable-per-request-metrics", "--time-scale", str(TIME_SCALE),
                                  "--background-rps", str(BACKGROUND_RPS)], stdout=subprocess.DEVNULL)
    lane.pid_file = str(tmp / f"{lane.name}.pid")
    Path(lane.pid_file).write_text(str(lane.proc.pid))


def _observe(lanes: list[Lane], base: str, t0: float, observe: float) -> None:
    end = time.monotonic() + observe
    while time.monotonic() < end:
        t = time.monotonic() - t0
        try:
            doc = _get(f"{base}/api/v1/slos")
        except OSError:  # a poll that timed out on a loaded machine is skipped, not the whole benchmark lost
            time.sleep(PROFILE.eval_s / 2)
            continue
        by = {s["name"]: s for s in doc["slos"]}
        for lane in lanes:
            slo = by.get(lane.name) or {}
            d = slo.get("diagnosis") or {}
            cause, stage = d.get("cause", "none"), d.get("stage", "none")
            lane.trace.append({"t": round(t, 2), "at": slo.get("evaluated_at"),
                               "objectives": [(o["metric"], o["window"], o["compliant"])
                                              for o in slo.get("objectives", [])],
                               "cause": cause, "stage": stage, "lever": d.get("lever", ""),
                               "breach": (d.get("breach") or {}).get("metric"),
                               "evidence": d.get("evidence_text", []), "signals": d.get("signals", {})})
            if cause == "unknown" and (not lane.why or lane.why[-1][1] != d.get("lever", "")):
                lane.why.append((round(t, 1), d.get("lever", "")))
            if t >= 0 and lane.verdict_at is None and cause == lane.expected and lane.fault:
                lane.verdict_at, lane.verdict_metric = d.get("at"), (d.get("breach") or {}).get("metric")
            if not lane.causes or lane.causes[-1][2] != cause:
                lane.causes.append((t, stage, cause))
                if cause not in ("none", "unknown") and not lane.summary:
                    lane.summary = d.get("summary", "")
            shortest = min((o["window"] for o in slo.get("objectives", [])), key=_secs, default=None)
            misses = {o["metric"] for o in slo.get("objectives", []) if o["window"] == shortest
                      and o["compliant"] is False}
            if t < 0:  # as of the last poll before injection
                lane.pre_breach, lane.pre_missed = bool(misses), frozenset(misses)
                lane.missing = frozenset(misses)
                continue
            for metric in misses - lane.missing:
                lane.metric_onsets.setdefault(metric, []).append(slo.get("evaluated_at") or 0.0)
            lane.missing = frozenset(misses)
            if lane.breach_t is None and misses:
                lane.breach_t, lane.breach_at = t, slo.get("evaluated_at")
            for metric in misses:
                lane.metric_breach_at.setdefault(metric, slo.get("evaluated_at") or 0.0)
        time.sleep(PROFILE.eval_s / 2)


def _secs(w: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return float(w[:-1]) * units[w[-1]]


def fault_payload(fault: str) -> dict[str, Any]:
    """Return the fault's POST /sim/faults body at the profile's scale (only a restart's length differs)."""
    body = dict(FAULTS[fault][1])
    if "engine_restart_s" in body:
        body["engine_restart_s"] = PROFILE.restart_s
    return body


def rounds(todo: list[Lane], parallel: int) -> list[list[Lane]]:
    """Split the lanes into rounds of at most `parallel`, each taking every n-th lane.

    A fault's seeds then go to different rounds: five CPU burns of 0.95 core in one round of 45 lanes loaded 2 cores
    to 9 (2026-11-29), and no burning process got the core its evidence reads.
    """
    n = -(-len(todo) // parallel)
    return [todo[r::n] for r in range(n)]


def run_round(lanes: list[Lane], warmup: float, observe: float, window: float) -> None:
    with tempfile.TemporaryDirectory(prefix="sloguard-diag-") as tmpdir:
        tmp = Path(tmpdir)
        for lane in lanes:
            _start_sim(lane, tmp)
        listen = free_port()
        cfg = tmp / "sloguard.yaml"
        cfg.write_text(daemon_config(lanes, listen, str(tmp / "state"), window))
        daemon = subprocess.Popen([PY, "-m", "sloguard", "run", "-c", str(cfg)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{listen}"
        try:
            _wait(f"{base}/-/ready", time.monotonic() + 30)
            start = time.monotonic()
            _observe(lanes, base, start + warmup, warmup)  # healthy phase: a false cause counts there too
            for lane in lanes:
                if lane.fault:
                    _post(f"http://127.0.0.1:{lane.port}/sim/faults", fault_payload(lane.fault))
            _observe(lanes, base, time.monotonic(), observe)
            for lane in lanes:
                with contextlib.suppress(OSError):
                    lane.arrivals = _get(f"http://127.0.0.1:{lane.port}/sim/arrivals")["background"]
        finally:
            for p in [daemon, *(lane.proc for lane in lanes if lane.proc)]:
                p.terminate()
            for p in [daemon, *(lane.proc for lane in lanes if lane.proc)]:
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()


def users_burst(arrivals: Sequence[float], end: float, span: float, lookback: float = 60.0) -> int:
    """Return the most of the users' arrivals in any `span` s ending within the `lookback` s before `end`."""
    times = sorted(arrivals)
    ends = times[bisect.bisect_right(times, end - lookback):bisect.bisect_right(times, end)]
    return max((bisect.bisect_right(times, t) - bisect.bisect_right(times, t - span) for t in ends), default=0)


def burst_of(lane: Lane) -> tuple[int, int] | None:
    """Return the users' most arrivals in 5 s and in 20 s before a healthy run's first cause, or None."""
    at = next((p["at"] for p in lane.trace if p["cause"] not in ("none", "unknown") and p.get("at")), None)
    if lane.fault or at is None or not lane.arrivals:
        return None
    return users_burst(lane.arrivals, at, 5.0), users_burst(lane.arrivals, at, 20.0)


def verdict_of(lane: Lane) -> str:
    """Return the lane's verdict: the first cause other than none/unknown after injection (healthy: any time)."""
    after = [c for t, _, c in lane.causes if (t >= 0 or not lane.fault) and c not in ("none", "unknown")]
    return after[0] if after else "none/unknown"


def time_to_verdict(lane: Lane) -> float | None:
    """Return seconds from injection to the first correct verdict, or None."""
    return next((t for t, _, c in lane.causes if t >= 0 and c == lane.expected), None)


def is_pre(lane: Lane) -> bool:
    """Return True when the objective the verdict explains (else any objective) already missed at injection."""
    return lane.verdict_metric in lane.pre_missed if lane.verdict_metric else lane.pre_breach


def lag_of(lane: Lane) -> float | None:
    """Return correct verdict − breach of the objective it explains, in evaluation intervals; None without both,
    or when that objective already missed at injection (no breach after the fault to time from).

    The objective the verdict explains (its `breach`: TTFT for a network delay), not the first objective to
    miss: an unrelated TPOT blip before the TTFT breach is rightly "unknown" and would charge the verdict for
    it (traces: a network delay's verdict came 1 interval after TTFT breached, 6 after a TPOT blip).
    Counted between the daemon's own evaluation times (the verdict's `at`, the status's `evaluated_at`) of
    the first polls that show each, not between poll times (polls every half interval add their jitter).
    """
    if lane.verdict_at is None or lane.verdict_metric is None or is_pre(lane):
        return None
    breach = lane.metric_breach_at.get(lane.verdict_metric)
    return None if breach is None else round((lane.verdict_at - breach) / PROFILE.eval_s)


def lag_episode(lane: Lane) -> float | None:
    """Return correct verdict − onset of the breach episode it came in (the explained objective missing at every
    poll from that onset to the verdict), in evaluation intervals; None without an onset after injection.

    A breach that clears after one evaluation cannot be named (a cause is confirmed at 2 of 3 evaluations, so
    that one noisy evaluation never names one); lag_of() charges the verdict for such a blink before the
    breach that lasted (traces: a load surge's TPOT missed at one evaluation, cleared for 12 s, then missed for
    good and was named 1 interval later: +14 by lag_of()).
    """
    if lane.verdict_at is None or lane.verdict_metric is None:
        return None
    onsets = [o for o in lane.metric_onsets.get(lane.verdict_metric, []) if o <= lane.verdict_at]
    return round((lane.verdict_at - onsets[-1]) / PROFILE.eval_s) if onsets else None


def lag_any(lane: Lane) -> float | None:
    """Return correct verdict − first breach of any objective after injection (the stricter, older figure)."""
    if lane.verdict_at is None or lane.breach_at is None or lane.pre_breach:
        return None
    return round((lane.verdict_at - lane.breach_at) / PROFILE.eval_s)


def share(k: int, n: int) -> str:
    """Return k of n as a percentage with its two-sided 95% Wilson interval, e.g. '97% [85, 99]'."""
    lo, hi = wilson(k / n, n, 1.96) if n else (0.0, 1.0)
    return f"{k / max(1, n):.0%} [{lo * 100:.0f}, {hi * 100:.0f}]"


def report(lanes: list[Lane]) -> None:
    faulted = [lane for lane in lanes if lane.fault]
    healthy = [lane for lane in lanes if not lane.fault]
    classes = [*sorted({lane.expected for lane in faulted}), "none"]
    got = sorted({verdict_of(lane) for lane in lanes})
    print("\nconfusion matrix (rows: injected fault's cause; columns: verdict)")
    print(f"{'':18}" + "".join(f"{g[:16]:>17}" for g in got))
    for cls in classes:
        row = Counter(verdict_of(lane) for lane in lanes if lane.expected == cls)
        print(f"{cls:18}" + "".join(f"{row.get(g, 0):>17}" for g in got))
    right = [lane for lane in faulted if verdict_of(lane) == lane.expected]
    print(f"\nright cause: {len(right)}/{len(faulted)} faulted runs = {share(len(right), len(faulted))} (goal ≥ 90%)")
    breached = [lane for lane in faulted if lane.breach_t is not None]
    right_b = [lane for lane in breached if verdict_of(lane) == lane.expected]
    print(f"  of the faulted runs whose SLO breached within the observation: {len(right_b)}/{len(breached)} = "
          f"{len(right_b) / max(1, len(breached)):.0%}; {len(faulted) - len(breached)} never breached (verdict none:"
          " nothing to diagnose)")
    clean = [lane for lane in healthy if verdict_of(lane) == "none/unknown"]
    print(f"no false cause: {len(clean)}/{len(healthy)} healthy runs = {share(len(clean), len(healthy))} (goal ≥ 95%)")
    print("\nper fault: time from injection to the right verdict, and verdict − SLO breach in evaluation intervals")
    for fault in FAULTS:
        runs = [lane for lane in faulted if lane.fault == fault]
        if not runs:
            continue
        ttv = [time_to_verdict(lane) for lane in runs]
        lag = [lag_of(lane) for lane in runs]
        fmt = ", ".join("—" if v is None else f"{v:.1f}s" for v in ttv)
        lags = ", ".join("pre" if is_pre(lane) else "—" if v is None else f"{v:+.0f}"
                         for v, lane in zip(lag, runs, strict=True))
        print(f"  {fault:15} to verdict: {fmt}   vs breach: {lags}")
    timed = [v for lane in faulted if (v := lag_of(lane)) is not None]
    pre = [lane.name for lane in faulted if is_pre(lane)]
    if timed:
        print(f"verdict − breach of the objective it explains, over {len(timed)} runs that breached after injection"
              f" and got the right verdict: median {statistics.median(timed):+.0f}, max {max(timed):+.0f} evaluation"
              f" intervals; within 2: {sum(v <= 2 for v in timed)}/{len(timed)} = "
              f"{share(sum(v <= 2 for v in timed), len(timed))} (goal: within 2)")
    strict = [v for lane in faulted if (v := lag_any(lane)) is not None]
    if strict:
        print(f"  vs the first breach of any objective ({len(strict)} runs): median {statistics.median(strict):+.0f},"
              f" max {max(strict):+.0f}; within 2: {sum(v <= 2 for v in strict)}/{len(strict)}")
    episode = [v for lane in faulted if (v := lag_episode(lane)) is not None]
    if episode:
        print(f"  vs the onset of the breach episode the verdict came in ({len(episode)} runs): median "
              f"{statistics.median(episode):+.0f}, max {max(episode):+.0f}; within 2: "
              f"{sum(v <= 2 for v in episode)}/{len(episode)} (a breach that cleared after one evaluation is a blink,"
              " not the breach the verdict explains)")
    if pre:
        print(f"  objective already missed at injection (lag not timed, 'pre'): {', '.join(pre)}")
    print("\nexample verdict lines:")
    for fault in FAULTS:
        lane = next((lane for lane in right if lane.fault == fault and lane.summary), None)
        if lane is not None:
            print(f"  {fault}: {lane.summary}")
    wrong = [lane for lane in lanes if verdict_of(lane) != (lane.expected if lane.fault else "none/unknown")]
    for lane in wrong:
        burst = burst_of(lane)
        told = "" if burst is None else (
            f"; the users' own arrivals before it, as the simulator recorded them: at most {burst[0]} in 5 s and"
            f" {burst[1]} in 20 s (their rate {BACKGROUND_RPS:g}/s)")
        print(f"  WRONG {lane.name} ({lane.fault or 'healthy'}): {lane.causes}{told}")
    print("\nwhy unknown (after injection), faulted runs whose right verdict came > 2 intervals after the breach:")
    for lane in faulted:
        # by the lag the goal counts (between evaluation times): wall-clock jitter put +2 runs here before
        first, lag = time_to_verdict(lane), lag_of(lane)
        if lane.breach_t is not None and not is_pre(lane) and (first is None or (lag is not None and lag > 2)):
            print(f"  {lane.name}: breach {lane.breach_t:.1f}s, verdict {first}: "
                  f"{[w for w in lane.why if w[0] >= 0][:8]}")


def pool(paths: list[str]) -> None:
    """Print right cause, no false cause and verdict − breach within 2, pooled over --trace files."""
    runs = [run for path in paths for run in json.loads(Path(path).read_text()).values()]
    if any("verdict" not in run for run in runs):
        raise SystemExit("a trace without per-run results (written before --pool existed): run it again")
    faulted = [r for r in runs if r["fault"]]
    healthy = [r for r in runs if not r["fault"]]
    right = sum(r["verdict"] == r["expected"] for r in faulted)
    clean = sum(r["verdict"] == "none/unknown" for r in healthy)
    lags = [r["lag"] for r in faulted if r["lag"] is not None]
    print(f"pooled over {len(paths)} trace files: right cause {right}/{len(faulted)} = {share(right, len(faulted))};"
          f" no false cause {clean}/{len(healthy)} = {share(clean, len(healthy))}; verdict − breach within 2:"
          f" {sum(v <= 2 for v in lags)}/{len(lags)} = {share(sum(v <= 2 for v in lags), len(lags))}")


def cost(slos: int = 20, hours: float = 1.0) -> None:
    """Print the time one Diagnoser.step takes for `slos` probe SLOs with an hour of 1 result/s each."""
    import random

    from sloguard.clock import FakeClock
    from sloguard.config.load import load_config_text
    from sloguard.diagnose.service import Diagnoser
    from sloguard.model import Histogram, ModelView, ProbeResult, ServerView
    from sloguard.slo.engine import SLOEngine
    from sloguard.slo.model import slos_from_config
    from sloguard.windows.server import ServerWindows

    targets = "".join(f"  - {{name: t{i}, engine: vllm, metrics_url: 'http://127.0.0.1:1/m'}}\n" for i in range(slos))
    objectives = "[{metric: ttft, percentile: 95, threshold: 1s}, {metric: tpot, percentile: 95, threshold: 100ms}]"
    slo_text = "".join(f"  - {{name: s{i}, target: t{i}, objectives: {objectives}}}\n" for i in range(slos))
    cfg = load_config_text(f"version: sloguard/v1\ntargets:\n{targets}slos:\n{slo_text}")
    now, rng = 1e6, random.Random(0)
    engine, server, d = SLOEngine(slos_from_config(cfg), FakeClock(now)), ServerWindows(), Diagnoser(cfg)
    n = int(hours * 3600)
    engine.add_probe_results(ProbeResult(
        ts=now - n + k, probe="p", target=f"t{i}", model="m", api="chat", ok=True, ttft_s=rng.uniform(0.1, 0.3),
        e2e_s=1.0, tpot_s=0.02, connect_s=0.0, record="inband", server_ttft_s=0.1, network_s=0.003,
        queue_s=0.01, prefill_s=0.09, server_decode_s=0.8, head_s=0.003) for k in range(n) for i in range(slos))
    for k in range(0, n, 15):
        for i in range(slos):
            h = Histogram(((0.3, k), (float("inf"), k)), k, 0.001 * k)
            mv = ModelView("m", {"queue": h, "prefill": h}, {"requests_waiting": 0.0, "requests_running": 4.0,
                                                              "kv_cache_usage_ratio": 0.3},
                           {"prompt_tokens": 300.0 * k, "preemptions": 0.0}, {"stop": float(k)})
            server.add(ServerView(f"t{i}", "vllm", now - n + k, {"m": mv}))
    times = []
    for j in range(20):
        statuses = engine.evaluate(now + j, server)
        t0 = time.perf_counter()
        d.step(now + j, statuses, engine, server, [])
        times.append(time.perf_counter() - t0)
    print(f"diagnosis step, {slos} probe SLOs x {n} results and their server windows: median "
          f"{statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms per evaluation "
          f"({statistics.median(times) / slos * 1e3:.2f} ms per SLO)")


def main() -> int:
    global PROFILE, TTFT_OBJECTIVE, TPOT_OBJECTIVE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--healthy", type=int, default=10, help="healthy runs in total")
    ap.add_argument("--parallel", type=int, help="lanes per daemon round (the profile's: 9 / 4)")
    # 200 s: the users' prompt baselines count from 100 of their prefills (prompts.MIN_BASELINE_PREFILLS): at the
    # users' learned 0.84-1.1 requests/s ~120 s of settled healthy values plus a window; the newest third of a young
    # history is not yet settled (history.Baselines), so 180 s of values past the first full window. With 150 s
    # (seed set 5000) 13 of 45 lanes began their fault with the prompt baseline withheld (~90-105 prefills behind
    # it), and a long-prompt run was late for it (+33). 60 s until 2026-11-28.
    ap.add_argument("--profile", choices=sorted(PROFILES), default="defaults",
                    help="the daemon's timing: defaults (the daemon's own: 15 s evaluations and scrapes, a 300 s "
                    "window; ~18 min a round of 9 lanes, ~89 min a seed set) or compressed (1 s evaluations, a 20 s "
                    "window; ~56 min a seed set)")
    ap.add_argument("--warmup", type=float, help="healthy seconds before injection (default: the profile's, 200 / 750)")
    ap.add_argument("--observe", type=float, help="seconds observed after injection (the profile's: 75 / 300)")
    ap.add_argument("--window", type=float, help="diagnose.window in seconds (the profile's: 20 / 300)")
    ap.add_argument("--ttft", default=TTFT_OBJECTIVE, help="the SLO's p95 TTFT objective")
    ap.add_argument("--tpot", help="the SLO's p95 TPOT objective (the profile's: 100ms / 150ms)")
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--seed-base", type=int, default=100, help="simulator seeds: faulted runs base+0..seeds-1, "
                    "healthy runs base+400.. (validate on seeds not tuned on, e.g. --seed-base 1000)")
    ap.add_argument("--trace", default="", help="write every poll's diagnosis per lane to this JSON file")
    ap.add_argument("--cost", action="store_true", help="only measure the diagnosis step's own cost")
    ap.add_argument("--pool", nargs="+", metavar="TRACE", help="only print the goals pooled over earlier --trace files "
                    "(e.g. one per seed base)")
    ap.add_argument("--recorded", nargs="?", const=str(RECORDED), metavar="DIR", help="only the real engines: replay "
                    "the recorded incidents (default tests/fixtures/incidents) and print accuracy per source, in "
                    "seconds (benchmarks/diagnosis_recorded.py); the simulator's figures need the real-time run")
    args = ap.parse_args()
    if args.recorded:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import diagnosis_recorded

        return int(diagnosis_recorded.report(Path(args.recorded)))
    if args.pool:
        pool(args.pool)
        return 0
    if args.cost:
        cost()
        return 0
    PROFILE = PROFILES[args.profile]
    args.tpot = args.tpot or PROFILE.tpot
    parallel = args.parallel or PROFILE.parallel
    TTFT_OBJECTIVE, TPOT_OBJECTIVE = args.ttft, args.tpot
    warmup = PROFILE.warmup if args.warmup is None else args.warmup
    observe = PROFILE.observe if args.observe is None else args.observe
    window = PROFILE.window if args.window is None else args.window
    faults = [f for f in args.faults.split(",") if f]
    base = args.seed_base
    todo = [Lane(f"{f.replace('_', '-')}-{s}", f, base + s) for s in range(args.seeds) for f in faults]
    todo += [Lane(f"healthy-{i}", "", base + 400 + i) for i in range(args.healthy)]
    done: list[Lane] = []
    t0 = time.monotonic()
    for lanes in rounds(todo, parallel):
        run_round(lanes, warmup, observe, window)
        done += lanes
        for lane in lanes:
            print(f"[{time.monotonic() - t0:6.0f}s] {lane.name}: {verdict_of(lane)} (expected {lane.expected}); "
                  f"breach at {lane.breach_t}", flush=True)
    print(f"\n{len(done)} runs in {time.monotonic() - t0:.0f}s, {os.cpu_count()} CPUs, "
          f"evaluation every {PROFILE.eval_s:g}s, "
          f"diagnosis window {window:g}s, profile {args.profile}, p95 objectives TTFT {args.ttft} TPOT {args.tpot}, "
          f"seed base {base}, load average {os.getloadavg()}")
    report(done)
    if args.trace:
        Path(args.trace).write_text(json.dumps({lane.name: {
            "breach_t": lane.breach_t, "fault": lane.fault, "expected": lane.expected, "verdict": verdict_of(lane),
            "lag": lag_of(lane), "burst": burst_of(lane), "profile": args.profile, "eval_s": PROFILE.eval_s,
            "slo": {"ttft": args.ttft, "tpot": args.tpot},
            "trace": lane.trace} for lane in done}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
