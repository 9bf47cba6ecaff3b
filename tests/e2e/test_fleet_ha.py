"""HA without double pages: two daemons, one lock file, one Slack; each incident is paged exactly once.

Incidents are driven through discovery (a service whose file_sd list empties fires `NoReplicas`), so both
daemons see the same incident at the same moment. The leader (holder of ha.lock_file) sends; the other one
queues the same page and drops it as `standby` once it is older than the handover window. The leader is then
SIGKILLed and a second incident starts: the survivor takes over and pages it, once. The failover figures are
printed: kill -> the survivor leads, kill -> the next page.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from support.slack_double import TOKEN_ENV, SlackDouble

from tests.support.procs import free_port, http_get, metric_value, simulator, start_daemon, wait_until

RULES = """\
alerts:
  - {name: NoReplicas, expr: 'sloguard_service_replicas < 1', for: 0s, severity: page,
     summary: "no replicas of {{ $labels.target }}"}
"""


def config(port: int, state: Path, tmp: Path, api_url: str, me: str) -> str:
    return f"""\
version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
builtin_alerts: false
ha: {{mode: file_lock, lock_file: "{tmp / 'leader.lock'}", identity: {me}, lease_duration: 4s, retry_period: 500ms}}
discovery:
  - {{name: a, file_sd: {{files: ["{tmp / 'a.json'}"]}}}}
  - {{name: b, file_sd: {{files: ["{tmp / 'b.json'}"]}}}}
services:
  - {{name: a, engine: vllm, discovery: a, scrape_interval: 1s, scrape_timeout: 900ms}}
  - {{name: b, engine: vllm, discovery: b, scrape_interval: 1s, scrape_timeout: 900ms}}
{RULES}notifiers:
  - {{name: oncall, type: slack, token_env: {TOKEN_ENV}, channel: '#oncall', api_url: '{api_url}',
     match: {{alertname: [NoReplicas]}}, group_by: [alertname, target], group_wait: 0s, group_interval: 1s,
     repeat_interval: 1h, send_resolved: false}}
"""


def value(url: str, name: str, labels: dict[str, str]) -> float:
    return metric_value(http_get(f"{url}/metrics")[1].decode(), name, labels) or 0.0


def test_two_daemons_page_each_incident_once_and_fail_over(tmp_path: Path, slack: SlackDouble) -> None:
    with simulator(tmp_path, seed=5) as sim:
        target = [{"targets": [sim.url.removeprefix("http://")], "labels": {"replica": "r0"}}]
        for name in ("a", "b"):
            (tmp_path / f"{name}.json").write_text(json.dumps(target))
        ports = [free_port(), free_port()]
        first = start_daemon(tmp_path, config(ports[0], tmp_path / "s1", tmp_path, slack.api_url, "one"),
                             name="one.yaml")
        leader = {"mode": "file_lock", "identity": "one"}
        wait_until(lambda: value(first.url, "sloguard_ha_leader", leader) == 1, 30, "the first daemon leads")
        second = start_daemon(tmp_path, config(ports[1], tmp_path / "s2", tmp_path, slack.api_url, "two"),
                              name="two.yaml")
        follower = {"mode": "file_lock", "identity": "two"}
        try:
            wait_until(lambda: value(second.url, "sloguard_service_replicas", {"target": "a"}) == 1, 30,
                       "the second daemon sees service a")
            assert value(second.url, "sloguard_ha_leader", follower) == 0

            (tmp_path / "a.json").write_text("[]")  # incident A, seen by both
            wait_until(lambda: len(slack.posted()) >= 1, 30, "incident A paged")
            standby = {"notifier": "oncall", "outcome": "standby"}
            wait_until(lambda: value(second.url, "sloguard_notifications_total", standby) >= 1, 30,
                       "the standby daemon dropped its copy of page A")
            assert len(slack.posted()) == 1, slack.posted()
            assert value(second.url, "sloguard_notifications_total", {"notifier": "oncall", "outcome": "sent"}) == 0

            os.kill(first.popen.pid, signal.SIGKILL)
            killed = time.monotonic()
            (tmp_path / "b.json").write_text("[]")  # incident B starts as the leader dies
            wait_until(lambda: value(second.url, "sloguard_ha_leader", follower) == 1, 30, "the survivor leads")
            took_over = time.monotonic() - killed
            wait_until(lambda: len(slack.posted()) >= 2, 30, "incident B paged by the survivor")
            paged = time.monotonic() - killed
            time.sleep(3)  # room for a duplicate to show (the handover window is 4 s; A's copy is long dropped)
            posted = slack.posted()
            assert len(posted) == 2, posted
            assert "no replicas of a" in str(posted[0]["text"]) and "no replicas of b" in str(posted[1]["text"])
            print(f"\nfailover: SIGKILL -> survivor leads {took_over:.2f}s, SIGKILL -> next page {paged:.2f}s "
                  "(lease_duration 4s, retry_period 0.5s, evaluation 1s)")
        finally:
            second.stop()
            if first.popen.poll() is None:
                first.stop()
