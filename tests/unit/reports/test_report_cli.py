"""`sloguard report`'s option parsing (the runs on real bench files: tests/e2e/test_report_bench_e2e.py)."""

from __future__ import annotations

from sloguard.reports.cli import thresholds


def test_thresholds_parse_fractions_and_percentages() -> None:
    got = thresholds(["ttft=0.1", "error_rate=2%", "e2e=7.5%"])
    assert got["ttft"] == 0.1 and got["error_rate"] == 0.02 and got["e2e"] == 0.075 and got["tpot"] == 0.05
