"""A gap in the scrapes of sloguard in promtool: the first windows after it count from the last sample before it.

A failed scrape marks every series of the target stale (Prometheus writes a staleness marker), so an instant
`counter offset 1m` inside the gap finds nothing. The counts must not then start at the first sample after the gap:
a "1 min" window would hold the few requests since then, and a few bad among them read as a whole minute's burn
(a loaded run of the incident rig paged that way). Here one sloguard instance is scraped every 15 s, fails for
90 s, and recovers; promtool (Prometheus's engine) must give the counts exactly as the cumulative series say:
inside the gap up to the last scrape (not extrapolated to the window), after it from the last sample before it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from sloguard.config.load import load_config_text
from sloguard.rulegen.prometheus import SLO_RULES, generate

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not on PATH")
CONFIG = """\
version: sloguard/v1
services: [{name: chat, engine: vllm, api_url: "http://x", replicas: [{name: r0, metrics_url: "http://x/m"}]}]
probes: [{name: p, target: chat, interval: 5s, timeout: 4s}]
slos:
  - {name: ux, target: chat, error_rate: {target: 0.99}, error_budget_window: 1h}
"""
STEP, LAST_BEFORE, FIRST_AFTER, END = 15, 40, 47, 60  # scrapes every 15 s; 41 failed (stale) .. 46
GOOD = lambda k: 15 - k % 2  # noqa: E731  requests judged good in step k
BAD = lambda k: 1 if k % 4 == 0 else 0  # noqa: E731


def cumulative(bad: bool) -> list[int]:
    """Return the counter at every step."""
    out, total = [], 0
    for k in range(END + 1):
        total += (BAD if bad else GOOD)(k) if k else 0
        out.append(total)
    return out


def values(bad: bool) -> str:
    """Return promtool input: samples, one staleness marker at the first failed scrape, none until it recovers."""
    c = cumulative(bad)
    out = [str(c[k]) for k in range(LAST_BEFORE + 1)] + ["stale"] + ["_"] * (FIRST_AFTER - LAST_BEFORE - 2)
    return " ".join(out + [str(c[k]) for k in range(FIRST_AFTER, END + 1)])


def count(record: str, value: float | None) -> list[dict[str, object]]:
    labels = 'slo="ux",sli="availability"'
    return [] if value is None else [{"labels": f"{record}{{{labels}}}", "value": value}]


def check(name: str, window: str, at_s: int, start_step: int | None, end_step: int) -> dict[str, object]:
    """Return a promtool check: the record at `at_s` is the counter's difference between two steps (None: absent)."""
    record = f"sloguard:slo_{name}:increase{window}"
    req = [g + b for g, b in zip(cumulative(False), cumulative(True), strict=True)]
    series = cumulative(True) if name == "bad_requests" else req
    value = None if start_step is None else series[end_step] - series[start_step]
    return {"expr": f'{record}{{slo="ux"}}', "eval_time": f"{at_s}s", "exp_samples": count(record, value)}


def test_windows_after_a_scrape_gap_start_before_it(tmp_path: Path) -> None:
    doc = yaml.safe_load(generate(load_config_text(CONFIG))[SLO_RULES])
    doc["groups"][0]["rules"] = [r for r in doc["groups"][0]["rules"]
                                 if r.get("record", "").endswith(("increase1m", "increase5m"))]
    (tmp_path / SLO_RULES).write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 20))
    labels = 'instance="a",slo="ux",sli="availability"'
    series = [{"series": f'sloguard_slo_requests_total{{{labels},good="{str(not bad).lower()}"}}',
               "values": values(bad)} for bad in (False, True)]
    after = (FIRST_AFTER + 2) * STEP + 5  # 35 s after the first good scrape: the 1 min window starts in the gap
    early = (LAST_BEFORE + 2) * STEP + 5  # 35 s into the gap: the minute up to the last scrape, not extrapolated
    during = (FIRST_AFTER - 3) * STEP + 5  # inside the gap: no sample in the last minute
    names = ("requests", "bad_requests")
    checks = [check(name, "1m", after, LAST_BEFORE, FIRST_AFTER + 2) for name in names]
    checks += [check(name, "5m", after, (after - 300) // STEP, FIRST_AFTER + 2) for name in names]
    checks += [check(name, "1m", early, (early - 60) // STEP, LAST_BEFORE) for name in names]
    checks += [check(name, "1m", during, None, 0) for name in names]
    test = {"rule_files": [SLO_RULES], "evaluation_interval": "5s",
            "tests": [{"interval": f"{STEP}s", "input_series": series, "promql_expr_test": checks}]}
    (tmp_path / "gap.test.yaml").write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 20))
    proc = subprocess.run(["promtool", "test", "rules", "gap.test.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
