"""`sloguard demo` prints the simulator's URL and fault commands first, then serves live simulator data.

How fast (13-25 s on an idle 2-core VM) is a figure for benchmarks, not a verdict here: CI shares busy cores.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.procs import ROOT, free_port, http_get, metric_value, wait_until

from sloguard.demo import FAULTS

pytestmark = pytest.mark.e2e


def test_demo_prints_fault_commands_first_and_serves_live_data(tmp_path: Path) -> None:
    port = free_port()
    log, err = tmp_path / "demo.log", tmp_path / "demo.err"
    with log.open("wb") as fh, err.open("wb") as eh:  # the daemon's own log lines go to stderr
        demo = subprocess.Popen([sys.executable, "-m", "sloguard", "demo", "--duration", "5m", "--listen",
                                 f"127.0.0.1:{port}", "--state-dir", str(tmp_path / "state")],
                                stdout=fh, stderr=eh, cwd=ROOT)
    start = time.monotonic()
    try:
        def live() -> bool:
            text = http_get(f"http://127.0.0.1:{port}/metrics")[1].decode()
            return ((metric_value(text, "sloguard_probe_requests_total", {"outcome": "success"}) or 0) > 0
                    and metric_value(text, "sloguard_server_requests_running", {"target": "sim"}) is not None
                    and metric_value(text, "sloguard_slo_goodput_ratio", {"window": "5m"}) is not None)

        took = wait_until(live, 40, "live simulator data in the demo's /metrics")
        print(f"demo: live data after {time.monotonic() - start:.1f}s ({took:.1f}s of polling)")
        wait_until(lambda: "sim-chat-latency: " in log.read_text(), 15, "the status view in the terminal")
    finally:
        demo.terminate()
        demo.wait(timeout=20)
    out = log.read_text()
    assert "sloguard:  http://127.0.0.1:" in out and "sim-chat-latency: " in out
    first = out.splitlines()[0]
    assert first.startswith("simulator: http://127.0.0.1:"), first
    sim_url = first.split()[1]
    for key, value, cause in FAULTS:  # every advertised fault, with the cause it should get
        assert f"curl -XPOST {sim_url}/sim/faults -d '{{\"{key}\": {value}}}'   # -> {cause}" in out
