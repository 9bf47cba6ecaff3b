"""`sloguard notify-test` and `check --notify` (issue 46 found 6: there was no way to send a test notification): a
marked message through each notifier's real delivery path, against the Slack double (bot and webhook), a real
Alertmanager and a webhook receiver; each answer printed, a failure exits 1, secrets never shown."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.alertmanager import alertmanager, alerts
from support.procs import ROOT, Proc, free_port, wait_until
from support.slack_double import TOKEN_ENV, SlackDouble

pytestmark = pytest.mark.e2e

HOOK_ENV, BROKEN_ENV = "SLOGUARD_E2E_SLACK_HOOK", "SLOGUARD_E2E_BROKEN_HOOK"
BROKEN_SECRET = "hunter2-in-the-url"
MARK = "[TEST] sloguard notification test from"


@pytest.fixture(scope="module")
def am(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    with alertmanager(tmp_path_factory.mktemp("am")) as proc:
        yield proc


@pytest.fixture
def slack() -> Iterator[SlackDouble]:
    with SlackDouble() as double:
        yield double


def _config(tmp: Path, slack: SlackDouble, am: Proc, broken: bool) -> Path:
    bad = (f"  - {{name: broken, type: webhook, url_with_secret_env: {BROKEN_ENV}}}\n" if broken else "")
    path = tmp / "sloguard.yaml"
    path.write_text(f"""version: sloguard/v1
state_dir: {tmp / "state"}
notifiers:
  - {{name: oncall, type: slack, token_env: {TOKEN_ENV}, channel: '#oncall', api_url: '{slack.api_url}',
     match: {{severity: [page]}}}}
  - {{name: hook, type: slack, webhook_url_env: {HOOK_ENV}}}
  - {{name: am, type: alertmanager, url: '{am.url}'}}
  - {{name: generic, type: webhook, url: 'http://127.0.0.1:{slack.port}/generic/hook'}}
  - {{name: console, type: log}}
{bad}""")
    return path


def _run(slack: SlackDouble, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, TOKEN_ENV: slack.token, HOOK_ENV: slack.webhook_url,
           BROKEN_ENV: f"http://127.0.0.1:{free_port()}/{BROKEN_SECRET}"}
    return subprocess.run([sys.executable, "-m", "sloguard", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120, check=False)


def test_every_notifier_answers_and_a_failure_exits_1(slack: SlackDouble, am: Proc, tmp_path: Path) -> None:
    out = _run(slack, "notify-test", "-c", str(_config(tmp_path, slack, am, broken=True)))
    assert out.returncode == 1, out
    lines = out.stdout.splitlines()
    assert lines[0].startswith("notifier oncall (slack): ok: posted to channel #oncall (ts 1700000000.")
    assert lines[1:] == ["notifier hook (slack): ok: accepted", "notifier am (alertmanager): ok: accepted",
                         "notifier generic (webhook): ok: accepted", "notifier console (log): ok: written to the log"]
    assert "notifier broken (webhook): FAILED: ClientConnectorError: Cannot connect to host 127.0.0.1" in out.stderr
    assert "(retryable)" in out.stderr and "Traceback" not in out.stderr
    for secret in (BROKEN_SECRET, slack.token, slack.webhook_path):
        assert secret not in out.stdout + out.stderr
    posted = slack.posted()
    assert [c["method"] for c in posted] == ["chat.postMessage", "webhook"]  # `match` does not hold a test back
    assert all(str(c["text"]).startswith(MARK) and "no action needed" in str(c["text"]) for c in posted)
    (generic,) = [c for c in slack.calls if c["method"] == "generic"]
    (alert,) = generic["json"]["alerts"]
    assert alert["labels"] == {"alertname": "SloguardNotificationTest", "severity": "info", "test": "true"}
    wait_until(lambda: bool(alerts(am, "SloguardNotificationTest")), 10, "the test alert in Alertmanager")
    (got,) = alerts(am, "SloguardNotificationTest")
    assert got["annotations"]["summary"].startswith(MARK) and got["labels"]["test"] == "true"


def test_one_notifier_and_check_notify(slack: SlackDouble, am: Proc, tmp_path: Path) -> None:
    cfg = str(_config(tmp_path, slack, am, broken=False))
    out = _run(slack, "notify-test", "-c", cfg, "--notifier", "generic")
    assert (out.returncode, out.stdout) == (0, "notifier generic (webhook): ok: accepted\n"), out
    assert [c["method"] for c in slack.calls] == ["generic"]
    out = _run(slack, "notify-test", "-c", cfg, "--notifier", "pager")
    assert out.returncode == 2
    assert "unknown notifier pager (configured: oncall, hook, am, generic, console)" in out.stderr
    slack.fail_next(2, "status", 503)  # the bot's postMessage and slack-sdk's one retry of it
    out = _run(slack, "check", "-c", cfg, "--notify")
    assert out.returncode == 1, out
    assert "notifier oncall (slack): FAILED: slack API HTTP 503 error=none (retryable)" in out.stderr
    assert "notifier am (alertmanager): ok: accepted" in out.stdout
    assert "notifier generic (webhook): ok: accepted" in out.stdout
