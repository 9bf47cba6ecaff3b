"""`sloguard demo` shows a running daemon whose /metrics has live simulator data within 30 s."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.procs import ROOT, free_port, http_get, metric_value, wait_until

pytestmark = pytest.mark.e2e


def test_demo_serves_live_data_within_30s(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "demo.log"
    with log.open("wb") as fh:
        demo = subprocess.Popen([sys.executable, "-m", "sloguard", "demo", "--duration", "40", "--listen",
                                 f"127.0.0.1:{port}", "--state-dir", str(tmp_path / "state")],
                                stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)
    start = time.monotonic()
    try:
        def live() -> bool:
            text = http_get(f"http://127.0.0.1:{port}/metrics")[1].decode()
            return ((metric_value(text, "sloguard_probe_requests_total", {"outcome": "success"}) or 0) > 0
                    and metric_value(text, "sloguard_server_requests_running", {"target": "sim"}) is not None
                    and metric_value(text, "sloguard_slo_goodput_ratio", {"window": "5m"}) is not None)

        took = wait_until(live, 30 - (time.monotonic() - start), "live simulator data in the demo's /metrics")
        print(f"demo: live data after {time.monotonic() - start:.1f}s ({took:.1f}s of polling)")
        wait_until(lambda: "SLO sim-chat-latency" in log.read_text(), 15, "the status view in the terminal")
    finally:
        demo.terminate()
        demo.wait(timeout=20)
    out = log.read_text()
    assert "sloguard:  http://127.0.0.1:" in out and "SLO sim-chat-latency" in out
