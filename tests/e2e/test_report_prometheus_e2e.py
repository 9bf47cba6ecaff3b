"""`prom:` inputs against a real Prometheus scraping two daemons: release A on one, B (latency fault) on the other.

Daemon A runs two identical probes, 200 ms and 210 ms apart: over the same range they are an A/A pair that a
host whose load changes during the run moves alike (A's two halves were not), sharing its process and server
(two replicas were not: a burst that stalls one process lands on one side), and whose relative phase turns
every 4.2 s (at one interval, after every stall the loop started the same one first, the other queued behind
it, at load 30: "regression"). The report
reads the exported probe histograms and SLO counters through the HTTP API; the true change lies inside
the bucket resolution bound the report states, the truth being the very requests Prometheus counted: each
probe's results in its daemon's own store, in order, between the histogram counts of the range's first
and last samples, a failed request without a first token counted as more than any latency (censored, as
the histogram's +Inf bucket counts it).
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
SECOND = """\
  - {name: sim-chat-2, target: sim, api: chat, interval: 210ms, timeout: 190ms, max_tokens: 8,
     prompts: [{tokens: 64, weight: 1}]}
"""
PROBES = ("sim-chat", "sim-chat-2")  # daemon A's; B runs the first only


def config(sim: Proc, port: int, state: Path, release: str, second: bool = False) -> str:
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
{SECOND if second else ""}slos:
  - {{name: sim-latency, target: sim, objectives: [{{metric: ttft, percentile: 95, threshold: 500ms}}],
     goodput: {{ttft: 30ms, target: 0.9}}}}
"""


def requests(d: Proc, probes: tuple[str, ...] = PROBES[:1]) -> list[float]:
    """Return each probe's successful requests so far."""
    text = http_get(f"{d.url}/metrics")[1].decode()
    return [metric_value(text, "sloguard_probe_requests_total", {"outcome": "success", "probe": p}) or 0.0
            for p in probes]




def counted(prom: Proc, port: int, t0: float, t1: float, probes: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """Per probe, its TTFT histogram's count at the first and last raw sample the report's range reads."""
    window = f"{max(1, round(t1 - t0))}s"  # as sloguard.reports.prom queries it: increase(...[window]) at t1
    out = {}
    for probe in probes:
        (series,) = prom_query(prom, f'sloguard_probe_ttft_seconds_count{{instance="127.0.0.1:{port}",'
                                     f'probe="{probe}"}}[{window}]', t1)  # one prompt bucket
        values = [float(v) for _, v in series["values"]]
        out[probe] = (round(values[0]), round(values[-1]))
    return out


def ttfts(state: Path, counts: dict[str, tuple[int, int]]) -> np.ndarray:
    """Return the TTFTs the histograms counted between the two samples (+inf: censored), every probe pooled.

    One probe sends one request at a time, so its results in start order are the order it counted them in.
    """
    out: list[float] = []
    with sqlite3.connect(state / "sloguard.db") as conn:
        for probe, (first, last) in counts.items():
            rows = conn.execute("SELECT ttft_s, ok FROM probe_results WHERE probe = ? ORDER BY ts",
                                (probe,)).fetchall()
            observed = [np.inf if ttft is None else ttft for ttft, ok in rows if ttft is not None or not ok]
            assert len(observed) >= last, (probe, len(observed), last)  # the store holds every counted request
            out += observed[first:last]
    return np.array(out)


def quantile(values: np.ndarray, q: float) -> float:
    """Return the sample quantile whose bucket the report's resolution bound names (type 1, inverted CDF)."""
    return float(np.quantile(values, q, method="inverted_cdf"))


def report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sloguard", "report", *args, "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)


