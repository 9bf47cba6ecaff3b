"""`sloguard check`'s burn-row report: what each row detects at the probe rate, and its warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from sloguard.cli import main
from sloguard.config.load import load_config_text
from sloguard.slo.detection import report

CONFIG = """\
version: sloguard/v1
targets: [{name: t, api_url: "http://127.0.0.1:1"}]
probes: [{name: p, target: t, interval: 15s, timeout: 10s}]
slos:
  - {name: ux, target: t, goodput: {ttft: 1s, target: 0.99}, error_budget_window: 1d}
  - {name: med, target: t, objectives: [{metric: tpot, percentile: 50, threshold: 50ms}], error_budget_window: 1d}
  - {name: srv, target: t, source: server, objectives: [{metric: ttft, percentile: 95, threshold: 1s}]}
"""


def test_report_lines_and_warnings() -> None:
    lines, warnings = report(load_config_text(CONFIG))
    text = "\n".join(lines)
    assert "slo ux (1d window, 5760 probe requests/day):" in text
    assert "  latency 99%; a 14.4x burn pages in ~" in text
    assert "    page 5m/1m 14.4x: needs >= " in text and "of ~20 requests in 5m; detects sustained burns >=" in text
    assert "availability 99% (implicit: no error_rate or goodput)" in text  # med: objectives only
    assert "page 5m/1m 14.4x: never fires (a 14.4x burn needs more than 100% bad at objective 0.5); skipped" in text
    assert "n*p0 + 4.75*sqrt(n*p0*(1-p0))" in text  # the server SLO's observed-count clause
    assert any(w.startswith("warning: slo med latency (tpot p50) 50%: page 5m/1m can never fire") for w in warnings)
    assert "warning: slo med latency (tpot p50) 50%: no page row can fire" in warnings
    assert not any("slo ux " in w for w in warnings)


def test_check_prints_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG)
    assert main(["check", "-c", str(cfg)]) == 0
    out = capsys.readouterr()
    assert out.out.startswith(f"{cfg}: ok (1 targets, 1 probes, 3 SLOs")
    assert "slo ux (1d window" in out.out and "no page row can fire" in out.err
