"""Release A, then release B with a latency fault (labels changed + reload): the daemon reports on its own.

The automatic before/after report reaches the Slack-like server as one message (verdict, top changes
with intervals, the path of the full report), is kept under state_dir/reports/, shows in /metrics, and
`sloguard report` over the same store slices (file and daemon API) agrees.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.procs import (
    ROOT,
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
from support.slack_double import TOKEN_ENV, SlackDouble

from sloguard.sim.simulator import DEFAULT_ENGINE_VERSION

pytestmark = pytest.mark.e2e


def config(sim: Proc, port: int, state: Path, slack: SlackDouble, release: str) -> str:
    target = sim_target(sim, f"    labels: {{release: {release}, team: llm}}")
    return f"""\
version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 500ms
targets:
{target}
probes:
  - {{name: sim-chat, target: sim, api: chat, interval: 200ms, timeout: 190ms, max_tokens: 16,
     prompts: [{{tokens: 64, weight: 2}}, {{tokens: 512, weight: 1}}]}}
slos:
  - name: sim-latency
    target: sim
    objectives: [{{metric: ttft, percentile: 95, threshold: 500ms}}]
    goodput: {{ttft: 500ms, tpot: 50ms, target: 0.95}}
notifiers:
  - {{name: releases, type: slack, token_env: {TOKEN_ENV}, channel: '#releases', api_url: '{slack.api_url}',
     match: {{alertname: [SloguardReleaseReport]}}, group_wait: 0s}}
reports: {{after: 8s, min_requests: 30, identity_interval: 1s}}
"""


def metrics(d: Proc) -> str:
    return http_get(f"{d.url}/metrics")[1].decode()


def releases(d: Proc) -> dict[str, object]:
    return dict(json.loads(http_get(f"{d.url}/api/v1/releases")[1]))


def report_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sloguard", "report", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, check=False)


def test_a_release_with_a_latency_fault_is_reported_automatically(tmp_path: Path, slack: SlackDouble) -> None:
    state = tmp_path / "state"
    with simulator(tmp_path, extra=("--time-scale", "0.2")) as sim:
        port = free_port()
        daemon = start_daemon(tmp_path, config(sim, port, state, slack, "A"), extra=("--web.enable-lifecycle",))
        try:
            wait_until(lambda: (releases(daemon)["targets"] or {}).get("sim") is not None, 30, "the identity of sim")
            wait_until(lambda: (metric_value(metrics(daemon), "sloguard_probe_requests_total",
                                             {"outcome": "success"}) or 0) >= 60, 60, "60 probe results of A")
            assert http_post(f"{sim.url}/sim/faults", {"latency_multiplier": 3.0})[0] == 200
            (tmp_path / "sloguard.yaml").write_text(config(sim, port, state, slack, "B"))
            assert http_post(f"{daemon.url}/-/reload")[0] == 200
            wait_until(lambda: len(slack.posted()) >= 1, 90, "the release report in Slack")
            (post,) = slack.posted()
            assert post["text"] == "Release report sim: A → B: REGRESSION", post["text"]
            blocks = json.dumps(post["blocks"])
            (folder,) = (state / "reports" / "sim").iterdir()
            assert f"Full report: {folder}/report.html" in blocks
            top = [f"{name}:" for name in ("TTFT", "TTFOT", "TPOT", "ITL", "E2E")]  # top changes, intervals
            assert any(t in blocks for t in top) and "[+" in blocks and "(firing)" not in blocks, blocks
            doc = json.loads((folder / "report.json").read_text())
            assert doc["verdict"] == "regression" and {f.name for f in folder.iterdir()} == {
                "report.md", "report.html", "report.json", "diagnosis.json"}
            bottlenecks = doc["bottlenecks"]  # the grown stages with the diagnosis rules' levers, and its verdicts
            assert [v["slo"] for v in bottlenecks["daemon"]] == ["sim-latency"], bottlenecks
            assert any("grew" in item and "lever:" in item for item in bottlenecks["items"]), bottlenecks
            assert doc["baseline"]["identity"]["labels"] == {"release": "A", "team": "llm"}
            assert doc["candidate"]["identity"]["labels"] == {"release": "B", "team": "llm"}
            wait_until(lambda: metric_value(metrics(daemon), "sloguard_report_verdict",
                                            {"target": "sim", "metric": "report"}) == 1.0, 10, "the verdict metric")
            info = {"target": "sim", "label_release": "B", "engine_version": DEFAULT_ENGINE_VERSION}
            assert metric_value(metrics(daemon), "sloguard_release_info", info) == 1.0
            (b,) = releases(daemon)["boundaries"]  # type: ignore[misc]
            assert b["status"] == "done" and b["report_path"] == str(folder)
            cfg = str(tmp_path / "sloguard.yaml")
            for where in (("-c", cfg), ("--daemon", daemon.url)):
                done = report_cli("--baseline", "store:release=A", "--candidate", "store:release=B", *where,
                                  "--fail-on", "regression", "--format", "json")
                assert done.returncode == 1, done.stderr
                assert json.loads(done.stdout)["verdict"] == "regression"
            bad = report_cli("--baseline", "store:release=Z", "--candidate", "store:release=B", "-c", cfg)
            assert bad.returncode == 2 and "no release in the store has release=Z" in bad.stderr
        finally:
            assert daemon.stop() == 0
