"""Fleet rules in a real Prometheus: one server SLO over three sloguard instances, each scraping one replica.

Three simulated replicas each get their own traffic (one slowed, so some requests miss the objective); each
sloguard scrapes one of them. A real Prometheus scrapes the three sloguards and evaluates the rules `sloguard rules`
generates. The SLO's aggregate request and bad counts must equal, exactly, the sum of the three instances' own
counts (their /api/v1/slos) and the replicas' own histograms (the simulator's /metrics: the truth). The waits are
hang guards; nothing is timed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.procs import (
    Proc,
    free_port,
    http_get,
    http_post,
    prom_query,
    prometheus,
    simulator,
    start_daemon,
    wait_until,
)

from sloguard.config.load import load_config_text
from sloguard.rulegen.prometheus import SLO_RULES, generate

pytestmark = pytest.mark.e2e
THRESHOLD, LE = "100ms", "0.1"  # a bucket edge of the simulator's TTFT histogram: counts are integers
REQUESTS = (6, 9, 12)  # per replica; replica 2 is slowed
SLO = "chat-server"
PATIENCE = 60.0


def config(sim_url: str, port: int, state: Path, replica: int) -> str:
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
    replicas: [{{name: r{replica}, metrics_url: '{sim_url}/replicas/{replica}/metrics'}}]
slos:
  - name: {SLO}
    target: chat
    source: server
    objectives: [{{metric: ttft, percentile: 95, threshold: {THRESHOLD}}}]
diagnose: {{enabled: false}}
"""


async def _traffic(sim_url: str) -> None:
    body = {"model": "sim-llama-3-8b", "messages": [{"role": "user", "content": "x" * 200}], "max_tokens": 4,
            "stream": True}
    async with aiohttp.ClientSession() as s:
        async def one(replica: int) -> None:
            async with s.post(f"{sim_url}/replicas/{replica}/v1/chat/completions", json=body) as r:
                assert r.status == 200
                await r.read()
        await asyncio.gather(*(one(i) for i, n in enumerate(REQUESTS) for _ in range(n)))


def truth(sim_url: str) -> tuple[float, float]:
    """Return (requests, bad) from the replicas' own TTFT histograms."""
    requests = bad = 0.0
    for i in range(len(REQUESTS)):
        text = http_get(f"{sim_url}/replicas/{i}/metrics")[1].decode()
        fam = next(f for f in text_string_to_metric_families(text) if f.name == "vllm:time_to_first_token_seconds")
        count = sum(s.value for s in fam.samples if s.name.endswith("_count"))
        le = sum(s.value for s in fam.samples if s.name.endswith("_bucket") and float(s.labels["le"]) == float(LE))
        requests, bad = requests + count, bad + count - le
    return requests, bad


def live(daemon: Proc) -> tuple[float, float]:
    """Return (requests, bad) one instance counts over its 1 h window."""
    doc = json.loads(http_get(f"{daemon.url}/api/v1/slos")[1])
    slo = next(s for s in doc["slos"] if s["name"] == SLO)
    burn = next((b for b in slo["burns"] if b["window"] == "1h"), {"requests": 0.0, "bad": 0.0})  # none yet
    return burn["requests"], burn["bad"]


def aggregate(prom: Proc) -> tuple[float, float] | None:
    got = [prom_query(prom, f'sloguard:slo_{name}:increase1h{{slo="{SLO}"}}') for name in ("requests", "bad_requests")]
    return None if not all(got) else (float(got[0][0]["value"][1]), float(got[1][0]["value"][1]))


def zeroed(prom: Proc) -> bool:
    """Return whether Prometheus holds every replica's counters, all still 0 (its first samples, before traffic)."""
    got = prom_query(prom, f'sloguard_slo_requests_total{{slo="{SLO}"}}')
    return len(got) == 2 * len(REQUESTS) and all(float(s["value"][1]) == 0 for s in got)


def test_one_slo_aggregated_across_three_instances_is_the_sum_of_their_counts(tmp_path: Path) -> None:
    with simulator(tmp_path, seed=3, extra=("--replicas", str(len(REQUESTS)), "--background-rps", "0")) as sim:
        ports = [free_port() for _ in REQUESTS]
        texts = [config(sim.url, p, tmp_path / f"state{i}", i) for i, p in enumerate(ports)]
        (tmp_path / SLO_RULES).write_text(generate(load_config_text(texts[0]))[SLO_RULES])
        daemons: list[Proc] = []
        try:
            for i, text in enumerate(texts):
                daemons.append(start_daemon(tmp_path, text, name=f"sloguard{i}.yaml"))
            with prometheus(tmp_path, ports[0], (tmp_path / SLO_RULES,), more_ports=tuple(ports[1:])) as prom:
                wait_until(lambda: zeroed(prom), PATIENCE, "each instance's counters in Prometheus, at 0")
                assert http_post(f"{sim.url}/replicas/2/sim/faults", {"latency_multiplier": 6.0})[0] == 200
                asyncio.run(_traffic(sim.url))
                requests, bad = truth(sim.url)
                # bad may reach requests on a loaded host (every TTFT over 100 ms): the sums are what is judged
                assert requests == sum(REQUESTS) and 0 < bad <= requests, (requests, bad)
                wait_until(lambda: sum(live(d)[0] for d in daemons) == requests, PATIENCE, "the instances' counts")
                try:
                    wait_until(lambda: aggregate(prom) == (requests, bad), PATIENCE, "Prometheus's aggregate")
                except AssertionError:
                    raise AssertionError(f"aggregate {aggregate(prom)} != truth {(requests, bad)}") from None
                per_instance = [live(d) for d in daemons]
                assert (sum(r for r, _ in per_instance), sum(b for _, b in per_instance)) == (requests, bad)
                assert [r for r, _ in per_instance] == list(REQUESTS)
                print(f"\n{SLO} over 3 instances: Prometheus {aggregate(prom)} = sum of instances {per_instance} "
                      f"= replicas' histograms {(requests, bad)} (requests, bad)")
                for i in range(len(REQUESTS)):  # each instance's series keeps its replica
                    assert prom_query(prom, f'sloguard_slo_requests_total{{slo="{SLO}",replica="r{i}"}}')
        finally:
            for d in daemons:
                d.stop()

