"""`sloguard probe`: usage and config errors exit 2; the table has a row per result."""

from __future__ import annotations

from pathlib import Path

import pytest

from sloguard.model import ProbeResult
from sloguard.probes.cli import main, table


def test_table_rows_and_units() -> None:
    rows = [ProbeResult(ts=1, probe="p", target="t", model="m", api="chat", ok=True, status_code=200,
                        ttft_s=0.4371, e2e_s=1.0, tpot_s=0.0123),
            ProbeResult(ts=2, probe="q", target="t", model="m", api="chat", ok=False, error="http 500: x")]
    lines = table(rows).splitlines()
    assert lines[0].split()[:5] == ["PROBE", "TARGET", "OK", "HTTP", "CONNECT_MS"]
    assert lines[1].split()[:7] == ["p", "t", "True", "200", "-", "437.1", "-"]
    assert "12.30" in lines[1]
    assert lines[2].endswith("http 500: x")


@pytest.mark.parametrize(("text", "args"), [
    ("version: sloguard/v1\n", ["--once"]),  # no probes
    ("version: sloguard/v9\n", ["--once"]),  # invalid config
    ("version: sloguard/v1\n", []),  # no probes to repeat either
])
def test_exit_2(tmp_path: Path, text: str, args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    assert main(["-c", str(cfg), *args]) == 2
    assert capsys.readouterr().err
