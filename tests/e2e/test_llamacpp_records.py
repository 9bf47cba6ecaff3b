"""Against the real llama-server: its in-band `timings` become the probe's measured prefill/decode stages.

llama.cpp puts `timings` (`prompt_ms`, `predicted_ms`) in the final chunk of every streamed response and sums the
same values into `llamacpp:prompt_seconds_total` / `llamacpp:tokens_predicted_seconds_total`, so the counters'
increase over one probe request is an independent record of that request's stages.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.llama import LlamaServer, llama_server  # noqa: F401  (session fixture)
from support.procs import ROOT, free_port, http_get, start_daemon, wait_until

from sloguard.sources.parse import parse_text

pytestmark = pytest.mark.e2e


def _config(server: LlamaServer, port: int, state: Path) -> str:
    return f"""version: sloguard/v1
listen: "127.0.0.1:{port}"
state_dir: "{state}"
evaluation_interval: 1s
gpu: {{nvml: "off"}}
targets:
  - {{name: llama, engine: llamacpp, metrics_url: {server.url}/metrics, api_url: {server.url},
     model: {server.model}, server_records: inband}}
probes:
  - {{name: p, target: llama, api: chat, interval: 2s, timeout: 1900ms, max_tokens: 16, ignore_eos: true,
     prompts: [{{tokens: 48}}]}}
slos:
  - name: llama-latency
    target: llama
    probe: p
    objectives: [{{metric: ttft, percentile: 95, threshold: 5s}}]
    error_budget_window: 1h
"""


def _seconds(server: LlamaServer) -> dict[str, float]:
    status, body = http_get(f"{server.url}/metrics")
    assert status == 200
    return {s.name: s.value for s in parse_text(body.decode()) if s.name.endswith("_seconds_total")}


def test_timings_give_the_exact_prefill_and_decode_of_each_request(llama_server: LlamaServer,  # noqa: F811
                                                                    tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(_config(llama_server, free_port(), tmp_path / "state"))
    for _ in range(3):
        before = _seconds(llama_server)
        out = subprocess.run([sys.executable, "-m", "sloguard", "probe", "-c", str(cfg), "--once", "--json"],
                             capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
        after = _seconds(llama_server)
        assert out.returncode == 0, out.stdout + out.stderr
        r: dict[str, Any] = json.loads(out.stdout.splitlines()[0])
        assert r["record"] == "inband"
        # The server's own accounting of this one request, read from its counters. Decode is the same number in
        # both places; `prompt_ms` in timings also spans sampling the first token (measured: +0.1 to +0.9 ms over
        # the counter), so the counter bounds prefill from below and the client's TTFT bounds it from above.
        assert r["server_decode_s"] == pytest.approx(after["llamacpp:tokens_predicted_seconds_total"]
                                                     - before["llamacpp:tokens_predicted_seconds_total"], abs=1e-6)
        counted = after["llamacpp:prompt_seconds_total"] - before["llamacpp:prompt_seconds_total"]
        assert 0 < counted <= r["prefill_s"] + 1e-6
        assert r["prefill_s"] <= r["ttft_s"]  # a stage is part of its whole
        assert r["network_s"] is None and r["queue_s"] is None  # llama.cpp reports no queue time: no record network
        # ... and a head llama-server sent with its first output (after the prefill) is no network time: no
        # head-based network stage then. With kernel receive stamps it sometimes shows its head well before the
        # prefill ends (measured: head 1.7 ms, prefill 2.95 ms, first event 4.6 ms): that head is kept, and is
        # then earlier than the server's own prefill (docs/definitions.md).
        assert r["head_s"] is None or r["head_s"] < r["prefill_s"] < r["ttft_s"], r


def test_daemon_shows_a_measured_prefill_stage_for_llamacpp(llama_server: LlamaServer,  # noqa: F811
                                                            tmp_path: Path) -> None:
    daemon = start_daemon(tmp_path, _config(llama_server, free_port(), tmp_path / "state"))
    try:
        def stages() -> dict[str, dict[str, Any]]:
            slos = json.loads(http_get(f"{daemon.url}/api/v1/slos")[1])["slos"]
            slo = next((s for s in slos if s["name"] == "llama-latency"), {"stages": []})  # before the 1st evaluation
            return {s["stage"]: s for s in slo["stages"]
                    if s["source"] == "request" and s["window"] == "5m" and s["p50"] is not None}

        wait_until(lambda: "prefill" in stages(), 60, "a measured prefill stage for the llama-server target")
        got = stages()
        # llama-server reports no queue time; its response head, sent when a slot starts the task, measures it per
        # probe (head − the TCP handshake; sources/engines/capabilities.py)
        assert set(got) >= {"queue", "prefill"}, sorted(got)
        ttft = next(s for s in json.loads(http_get(f"{daemon.url}/api/v1/slos")[1])["slos"]
                    if s["name"] == "llama-latency")["stages"]
        probe_ttft = next(s for s in ttft if s["stage"] == "ttft" and s["window"] == "5m" and s["p50"] is not None)
        assert 0 < got["prefill"]["p50"] <= probe_ttft["p99"]
        assert all(0 <= got[st]["p50"] <= probe_ttft["p99"] for st in ("queue", "network") if st in got), got
    finally:
        daemon.stop()
