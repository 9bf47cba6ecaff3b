"""`sloguard check --online` says per target whether its server records arrive (OTLP span, in-band, none)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.procs import free_port, sim_config, simulator

pytestmark = pytest.mark.e2e


def _check(cfg: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sloguard", "check", "-c", str(cfg), "--online"],
                          capture_output=True, text=True, timeout=60)


def test_otlp_span_arrives_and_a_missing_inband_record_is_named(tmp_path: Path) -> None:
    receiver = free_port()
    endpoint = f"http://127.0.0.1:{receiver}/v1/traces"
    with simulator(tmp_path, extra=("--otlp-traces-endpoint", endpoint, "--otlp-schedule-delay-ms", "50",
                                    "--background-rps", "0")) as sim:
        extra = f"traces:\n  receiver: {{listen: '127.0.0.1:{receiver}'}}\n  hold: 5s\n"
        text = sim_config(sim, free_port(), tmp_path / "state", extra=extra)
        otlp = tmp_path / "otlp.yaml"
        otlp.write_text(text.replace("    model: sim-llama-3-8b\n",
                                     "    model: sim-llama-3-8b\n    server_records: otlp\n", 1))
        done = _check(otlp)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "records: target sim: ok: otlp record arrived" in done.stdout
        default = tmp_path / "default.yaml"
        default.write_text(text)  # the simulator was not started with --enable-per-request-metrics
        done = _check(default)  # the default uses a record where one comes: its absence is a note
        assert done.returncode == 0, done.stdout + done.stderr
        assert "records: target sim: ok: no per-request record (optional under the default" in done.stdout
        assert "--enable-per-request-metrics" in done.stdout
        inband = tmp_path / "inband.yaml"
        inband.write_text(text.replace("    model: sim-llama-3-8b\n",
                                       "    model: sim-llama-3-8b\n    server_records: inband\n", 1))
        done = _check(inband)  # asked for explicitly: missing is a failure
        assert done.returncode == 1
        assert "records: target sim: MISSING: no in-band record" in done.stdout