def test_a_fleet_comparison_through_prometheus(tmp_path: Path) -> None:
    extra = ("--time-scale", "0.3", "--background-rps", "0")
    with simulator(tmp_path, seed=1, extra=extra) as sim_a, simulator(tmp_path, seed=2, extra=extra) as sim_b:
        assert http_post(f"{sim_b.url}/sim/faults", {"latency_multiplier": 2.0})[0] == 200
        pa, pb = free_port(), free_port()
        a = start_daemon(tmp_path, config(sim_a, pa, tmp_path / "a", "A", second=True), name="a.yaml")
        b = start_daemon(tmp_path, config(sim_b, pb, tmp_path / "b", "B"), name="b.yaml")
        try:
            with prometheus(tmp_path, pa, more_ports=(pb,)) as prom:
                wait_until(lambda: len(prom_query(prom, "sloguard_probe_requests_total")) >= 2, 60, "both scraped")
                t0, before = time.time(), requests(a, PROBES) + requests(b)
                wait_until(lambda: min(np.subtract(requests(a, PROBES) + requests(b), before)) >= 150, 120,
                           "150 probe results from each probe")
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
                assert doc["baseline"]["identity"]["labels"] == {"release": "A"}, doc["baseline"]
                assert doc["baseline"]["requests"] >= 200 and any(c["metric"] == "goodput:sim-latency"
                                                                  for c in doc["cells"])
                truth_a = ttfts(tmp_path / "a", counted(prom, pa, t0, t1, PROBES))
                truth_b = ttfts(tmp_path / "b", counted(prom, pb, t0, t1, PROBES[:1]))
                for c in doc["cells"]:
                    if c["metric"] == "ttft" and c["scope"] == "overall" and c["resolution"] and c["stat"] != "p99":
                        q = int(c["stat"][1:]) / 100
                        qa, qb = quantile(truth_a, q), quantile(truth_b, q)
                        if np.isinf(qa):  # A's own quantile censored: any change is possible, nothing to hold
                            continue
                        true = qb / qa - 1
                        low, high = c["resolution"]
                        assert low <= true <= (high if high is not None else np.inf), (c, true, len(truth_a))
                p50 = next(c for c in doc["cells"] if c["metric"] == "ttft" and c["stat"] == "p50"
                           and c["scope"] == "overall")
                # At bucket resolution a 2x TTFT can share a bucket with A's when a busy host stretches A's tail
                # (failed once at load 4): the cell must say regression only when its buckets prove the rise.
                if p50["resolution"] and p50["resolution"][0] > 0.05:
                    assert p50["verdict"] == "regression", p50
                else:  # same buckets: "not enough data" is the honest answer too; never the opposite verdict
                    assert p50["verdict"] in ("regression", "no significant change", "not enough data"), p50
                # A/A: A's two probes over the same range
                sel_a1, sel_a2 = (f'{{instance="127.0.0.1:{pa}",probe="{p}"}}' for p in PROBES)
                same = report("--baseline", f"prom:{url}{sel_a1}@{t0:.0f}..{t1:.0f}",
                              "--candidate", f"prom:{url}{sel_a2}@{t0:.0f}..{t1:.0f}", "--fail-on", "regression")
                cells = json.loads(same.stdout or "{}").get("cells", [])
                print("A/A:", [(c["metric"], c["stat"], c["base"], c["cand"], c["verdict"]) for c in cells
                               if c["scope"] == "overall" and c["metric"] in ("ttft", "e2e")])
                assert same.returncode == 0, ([{k: c[k] for k in ("metric", "stat", "base", "cand", "delta", "ci",
                                                               "resolution", "n_base", "n_cand")}
                                               for c in cells if c["verdict"] == "regression"], same.stderr)
                empty = report("--baseline", f'prom:{url}{{instance="nowhere"}}@{t0:.0f}..{t1:.0f}',
                               "--candidate", f"prom:{url}{sel_a}@{t0:.0f}..{t1:.0f}")
                assert empty.returncode == 2 and "holds no sloguard probe data" in empty.stderr
        finally:
            a.stop()
            b.stop()
