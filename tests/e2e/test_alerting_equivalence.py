"""The daemon's burn alerts and the generated Prometheus rules fire and resolve at the same evaluation.

For each fault class of issue 16 a stream of probe results (one per 15 s, as the config's probe schedules)
goes through the LIVE code path: SLOEngine (windows, censoring, budgets, evidence) -> its exported families
-> the alert engine with the burn rules the daemon builds, evaluated every minute. The counters and gauges
the daemon exports at each evaluation become promtool input series (scraped once a minute) for the rules
`sloguard rules` generates. At EVERY evaluation promtool must see exactly the alerts the daemon has firing,
with identical labels and annotations (burn, threshold, windows, budget left, coverage), and every class
must fire and resolve. Server SLOs the same way: a service of two replicas scraped once a minute through
ServerWindows (one replica slow, aborting, restarting mid-fault); Prometheus reads the per-replica counters.
"""

from __future__ import annotations

import math
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
from sloguard.model import Histogram, ModelView, ProbeResult, Sample, ServerView
from sloguard.rulegen.prometheus import SLO_RULES, generate
from sloguard.slo.engine import SLOEngine
from sloguard.slo.model import slos_from_config
from sloguard.windows.server import ServerWindows

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


Feed = Callable[[SLOEngine, ServerWindows, int], None]  # adds what happened in minute (t - 60 s, t], t = j * 60 s


