"""The daemon's burn alerts and the generated Prometheus rules fire and resolve at the same evaluation.

For each fault class of issue 16 a stream of probe results (one per 15 s, as the config's probe schedules)
goes through the LIVE code path: SLOEngine (windows, censoring, budgets, evidence) -> its exported families
-> the alert engine with the burn rules the daemon builds, evaluated every minute. The counters and gauges
the daemon exports at each evaluation become promtool input series (scraped once a minute) for the rules
`sloguard rules` generates. At EVERY evaluation promtool must see exactly the alerts the daemon has firing,
with identical labels and annotations (burn, threshold, windows, budget left, coverage), and every class
must fire and resolve.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from sloguard.alerts import engine
from sloguard.alerts.engine import Alert
from sloguard.alerts.rules import BURN_ALERT, burn_rules
from sloguard.clock import FakeClock
from sloguard.config.load import load_config_text
from sloguard.model import ProbeResult, Sample
from sloguard.rulegen.prometheus import SLO_RULES, generate
from sloguard.slo.engine import SLOEngine
from sloguard.slo.model import slos_from_config

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not on PATH")
STEP, EVAL, MINUTES = 15, 60, 240  # probe interval (s), evaluation and scrape interval (s), run length (min)
BASE = 1_000_000.0  # engine time of promtool's t = 0
CONFIG = """\
version: sloguard/v1
targets: [{name: sim, api_url: "http://127.0.0.1:1"}]
probes: [{name: chat, target: sim, interval: 15s, timeout: 1900ms}]
slos:
  - {name: ux, target: sim, goodput: {ttft: 800ms, target: 0.99}, error_rate: {target: 0.99}, error_budget_window: 1d,
     objectives: [{metric: ttft, percentile: 95, threshold: 1s}]}
  - {name: ux-ttft, target: sim, objectives: [{metric: ttft, percentile: 90, threshold: 1s}], error_budget_window: 1d}
  - {name: ux-28d, target: sim, error_rate: {target: 0.999}, error_budget_window: 28d}
