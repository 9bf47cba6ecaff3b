"""A per-replica fault is named by replica: three simulated replicas behind a round-robin front, one slowed.

The service's probe SLO breaches through the one replica in three that is slow; the service-level engine signals
average it away, the per-replica ones do not: the verdict is replica_outlier and its evidence names the replica.
The service's server SLO names it too, as its worst replica (the incident model's `replicas`, on the API and the
status page).
The wait is a hang guard, not a timing claim.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.procs import free_port, http_get, http_post, simulator, start_daemon, wait_until

PATIENCE = 90.0


def config(sim_url: str, port: int, state: Path) -> str:
    replicas = "\n".join(f"      - {{name: r{i}, metrics_url: '{sim_url}/replicas/{i}/metrics'}}" for i in range(3))
    probes = "\n".join(f"  - {{name: p{i}, target: chat, api: chat, interval: 2s, timeout: 1900ms, max_tokens: 24,"
                       f" prompts: [{{tokens: 128}}]}}" for i in range(6))
    return f"""\
version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 500ms
builtin_alerts: false
services:
  - name: chat
    engine: vllm
    api_url: {sim_url}
    model: sim-llama-3-8b
    scrape_interval: 500ms
    scrape_timeout: 450ms
    replicas:
{replicas}
probes:
{probes}
slos:
  - name: chat
    target: chat
    objectives: [{{metric: ttft, percentile: 95, threshold: 250ms}}, {{metric: tpot, percentile: 95, threshold: 60ms}}]
  - name: chat-server
    target: chat
    source: server
    objectives: [{{metric: ttft, percentile: 95, threshold: 250ms}}]
diagnose: {{window: 8s, baseline: 10m}}
notifiers:
  - {{name: console, type: log}}
"""


def scraped(metrics: str) -> set[str]:
    """Return the replicas whose last scrape succeeded, as one exposition reports them (sloguard_source_up 1)."""
    return {line.split('replica="', 1)[1].split('"', 1)[0] for line in metrics.splitlines()
            if line.startswith("sloguard_source_up{") and 'source="scrape"' in line and 'replica="' in line
            and line.rsplit(" ", 1)[-1] == "1.0"}


def slo(url: str, name: str = "chat") -> dict[str, Any]:
    doc = json.loads(http_get(f"{url}/api/v1/slos")[1])
    found: dict[str, Any] = next((s for s in doc.get("slos", []) if s.get("name") == name), {})
    return found


def verdict(url: str) -> dict[str, Any]:
    return slo(url).get("diagnosis") or {}


def worst(url: str) -> list[str]:
    """Return the replicas the server SLO's incident names, worst first."""
    return [r["name"] for r in (slo(url, "chat-server").get("incident") or {}).get("replicas") or []]


def named(got: dict[str, Any]) -> bool:
    """Return whether one read of the verdict is replica_outlier with evidence naming replica r1."""
    return got.get("cause") == "replica_outlier" and "replica r1 of 3" in " ".join(got.get("evidence_text", []))


def test_a_slow_replica_is_named(tmp_path: Path) -> None:
    with simulator(tmp_path, seed=11, extra=("--replicas", "3")) as sim:
        daemon = start_daemon(tmp_path, config(sim.url, free_port(), tmp_path / "state"))
        try:
            wait_until(lambda: verdict(daemon.url).get("cause") == "none", PATIENCE, "a healthy verdict")
            wait_until(lambda: "replica_outliers" in verdict(daemon.url).get("signals", {}), PATIENCE,
                       "per-replica signals read")
            assert verdict(daemon.url)["signals"]["replica_outliers"]["value"] == 0
            status, _ = http_post(f"{sim.url}/replicas/1/sim/faults", {"latency_multiplier": 4.0})
            assert status == 200
            wait_until(lambda: named(verdict(daemon.url)), PATIENCE, "replica_outlier naming replica r1")
            got = verdict(daemon.url)
            text = " ".join(got.get("evidence_text", []))
            assert "replica r0" not in text and "replica r2" not in text, got
            assert "drain" in got["lever"]
            # the server SLO's status names the slow replica first (its share of the bad requests), on every surface
            wait_until(lambda: worst(daemon.url)[:1] == ["r1"], PATIENCE, "the server SLO naming r1 worst")
            line = next(r["text"] for r in slo(daemon.url, "chat-server")["incident"]["replicas"])
            assert line.startswith("r1: ") and "of the bad requests" in line
            assert "worst replicas over 5m: r1: " in http_get(f"{daemon.url}/")[1].decode()
            metrics = http_get(f"{daemon.url}/metrics")[1].decode()
            assert 'sloguard_bottleneck_info{cause="replica_outlier"' in metrics
            # A replica whose last scrape timed out (450 ms, a loaded host) has no series until its next one: judge
            # the labels in an exposition where the daemon reports every replica's scrape up.
            texts = [metrics]

            def every_replica_scraped() -> bool:
                if scraped(texts[-1]) != {"r0", "r1", "r2"}:
                    texts.append(http_get(f"{daemon.url}/metrics")[1].decode())
                return scraped(texts[-1]) == {"r0", "r1", "r2"}

            wait_until(every_replica_scraped, PATIENCE, "every replica scraped")
            for r in ("r0", "r1", "r2"):  # every server series keeps its replica
                assert f'sloguard_server_decode_seconds{{model="sim-llama-3-8b",quantile="0.5",replica="{r}"' \
                    in texts[-1]
        finally:
            daemon.stop()
