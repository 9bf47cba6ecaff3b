"""`prom:` inputs against a real Prometheus scraping two daemons: release A on one, B (latency fault) on the other.

The simulators have no background traffic, so the two halves of one daemon's range are the same release on
the same server (an A/A pair). The report reads the exported probe histograms and SLO counters through the
HTTP API; the true change
(from the per-request results in each daemon's own store over the same range) lies inside the bucket
resolution bound the report states.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from support.procs import (
    ROOT,
    Proc,
    free_port,
    http_get,
    http_post,
    metric_value,
    prom_query,
    prometheus,
    simulator,
    start_daemon,
    wait_until,
)

pytestmark = pytest.mark.e2e


def config(sim: Proc, port: int, state: Path, release: str) -> str:
    return f"""\
version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
targets:
  - {{name: sim, engine: vllm, metrics_url: {sim.url}/metrics, api_url: {sim.url}, scrape_interval: 1s,
     scrape_timeout: 900ms, labels: {{release: {release}}}}}
probes:
  - {{name: sim-chat, target: sim, api: chat, interval: 200ms, timeout: 190ms, max_tokens: 8,
     prompts: [{{tokens: 64, weight: 1}}]}}
slos:
  - {{name: sim-latency, target: sim, objectives: [{{metric: ttft, percentile: 95, threshold: 500ms}}],
     goodput: {{ttft: 30ms, target: 0.9}}}}
"""


def requests(d: Proc) -> float:
    return metric_value(http_get(f"{d.url}/metrics")[1].decode(), "sloguard_probe_requests_total",
                        {"outcome": "success"}) or 0.0


def ttfts(state: Path, t0: float, t1: float) -> np.ndarray:
    with sqlite3.connect(state / "sloguard.db") as conn:
        rows = conn.execute("SELECT ttft_s FROM probe_results WHERE ts >= ? AND ts < ? AND ttft_s IS NOT NULL",
                            (t0, t1)).fetchall()
    return np.array([r[0] for r in rows])


def report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sloguard", "report", *args, "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)


def test_a_fleet_comparison_through_prometheus(tmp_path: Path) -> None:
    with simulator(tmp_path, seed=1, extra=("--time-scale", "0.3", "--background-rps", "0")) as sim_a, \
            simulator(tmp_path, seed=2, extra=("--time-scale", "0.3", "--background-rps", "0")) as sim_b:
        assert http_post(f"{sim_b.url}/sim/faults", {"latency_multiplier": 2.0})[0] == 200
        pa, pb = free_port(), free_port()
        a = start_daemon(tmp_path, config(sim_a, pa, tmp_path / "a", "A"), name="a.yaml")
        b = start_daemon(tmp_path, config(sim_b, pb, tmp_path / "b", "B"), name="b.yaml")
        try:
            with prometheus(tmp_path, pa, more_ports=(pb,)) as prom:
                wait_until(lambda: len(prom_query(prom, "sloguard_probe_requests_total")) >= 2, 60, "both scraped")
                t0 = time.time()
                wait_until(lambda: min(requests(a), requests(b)) >= 250, 120, "250 probe results on each daemon")
                time.sleep(3)
                t1 = time.time()
                time.sleep(3)  # the last scrape of the range is in
                url = prom.url
                sel_a, sel_b = f'{{instance="127.0.0.1:{pa}"}}', f'{{instance="127.0.0.1:{pb}"}}'
                done = report("--baseline", f"prom:{url}{sel_a}@{t0:.0f}..{t1:.0f}",
                              "--candidate", f"prom:{url}{sel_b}@{t0:.0f}..{t1:.0f}", "--fail-on", "regression")
                assert done.returncode == 1, done.stderr
                doc = json.loads(done.stdout)
                assert doc["verdict"] == "regression" and "bucket resolution" in doc["resolution"]
                assert doc["baseline"]["identity"]["labels"] == {"release": "A"}
                assert doc["baseline"]["requests"] >= 200 and any(c["metric"] == "goodput:sim-latency"
                                                                  for c in doc["cells"])
                truth_a, truth_b = ttfts(tmp_path / "a", t0, t1), ttfts(tmp_path / "b", t0, t1)
                for c in doc["cells"]:
                    if c["metric"] == "ttft" and c["scope"] == "overall" and c["resolution"] and c["stat"] != "p99":
                        q = int(c["stat"][1:]) / 100
                        true = np.quantile(truth_b, q) / np.quantile(truth_a, q) - 1
                        low, high = c["resolution"]
                        assert low <= true <= (high if high is not None else np.inf), (c, true)
                p50 = next(c for c in doc["cells"] if c["metric"] == "ttft" and c["stat"] == "p50"
                           and c["scope"] == "overall")
                # At bucket resolution a 2x TTFT can share a bucket with A's when a busy host stretches A's tail
                # (failed once at load 4): the cell must say regression only when its buckets prove the rise.
                if p50["resolution"] and p50["resolution"][0] > 0.05:
                    assert p50["verdict"] == "regression", p50
                else:  # same buckets: "not enough data" is the honest answer too; never the opposite verdict
                    assert p50["verdict"] in ("regression", "no significant change", "not enough data"), p50
                mid = (t0 + t1) / 2
                same = report("--baseline", f"prom:{url}{sel_a}@{t0:.0f}..{mid:.0f}",
                              "--candidate", f"prom:{url}{sel_a}@{mid:.0f}..{t1:.0f}", "--fail-on", "regression")
                assert same.returncode == 0, same.stdout[-3000:] + same.stderr
                empty = report("--baseline", f'prom:{url}{{instance="nowhere"}}@{t0:.0f}..{t1:.0f}',
                               "--candidate", f"prom:{url}{sel_a}@{t0:.0f}..{t1:.0f}")
                assert empty.returncode == 2 and "holds no sloguard probe data" in empty.stderr
        finally:
            a.stop()
            b.stop()
