"""Seconds from a fault to the guardrail check alerts firing, at the default check settings.

Faults on the simulator (its default profile and background load): `leak_on_cancel` (a disconnected request
keeps generating: SloguardAbortNotPropagated) and `oversized_prompt: hang` (a prompt over the context length
is accepted and never answered: SloguardOversizedPromptMishandled). Both checks run at the defaults: every
30 s (`interval`), watching or waiting up to 20 s (`timeout`), alerting after 2 failed checks in a row, with
the daemon's default 15 s evaluation interval. Expected: the first check that starts after the fault (within
one interval) fails after its 20 s watch, the next one 30 s later fails too, and the next evaluation fires:
fault-to-alert in [30 + 20, 30 + 30 + 20 + 15] = [50, 95] s (+ a first token and a drain tick), ~72 s on
average. Also prints the healthy checks' measured times (time to release, time to reject).

Run: .venv/bin/python benchmarks/guardrails.py [--trials 3]   (about 2 minutes per trial)
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.procs import (
    Proc,
    free_port,
    http_get,
    http_post,
    metric_value,
    sim_target,
    simulator,
    start_daemon,
    wait_until,
)

INTERVAL, WATCH, EVAL, FAIL_AFTER = 30.0, 20.0, 15.0, 2
ALERTS = {"abort": "SloguardAbortNotPropagated", "oversized_prompt": "SloguardOversizedPromptMishandled"}
LOW, HIGH = INTERVAL + WATCH, 2 * INTERVAL + WATCH + EVAL


def config(sim: Proc, port: int, state: Path) -> str:
    """Return a daemon config with both checks at their defaults (no interval, timeout or bound set)."""
    return f"""\
version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
gpu: {{nvml: "off"}}
targets:
{sim_target(sim)}probes:
  - {{name: abort, target: sim, kind: abort}}
  - {{name: oversized, target: sim, kind: oversized_prompt}}
notifiers:
  - {{name: console, type: log}}
"""


def _page(d: Proc) -> str:
    return http_get(f"{d.url}/metrics")[1].decode()


def _firing(d: Proc, alert: str) -> bool:
    return (metric_value(_page(d), "sloguard_alerts", {"alertname": alert, "alertstate": "firing"}) or 0) > 0


def trial(tmp: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Return (healthy check seconds, fault-to-firing seconds) per check."""
    tmp.mkdir(parents=True, exist_ok=True)
    with simulator(tmp) as sim:
        daemon = start_daemon(tmp, config(sim, free_port(), tmp / "state"))
        try:
            def passed(check: str) -> bool:
                return (metric_value(_page(daemon), "sloguard_check_passed", {"check": check}) or 0) == 1
            wait_until(lambda: all(passed(c) for c in ALERTS), 3 * INTERVAL + WATCH, "both checks passing")
            healthy = {c: metric_value(_page(daemon), "sloguard_check_seconds", {"check": c}) or float("nan")
                       for c in ALERTS}
            time.sleep(random.uniform(0.0, INTERVAL))  # a random phase in the check schedule
            t0 = time.monotonic()
            http_post(f"{sim.url}/sim/faults", {"leak_on_cancel": True, "oversized_prompt": "hang"})
            detect: dict[str, float] = {}
            deadline = t0 + 2 * HIGH
            while len(detect) < len(ALERTS) and time.monotonic() < deadline:
                for check, alert in ALERTS.items():
                    if check not in detect and _firing(daemon, alert):
                        detect[check] = time.monotonic() - t0
                time.sleep(0.5)
            return healthy, detect
        finally:
            daemon.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    healthy: dict[str, list[float]] = {c: [] for c in ALERTS}
    detect: dict[str, list[float]] = {c: [] for c in ALERTS}
    for i in range(args.trials):
        with tempfile.TemporaryDirectory() as d:
            ok, found = trial(Path(d) / f"t{i}")
        for c in ALERTS:
            healthy[c].append(ok[c])
            detect[c].append(found.get(c, float("inf")))
        line = ", ".join(f"{c} healthy {ok[c] * 1e3:.0f} ms, detected {found.get(c, float('inf')):.1f} s"
                         for c in ALERTS)
        print(f"trial {i + 1}: {line}", flush=True)
    print(f"\nexpected fault-to-alert at the defaults: {LOW:.0f}-{HIGH:.0f} s (+ first token, drain tick)")
    for c, alert in ALERTS.items():
        d = sorted(detect[c])
        print(f"{alert}: fault to firing median {statistics.median(d):.1f} s, min {d[0]:.1f} s, max {d[-1]:.1f} s "
              f"({args.trials} trials); healthy check {statistics.median(healthy[c]) * 1e3:.0f} ms median")
    return 0 if all(v <= HIGH + 10 for d in detect.values() for v in d) else 1


if __name__ == "__main__":
    sys.exit(main())