"""
FAMILIES = ("sloguard_slo_error_budget_remaining_ratio", "sloguard_slo_window_coverage_ratio")


def _result(ts: float, **kw: Any) -> ProbeResult:
    values: dict[str, Any] = {"ok": True, "ttft_s": 0.2, "e2e_s": 0.6, "connect_s": 0.001, "elapsed_s": 0.6, **kw}
    return ProbeResult(ts=ts, probe="chat", target="sim", model="m", api="chat", **values)


def healthy(ts: float) -> ProbeResult:
    return _result(ts)


def slow(ts: float) -> ProbeResult:  # a latency fault, every request succeeds
    return _result(ts, ttft_s=2.0, e2e_s=2.5, elapsed_s=2.5)


def timeout_after_first_token(ts: float) -> ProbeResult:
    return _result(ts, ok=False, error="timeout after 1.9s", ttft_s=0.5, e2e_s=0.7, elapsed_s=1.9)


def timeout_before_first_token(ts: float) -> ProbeResult:
    return _result(ts, ok=False, error="timeout after 1.9s", ttft_s=None, e2e_s=None, elapsed_s=1.9)


def error(ts: float) -> ProbeResult:
    return _result(ts, ok=False, error="http 500: injected", ttft_s=None, e2e_s=None, elapsed_s=0.01)


Scenario = Callable[[int], Callable[[float], ProbeResult]]  # probe request k (4 a minute) -> its factory


def _fault(fault: Callable[[float], ProbeResult]) -> Scenario:
    return lambda k: fault if 30 <= k // 4 < 90 else healthy


SCENARIOS: dict[str, Scenario] = {
    "latency fault, no failures": _fault(slow),
    "timeouts after the first token": _fault(timeout_after_first_token),
    "timeouts before the first token": _fault(timeout_before_first_token),
    # a fresh install's first request fails, minutes 20-21 have 10% errors, minutes 60-119 are an outage
    "10% errors, then an outage": lambda k: (error if k == 1 or (80 <= k < 88 and k % 10 == 0)
                                             or 240 <= k < 480 else healthy),
}
STILL_FIRING = {("ux-28d", "ticket")}  # its 3d/6h row: the 6h short window still holds the outage


def _samples(families: list[Any]) -> list[Sample]:
    return [Sample(s.name, dict(s.labels), float(s.value)) for f in families for s in f.samples]


def _run(scenario: Scenario) -> tuple[dict[int, list[Alert]], dict[str, list[str]]]:
    """Return the live engine's firing alerts per evaluation time and the exported series per 15 s step."""
    cfg = load_config_text(CONFIG)
    slos = slos_from_config(cfg)
    rules = [r for s in slos for r in burn_rules(s)]
    slo_engine = SLOEngine(slos, FakeClock(BASE))
    active: dict[str, Alert] = {}
    firing: dict[int, list[Alert]] = {}
    series: dict[str, list[str]] = {}
    for j in range(MINUTES + 1):
        t = j * EVAL
        # the requests of the last minute end before the evaluation (and the scrape) at t
        slo_engine.add_probe_results([scenario(k)(BASE + k * STEP - STEP / 2)
                                      for k in range(max(1, (t - EVAL) // STEP + 1), t // STEP + 1)])
        samples = _samples(slo_engine.families(slo_engine.evaluate(BASE + t)))
        for s in samples:
            if s.name == "sloguard_slo_requests_total" or s.name in FAMILIES:
                key = s.name + "{" + ",".join(f'{n}="{v}"' for n, v in sorted(s.labels.items())) + "}"
                series.setdefault(key, ["_"] * j).append(repr(s.value))
        for values in series.values():
            values.extend(["_"] * (j + 1 - len(values)))
        active, _ = engine.evaluate(rules, active, samples, BASE + t)
        firing[t] = [a for a in active.values() if a.state == "firing"]
    return firing, series


def _expected(alerts: list[Alert]) -> list[dict[str, Any]]:
    return [{"exp_labels": {k: v for k, v in a.labels if k != "alertname"}, "exp_annotations": dict(a.annotations)}
            for a in sorted(alerts, key=lambda a: a.labels)]


def test_daemon_and_generated_rules_fire_and_resolve_at_the_same_evaluation(tmp_path: Path) -> None:
    (tmp_path / SLO_RULES).write_text(generate(load_config_text(CONFIG))[SLO_RULES])
    tests, seen, firings = [], {}, {}
    for name, scenario in SCENARIOS.items():
        firing, series = _run(scenario)
        firings[name] = firing
        kinds = {(dict(a.labels)["slo"], dict(a.labels)["sli"], dict(a.labels)["severity"])
                 for alerts in firing.values() for a in alerts}
        seen[name] = kinds
        assert kinds, f"{name}: no burn alert fired in the daemon"
        last = {(dict(a.labels)["slo"], dict(a.labels)["severity"]) for a in firing[MINUTES * 60]}
        assert last <= STILL_FIRING, f"{name}: never resolved: {last}"
        checks = [{"eval_time": f"{t}s", "alertname": BURN_ALERT, "exp_alerts": _expected(alerts)}
                  for t, alerts in firing.items()]
        tests.append({"name": name, "interval": f"{EVAL}s",
                      "input_series": [{"series": k, "values": " ".join(v)} for k, v in series.items()],
                      "alert_rule_test": checks})
    # What each class must page on (README "Exact definitions"), in the daemon and therefore in Prometheus.
    assert ("ux", "latency", "page") in seen["latency fault, no failures"]
    assert not any(sli == "availability" for _, sli, _ in seen["latency fault, no failures"])
    assert ("ux-ttft", "latency", "page") not in seen["timeouts after the first token"]  # TTFT stays measured
    assert ("ux-ttft", "latency", "page") in seen["timeouts before the first token"]  # censored: misses
    assert ("ux", "availability", "page") in seen["10% errors, then an outage"]
    assert not any(t < 60 * 60 for t, alerts in firings["10% errors, then an outage"].items() for a in alerts
                   if dict(a.labels)["slo"] == "ux"), "1 failure at start and 2 minutes of 10% errors paged"
    doc = {"rule_files": [SLO_RULES], "evaluation_interval": f"{EVAL}s", "tests": tests}
    (tmp_path / "eq.test.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 20))
    proc = subprocess.run(["promtool", "test", "rules", "eq.test.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