def probe_feed(scenario: Scenario) -> Feed:
    def feed(slo_engine: SLOEngine, _: ServerWindows, j: int) -> None:
        t = j * EVAL  # the requests of the last minute end before the evaluation (and the scrape) at t
        slo_engine.add_probe_results([scenario(k)(BASE + k * STEP - STEP / 2)
                                      for k in range(max(1, (t - EVAL) // STEP + 1), t // STEP + 1)])
    return feed


def _run(config: str, feed: Feed, minutes: int = MINUTES, server: bool = False,
         ) -> tuple[dict[int, list[Alert]], dict[str, list[str]]]:
    """Return the live engine's firing alerts per evaluation time and the exported series per minute."""
    slos = slos_from_config(load_config_text(config))
    rules = [r for s in slos for r in burn_rules(s)]
    slo_engine, windows = SLOEngine(slos, FakeClock(BASE)), ServerWindows(max_age=86400.0)
    active: dict[str, Alert] = {}
    firing: dict[int, list[Alert]] = {}
    series: dict[str, list[str]] = {}
    for j in range(minutes + 1):
        t = j * EVAL
        feed(slo_engine, windows, j)
        samples = _samples(slo_engine.families(slo_engine.evaluate(BASE + t, windows if server else None)))
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


def _promtool(tmp_path: Path, config: str, tests: list[dict[str, Any]]) -> None:
    (tmp_path / SLO_RULES).write_text(generate(load_config_text(config))[SLO_RULES])
    doc = {"rule_files": [SLO_RULES], "evaluation_interval": f"{EVAL}s", "tests": tests}
    (tmp_path / "eq.test.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 20))
    proc = subprocess.run(["promtool", "test", "rules", "eq.test.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def _test(name: str, firing: dict[int, list[Alert]], series: dict[str, list[str]]) -> dict[str, Any]:
    checks = [{"eval_time": f"{t}s", "alertname": BURN_ALERT, "exp_alerts": _expected(alerts)}
              for t, alerts in firing.items()]
    return {"name": name, "interval": f"{EVAL}s",
            "input_series": [{"series": k, "values": " ".join(v)} for k, v in series.items()],
            "alert_rule_test": checks}


def _kinds(firing: dict[int, list[Alert]]) -> set[tuple[str, str, str]]:
    return {(dict(a.labels)["slo"], dict(a.labels)["sli"], dict(a.labels)["severity"])
            for alerts in firing.values() for a in alerts}


def test_daemon_and_generated_rules_fire_and_resolve_at_the_same_evaluation(tmp_path: Path) -> None:
    tests, seen, firings = [], {}, {}
    for name, scenario in SCENARIOS.items():
        firing, series = _run(CONFIG, probe_feed(scenario))
        firings[name] = firing
        seen[name] = _kinds(firing)
        assert seen[name], f"{name}: no burn alert fired in the daemon"
        last = {(dict(a.labels)["slo"], dict(a.labels)["severity"]) for a in firing[MINUTES * 60]}
        assert last <= STILL_FIRING, f"{name}: never resolved: {last}"
        tests.append(_test(name, firing, series))
    # What each class must page on (docs/definitions.md), in the daemon and therefore in Prometheus.
    assert ("ux", "latency", "page") in seen["latency fault, no failures"]
    assert not any(sli == "availability" for _, sli, _ in seen["latency fault, no failures"])
    assert ("ux-ttft", "latency", "page") not in seen["timeouts after the first token"]  # TTFT stays measured
    assert ("ux-ttft", "latency", "page") in seen["timeouts before the first token"]  # censored: misses
    assert ("ux", "availability", "page") in seen["10% errors, then an outage"]
    assert not any(t < 60 * 60 for t, alerts in firings["10% errors, then an outage"].items() for a in alerts
                   if dict(a.labels)["slo"] == "ux"), "1 failure at start and 2 minutes of 10% errors paged"
    _promtool(tmp_path, CONFIG, tests)


SERVER_CONFIG = """\
version: sloguard/v1
services:
  - {name: svc, engine: vllm, api_url: "http://127.0.0.1:1",
     replicas: [{name: r0, metrics_url: "http://127.0.0.1:1/metrics"}, {name: r1, metrics_url: "http://127.0.0.1:2/metrics"}]}
slos:
  - {name: srv, target: svc, source: server, error_budget_window: 6h,
     objectives: [{metric: ttft, percentile: 95, threshold: 500ms}, {metric: queue, percentile: 90, threshold: 100ms}]}
"""
SERVER_MINUTES, PER_MINUTE = 150, 40  # requests each replica serves a minute
TTFT_BOUNDS, QUEUE_BOUNDS = (0.1, 0.25, 0.5, 1.0, 2.5, math.inf), (0.05, 0.1, 0.5, 1.0, math.inf)
Minute = Callable[[str, int], tuple[float, float, int]]  # (replica, minute) -> (ttft, queue, aborted of PER_MINUTE)


class Replica:
    """One engine replica's cumulative /metrics: every request of a minute at one TTFT and queue time."""

    def __init__(self, name: str, served: int) -> None:
        self.name = name
        self.restart(served)  # a replica up for a while: its counts start high

    def restart(self, served: int = 0) -> None:
        self.ttft, self.queue = [float(served)] * len(TTFT_BOUNDS), [float(served)] * len(QUEUE_BOUNDS)
        self.served, self.aborted = float(served), 0.0

    def serve(self, ttft: float, queue: float, aborted: int) -> None:
        done = PER_MINUTE - aborted
        for counts, bounds, value in ((self.ttft, TTFT_BOUNDS, ttft), (self.queue, QUEUE_BOUNDS, queue)):
            for i, b in enumerate(bounds):
                counts[i] += done if value <= b else 0
        self.served, self.aborted = self.served + done, self.aborted + aborted

    def view(self, ts: float) -> ServerView:
        hists = {sig: Histogram(tuple(zip(bounds, counts, strict=True)), self.served, self.served * 0.1)
                 for sig, bounds, counts in (("ttft", TTFT_BOUNDS, self.ttft), ("queue", QUEUE_BOUNDS, self.queue))}
        return ServerView("svc", "vllm", ts, {"m": ModelView("m", histograms=hists,
                                                             finished_by_reason={"stop": self.served,
                                                                                 "abort": self.aborted})},
                          replica=self.name)


def server_feed(minute: Minute, restart_at: int | None = None) -> Feed:
    replicas = [Replica("r0", 1000), Replica("r1", 500)]

    def feed(_: SLOEngine, windows: ServerWindows, j: int) -> None:
        for r in replicas:
            if j == restart_at and r.name == "r1":
                r.restart()
            elif j > 0:
                r.serve(*minute(r.name, j))
            windows.add(r.view(BASE + j * EVAL - 1))  # scraped just before the evaluation at j minutes
    return feed


HEALTHY = (0.2, 0.01, 0)


def _slow_r1(replica: str, j: int) -> tuple[float, float, int]:
    return (0.8, 0.3, 0) if replica == "r1" and 30 <= j < 90 else HEALTHY


def _aborting_r0(replica: str, j: int) -> tuple[float, float, int]:
    return (0.2, 0.01, 12) if replica == "r0" and 30 <= j < 90 else HEALTHY


SERVER_SCENARIOS: dict[str, Feed] = {
    "one replica of two slow": server_feed(_slow_r1),
    "one replica aborts 30% of its requests": server_feed(_aborting_r0),
    "the slow replica restarts mid-fault": server_feed(_slow_r1, restart_at=60),
}


def test_server_slo_alerts_of_the_daemon_and_of_prometheus_over_replicas(tmp_path: Path) -> None:
    """Per-replica counters added up in Prometheus page and ticket exactly as the daemon's service-level windows."""
    tests, seen = [], {}
    for name, feed in SERVER_SCENARIOS.items():
        firing, series = _run(SERVER_CONFIG, feed, SERVER_MINUTES, server=True)
        seen[name] = _kinds(firing)
        assert not firing[SERVER_MINUTES * 60], f"{name}: never resolved"
        assert any('replica="r1"' in k for k in series) and any('replica="r0"' in k for k in series)
        tests.append(_test(name, firing, series))
    # half the service's requests slow: the TTFT budget pages, the queue budget (p90) tickets
    assert {("srv", "latency", "page"), ("srv", "latency", "ticket")} <= seen["one replica of two slow"]
    assert seen["the slow replica restarts mid-fault"] == seen["one replica of two slow"]
    assert seen["one replica aborts 30% of its requests"] == {("srv", "latency", "ticket")}
    _promtool(tmp_path, SERVER_CONFIG, tests)
