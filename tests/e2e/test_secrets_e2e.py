"""Secrets (API key, Slack token, webhook URL) never appear in logs, /metrics, /debug/* or /api/v1/slos,
even while deliveries to an unreachable Slack fail and are retried."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.procs import free_port, http_get, metric_value, sim_config, simulator, start_daemon, wait_until

pytestmark = pytest.mark.e2e
API_KEY = "sk-live-3f9a1c7e5b2d4f60"
SLACK_TOKEN = "xoxb-1111-2222-abcdefSECRET"
HOOK_PATH = "/services/T000/B000/SECRETPATH42"


def test_secrets_stay_out_of_every_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIM_API_KEY", API_KEY)
    monkeypatch.setenv("SLACK_TOKEN", SLACK_TOKEN)
    dead = free_port()  # nothing listens: every delivery fails on loopback and is retried
    hook = f"http://127.0.0.1:{dead}{HOOK_PATH}"
    (tmp_path / "hook").write_text(hook + "\n")
    with simulator(tmp_path) as sim:
        text = sim_config(sim, free_port(), tmp_path / "state", extra="""\
alerts:
  - {name: AlwaysOn, expr: 'sloguard_build_info > 0', severity: page, summary: "test page"}
""").replace("    model: sim-llama-3-8b\n", "    model: sim-llama-3-8b\n    api_key_env: SIM_API_KEY\n", 1)
        text = text.replace("notifiers:\n", f"""notifiers:
  - {{name: slack, type: slack, token_env: SLACK_TOKEN, channel: "#x", api_url: "http://127.0.0.1:{dead}/api/",
     group_wait: 0s}}
  - {{name: hook, type: webhook, url_with_secret_file: "{tmp_path / 'hook'}", group_wait: 0s}}
""", 1)
        d = start_daemon(tmp_path, text)
        try:
            def retried() -> bool:
                body = http_get(f"{d.url}/metrics")[1].decode()
                return (metric_value(body, "sloguard_notifications_total", {"notifier": "slack", "outcome": "retried"})
                        or 0) >= 1 and (metric_value(body, "sloguard_probe_requests_total") or 0) >= 2
            wait_until(retried, 40, "failed Slack deliveries retried while probes run")
            outputs = [http_get(f"{d.url}{p}")[1].decode() for p in
                       ("/metrics", "/debug/probes", "/debug/alerts", "/api/v1/slos", "/")]
        finally:
            d.stop()
        outputs.append(d.output())
    assert "sloguard_notifications_total" in outputs[0]
    log = outputs[-1]
    assert "notifier=slack" in log and "notifier=hook" in log, "both failing notifiers must have logged"
    for out in outputs:
        for secret in (API_KEY, SLACK_TOKEN, hook, "SECRETPATH42"):
            assert secret not in out
