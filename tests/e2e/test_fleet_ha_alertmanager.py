"""HA through Alertmanager: two daemons in `ha.mode: alertmanager` page one real Alertmanager once per incident.

Both daemons probe one simulator and evaluate the same SLO; an injected outage makes both fire the same page
(identical labels: alertname, severity, slo, sli; nothing that names the daemon) and send it, re-sending every
second. Alertmanager runs the configuration `sloguard rules` writes (alerts/alertmanager.example.yml: grouping by
alertname, slo, sli, severity; tickets inhibited by their page) with its receivers pointed at a webhook here and
its timings shortened. It must hold one alert, not two, and send exactly one notification for the page, however
many times the two daemons send it. The waits are hang guards; nothing is timed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.alertmanager import Webhook, alertmanager
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
from support.threadserver import ThreadServer

from sloguard.rulegen.alertmanager import config as example

pytestmark = pytest.mark.e2e
GROUP_INTERVAL = 2  # seconds; the example's 5m, shortened so that "no second notification" is seen in seconds
PAGE = {"alertname": "SloguardErrorBudgetBurn", "severity": "page", "slo": "chat", "sli": "availability"}


def am_config(hook: str) -> str:
    """Return the example Alertmanager configuration, receivers at `hook`, timings shortened."""
    doc = example()
    doc["route"] |= {"group_wait": "1s", "group_interval": f"{GROUP_INTERVAL}s"}
    for receiver in doc["receivers"]:
        receiver["webhook_configs"][0]["url"] = f"{hook}/{receiver['name']}"
    return yaml.safe_dump(doc, sort_keys=False)


def config(sim: Proc, port: int, state: Path, am: str, me: str) -> str:
    return f"""\
version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
builtin_alerts: false
ha: {{mode: alertmanager, identity: {me}}}
targets:
{sim_target(sim)}probes:
  - {{name: chat, target: sim, api: chat, interval: 500ms, timeout: 400ms, max_tokens: 8}}
slos:
  - {{name: chat, target: sim, error_rate: {{target: 0.99}}, error_budget_window: 1d}}
notifiers:
  - {{name: am, type: alertmanager, url: "{am}", resend_interval: 1s}}
diagnose: {{enabled: false}}
"""


def sent(d: Proc) -> float:
    text = http_get(f"{d.url}/metrics")[1].decode()
    return metric_value(text, "sloguard_notifications_total", {"notifier": "am", "outcome": "sent"}) or 0.0


def firing(d: Proc) -> bool:
    """Return whether the daemon has the page firing (its /debug/alerts), with exactly the page's labels."""
    active = json.loads(http_get(f"{d.url}/debug/alerts")[1])["active"]
    return any(dict(a["labels"]) == PAGE and a["state"] == "firing" for a in active)


def am_alerts(am: Proc) -> list[dict[str, Any]]:
    doc: list[dict[str, Any]] = json.loads(http_get(f"{am.url}/api/v2/alerts")[1])
    return [a for a in doc if a["labels"].get("slo") == "chat"]


def page_notifications(hook: Webhook) -> list[dict[str, Any]]:
    """Return the notifications that carry the page firing."""
    return [n for n in hook.notifications("/pages") for a in n["alerts"]
            if a["status"] == "firing" and all(a["labels"].get(k) == v for k, v in PAGE.items())]


def test_two_daemons_one_alertmanager_one_notification_per_page(tmp_path: Path) -> None:
    hook = Webhook()
    with ThreadServer(hook.app) as server, alertmanager(tmp_path, am_config(server.url)) as am, \
            simulator(tmp_path, extra=("--time-scale", "0.1")) as sim:
        daemons: list[Proc] = []
        try:
            for me in ("one", "two"):
                daemons.append(start_daemon(tmp_path, config(sim, free_port(), tmp_path / me, am.url, me),
                                            name=f"{me}.yaml"))
            assert http_post(f"{sim.url}/sim/faults", {"error_rate": 1.0})[0] == 200
            wait_until(lambda: all(firing(d) for d in daemons), 120, "both daemons firing the page")
            wait_until(lambda: bool(page_notifications(hook)), 60, "the page notification")
            base = [sent(d) for d in daemons]
            # Both keep sending it every second: wait for three more sends from each, spanning group intervals.
            wait_until(lambda: all(sent(d) >= b + 3 for d, b in zip(daemons, base, strict=True)), 60,
                       "three more sends of the firing page from each daemon")
            pages = [a for a in am_alerts(am) if a["labels"].get("severity") == "page"]
            assert len(pages) == 1 and pages[0]["labels"] == PAGE, pages  # one alert: nothing names the daemon
            assert len(page_notifications(hook)) == 1, hook.notifications("/pages")
            for ticket in (a for a in am_alerts(am) if a["labels"].get("severity") == "ticket"):
                assert ticket["status"]["state"] == "suppressed", ticket  # the example's inhibit rule holds
            print(f"\n2 daemons sent the page {sum(sent(d) for d in daemons):.0f} times; Alertmanager held 1 alert "
                  f"and sent 1 notification")
        finally:
            for d in daemons:
                d.stop()
