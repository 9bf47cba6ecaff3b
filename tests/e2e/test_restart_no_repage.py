"""A SIGKILL + restart during an incident never re-pages: 4 incidents, a restart in each, give 4 firing + 4 resolved.

The rule reads `sloguard_probe_last_success_age_seconds`, which must continue across a restart (restored from
the store) instead of restarting at 0 (a false resolved 0.5 s after start, then a new page 3 s later).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.procs import (
    Proc,
    free_port,
    http_get,
    http_post,
    metric_value,
    sim_config,
    simulator,
    start_daemon,
    wait_until,
)
from support.slack_double import SlackDouble

pytestmark = pytest.mark.e2e
TOKEN_ENV = "SLOGUARD_E2E_SLACK_TOKEN"
INCIDENTS = 4
EXTRA = """  - {name: oncall, type: slack, token_env: TOKEN_ENV, channel: '#oncall', api_url: 'API_URL',
     match: {alertname: [ProbeStale]}, group_wait: 0s, group_interval: 1s, repeat_interval: 1h}
alerts:
  - {name: ProbeStale, expr: 'sloguard_probe_last_success_age_seconds{probe="sim-chat"} > 3', severity: page,
     summary: "no successful probe for 3s"}
""".replace("TOKEN_ENV", TOKEN_ENV)


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlackDouble]:
    with SlackDouble() as d:
        monkeypatch.setenv(TOKEN_ENV, d.token)
        yield d


def _age(d: Proc) -> float | None:
    return metric_value(http_get(f"{d.url}/metrics")[1].decode(), "sloguard_probe_last_success_age_seconds",
                        {"probe": "sim-chat"})


def _errors(d: Proc) -> float:
    text = http_get(f"{d.url}/metrics")[1].decode()
    return metric_value(text, "sloguard_probe_requests_total", {"probe": "sim-chat", "outcome": "error"}) or 0.0


def _stale(d: Proc) -> bool:
    """Return whether ProbeStale is firing now."""
    doc = json.loads(http_get(f"{d.url}/debug/alerts")[1])
    return any(dict(a["labels"]).get("alertname") == "ProbeStale" and a["state"] == "firing" for a in doc["active"])


def _waiting(d: Proc) -> list[dict[str, object]]:
    """Return the notifications the daemon's durable outbox has not yet had acknowledged."""
    return list(json.loads(http_get(f"{d.url}/debug/alerts")[1])["outbox"]["waiting"])


def _resolved(slack: SlackDouble) -> list[dict[str, object]]:
    return [c for c in list(slack.calls) if c["method"] == "chat.update" and c["ok"]
            and str(c.get("text", "")).startswith("RESOLVED: ")]


def test_restart_mid_incident_does_not_repage(tmp_path: Path, slack: SlackDouble) -> None:
    with simulator(tmp_path) as sim:
        text = sim_config(sim, free_port(), tmp_path / "state", extra=EXTRA.replace("API_URL", slack.api_url))
        daemon = start_daemon(tmp_path, text)
        try:
            for i in range(1, INCIDENTS + 1):
                # Counted from a calm start: a busy host can hold probes past 3 s without a fault (startup, a
                # stall), and that page, once resolved, is not the incident's.
                wait_until(lambda d=daemon: (_age(d) or 9) < 2 and not _stale(d), 60, "a calm start")  # type: ignore[misc]
                pages, resolved = len(slack.posted()), len(_resolved(slack))
                assert http_post(f"{sim.url}/sim/faults", {"error_rate": 1.0})[0] == 200
                wait_until(lambda n=pages: len(slack.posted()) > n, 60, f"firing message {i}")  # type: ignore[misc]
                # Killed between Slack's answer and the outbox's ack, a page is sent again after the restart (at
                # least once, by design; seen at load 10): this test is about the restored age, so it kills after.
                wait_until(lambda d=daemon: not _waiting(d), 30, f"firing message {i} acknowledged")  # type: ignore[misc]
                daemon.popen.send_signal(signal.SIGKILL)
                daemon.popen.wait(10)
                daemon = start_daemon(tmp_path, text)
                # The age continues from the stored last success: already past the threshold after the restart.
                wait_until(lambda d=daemon: (_age(d) or 0) > 3, 10, "the restored age")  # type: ignore[misc]
                # Long enough for the old failure mode (false resolved at +0.5 s, re-page at +3 s) to show.
                wait_until(lambda d=daemon: _errors(d) >= 5, 60, "5 failed probes after the restart")  # type: ignore[misc]
                assert len(slack.posted()) == pages + 1, "the restart re-paged"
                assert len(_resolved(slack)) == resolved, "the restart sent a false resolved"
                assert http_post(f"{sim.url}/sim/faults", method="DELETE")[0] in (200, 204)
                wait_until(lambda n=resolved: len(_resolved(slack)) > n, 60, f"resolved message {i}")  # type: ignore[misc]
            posted = slack.posted()
            assert len(posted) >= INCIDENTS  # every incident paged once; a busy host may have added its own
            assert len(_resolved(slack)) == len(posted)
            assert {str(c["ts"]) for c in _resolved(slack)} == {str(c["ts"]) for c in posted}
            assert "Traceback" not in daemon.output()
        finally:
            http_post(f"{sim.url}/sim/faults", method="DELETE")
            daemon.stop()
