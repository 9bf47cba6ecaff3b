"""Simulator → fault → daemon → SLO burn → Slack double, through 429/5xx and a SIGKILL mid-delivery.

Also measures, once each, fault-to-notification time for the daemon's Slack path and for the generated
rules in a real Prometheus (printed; run with -s to see the figures).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from support.procs import (
    Proc,
    free_port,
    http_get,
    http_post,
    metric_value,
    prom_query,
    prometheus,
    sim_config,
    simulator,
    start_daemon,
    wait_until,
)
from support.slack_double import BURN_RULE, SlackDouble, slack_notifier

from sloguard.config.load import load_config_text
from sloguard.rulegen.prometheus import generate

pytestmark = pytest.mark.e2e


def metrics(d: Proc) -> str:
    return http_get(f"{d.url}/metrics")[1].decode()


def good_requests(d: Proc) -> float:
    return metric_value(metrics(d), "sloguard_slo_requests_total", {"slo": "sim-latency", "good": "true"}) or 0.0


def updates(slack: SlackDouble) -> list[dict[str, object]]:
    return [c for c in list(slack.calls) if c["method"] == "chat.update" and c["ok"]]


def test_fault_to_slack_and_back_survives_429_5xx_and_sigkill(tmp_path: Path, slack: SlackDouble) -> None:
    # 10x faster simulator: requests take ~30 ms against the 900 ms probe timeout, so a busy CI host cannot time
    # them out and page before the fault (it did, under stress-ng --cpu 2); only the injected errors burn budget.
    with simulator(tmp_path, extra=("--time-scale", "0.1")) as sim:
        port = free_port()
        text = sim_config(sim, port, tmp_path / "state", extra=slack_notifier(slack.api_url) + BURN_RULE)
        daemon = start_daemon(tmp_path, text)
        try:
            wait_until(lambda: good_requests(daemon) >= 15, 60, "15 good probe requests")
            slack.fail_next(2, "ratelimit", 1)
            slack.fail_next(2, "status", 503)
            t0 = time.monotonic()
            assert http_post(f"{sim.url}/sim/faults", {"error_rate": 1.0})[0] == 200
            wait_until(lambda: len(slack.posted()) >= 1, 90, "the firing message")
            print(f"\nfault → Slack firing message (through 2×429 + 2×503): {time.monotonic() - t0:.1f}s")
            post = slack.posted()[0]
            assert str(post["text"]).startswith("PAGE: SLOBurnFast") and not slack.faults
            # The resolved update hangs in the receiver; the daemon dies with it in flight, then restarts.
            slack.fail_next(1, "slow", 4)
            started = slack.started
            assert http_post(f"{sim.url}/sim/faults", method="DELETE")[0] in (200, 204)
            wait_until(lambda: slack.started > started, 120, "the resolved update to be in flight")
            daemon.popen.send_signal(signal.SIGKILL)
            daemon.popen.wait(10)
            daemon = start_daemon(tmp_path, text)
            wait_until(lambda: len(updates(slack)) >= 1, 60, "the resolved update after restart")
            wait_until(lambda: metric_value(metrics(daemon), "sloguard_outbox_pending", {"notifier": "oncall"}) == 0,
                       30, "an empty outbox")
            # A re-page after the restart would show up within a few evaluations: count them by judged requests
            # (one probe a second, judged at each evaluation), not by sleeping, which a busy host makes too short.
            seen = good_requests(daemon)
            wait_until(lambda: good_requests(daemon) >= seen + 3, 30, "three more judged probe requests")
            assert len(slack.posted()) == 1, "the restart re-paged"
            ups = updates(slack)
            assert 1 <= len(ups) <= 2 and all(u["ts"] == post["ts"] for u in ups)
            assert str(slack.messages[str(post["ts"])]["text"]).startswith("RESOLVED: ")
            dup = metric_value(metrics(daemon), "sloguard_notifications_total",
                               {"notifier": "oncall", "outcome": "duplicate_possible"})
            assert dup == 1.0
        finally:
            daemon.stop()


def test_prometheus_path_fires_on_generated_rules(tmp_path: Path) -> None:
    with simulator(tmp_path) as sim:
        port = free_port()
        text = sim_config(sim, port, tmp_path / "state")
        rules = []
        for name, body in generate(load_config_text(text), "e2e.yaml").items():
            (tmp_path / name).write_text(body)
            rules.append(tmp_path / name)
        daemon = start_daemon(tmp_path, text)
        try:
            with prometheus(tmp_path, port, tuple(rules)) as prom:
                wait_until(lambda: good_requests(daemon) >= 10, 60, "10 good probe requests")
                wait_until(lambda: bool(prom_query(prom, 'sloguard_slo_requests_total{slo="sim-latency"}')), 30,
                           "Prometheus to scrape the counters")
                t0 = time.monotonic()
                assert http_post(f"{sim.url}/sim/faults", {"error_rate": 1.0})[0] == 200
                query = 'ALERTS{alertname="SloguardErrorBudgetBurn",alertstate="firing",severity="page"}'
                wait_until(lambda: bool(prom_query(prom, query)), 90, "the burn-rate alert in Prometheus")
                print(f"\nfault → Prometheus firing SloguardErrorBudgetBurn (generated rules, 1s scrape/eval): "
                      f"{time.monotonic() - t0:.1f}s")
        finally:
            http_post(f"{sim.url}/sim/faults", method="DELETE")
            daemon.stop()
