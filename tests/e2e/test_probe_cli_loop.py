"""`sloguard probe` without --once repeats every probe interval until SIGTERM, printing each request."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.procs import PATIENCE, ROOT, simulator

pytestmark = pytest.mark.e2e


def test_repeats_until_sigterm_and_exits_zero(tmp_path: Path) -> None:
    with simulator(tmp_path, extra=("--time-scale", "0.1", "--background-rps", "0")) as sim:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(f"version: sloguard/v1\ntargets: [{{name: sim, api_url: '{sim.url}', model: sim-llama-3-8b}}]\n"
                       "probes: [{name: p, target: sim, interval: 1s, timeout: 900ms, max_tokens: 4}]\n")
        proc = subprocess.Popen([sys.executable, "-m", "sloguard", "probe", "-c", str(cfg), "--json"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            assert proc.stdout is not None
            rows = [json.loads(proc.stdout.readline()) for _ in range(3)]  # blocks until three rounds ran
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30 * PATIENCE)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert [r["probe"] for r in rows] == ["p"] * 3 and all(r["ok"] for r in rows), rows
    assert rows[0]["ts"] < rows[1]["ts"] < rows[2]["ts"]
    assert proc.returncode == 0, err
    assert "Traceback" not in err
