"""Fleet rules in promtool: counts added across sloguard instances and replicas, exact; long windows from 5 min tiles.

Long windows are tiled from 7 d up (28-30 d SLOs); here from 1 d, the same expressions over 288 tiles instead of
8,064, because promtool's test engine caps a query at 10,000 samples (Prometheus's default is 50 million).

Three instances export a server SLO's per-replica counters (sloguard.slo.counters): a sees replica r0, b sees r1,
c sees r1 too (an HA pair with b, from a later start) and r2. The probe SLO's counters come from a and b. a's
sloguard restarts half way. The expected counts are summed here from the per-step increments the series were built
from; promtool (Prometheus's engine) must give them exactly: direct windows, the 7 d window summed from 5 min
counts (over the restart), and the budget left. Only the records checked (and those they read) are evaluated: a
week of 5 min evaluations of every rule would take minutes.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from sloguard.config.load import load_config_text
from sloguard.rulegen import recording
from sloguard.rulegen.prometheus import SLO_RULES, generate

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not on PATH")
CONFIG = """\
version: sloguard/v1
services: [{name: chat, engine: vllm, api_url: "http://x", replicas: [{name: r0, metrics_url: "http://x/m"}]}]
probes: [{name: p, target: chat, interval: 30s}]
slos:
  - {name: srv, target: chat, source: server, error_budget_window: 1d,
     objectives: [{metric: ttft, percentile: 95, threshold: 500ms}]}
  - {name: ux, target: chat, error_rate: {target: 0.99}, error_budget_window: 12h}
"""
KEPT = ("5m", "1h", "12h", "1d")  # the records checked, and those they read (promtool evaluates every rule kept)
STEPS, C_FROM, RESTART = 300, 100, 200  # 5 min steps: 1 d 1 h; c starts at step 100, a restarts at 200
Inc = Callable[[int], tuple[int, int]]  # step -> (good, bad) added in it
REPLICAS: dict[str, Inc] = {
    "r0": lambda k: (30 + k % 7, 3 if k % 5 == 0 else 0),
    "r1": lambda k: (20 + k % 3, 5 if k % 11 == 0 else 0),
    "r2": lambda k: (10, k % 2),
}
PROBES: Inc = lambda k: (10, 1 if k % 13 == 0 else 0)  # noqa: E731  each of a and b
# (instance, slo, replica or "", increments, first step, restart step)
SERIES = [("a", "srv", "r0", REPLICAS["r0"], 0, RESTART), ("b", "srv", "r1", REPLICAS["r1"], 0, None),
          ("c", "srv", "r1", REPLICAS["r1"], C_FROM, None), ("c", "srv", "r2", REPLICAS["r2"], 0, None),
          ("a", "ux", "", PROBES, 0, RESTART), ("b", "ux", "", PROBES, 0, None)]
SLI = {"srv": {"sli": "latency", "metric": "ttft", "percentile": "95"}, "ux": {"sli": "availability"}}


def values(inc: Inc, good: bool, first: int, restart: int | None) -> str:
    """Return the cumulative series from `first` (0 then), back to 0 at `restart`, as promtool input."""
    out, total = ["_"] * first, 0
    for k in range(first, STEPS + 1):
        total = 0 if k in (first, restart) else total
        total += inc(k)[0 if good else 1] if k > first else 0
        out.append(str(total))
    return " ".join(out)


def truth(slo: str, start: int, end: int) -> tuple[int, int]:
    """Return (requests, bad) of an SLO in steps (start, end]: each replica once, the probes of both instances."""
    incs = list(REPLICAS.values()) if slo == "srv" else [PROBES, PROBES]
    got = [inc(k) for inc in incs for k in range(start + 1, end + 1)]
    return sum(g + b for g, b in got), sum(b for _, b in got)


def sample(record: str, slo: str, value: float) -> dict[str, Any]:
    labels = ",".join(f'{k}="{v}"' for k, v in {"slo": slo, **SLI[slo]}.items())
    return {"labels": f"{record}{{{labels}}}", "value": value}


def rules() -> str:
    """Return the generated SLO rules, the records of the KEPT windows and the budgets only."""
    doc = yaml.safe_load(generate(load_config_text(CONFIG))[SLO_RULES])
    kept = [r for r in doc["groups"][0]["rules"] if "record" in r and (
        r["record"].endswith(tuple(f"increase{w}" for w in KEPT)) or r["record"].endswith("ratio")
        or r["record"] in ("sloguard:slo_error_ratio:rate1d", "sloguard:slo_error_ratio:rate12h"))]
    assert any("sum_over_time(sloguard:slo_requests_by_good:increase5m[23h59m59s999ms:5m])" in r["expr"]
               for r in kept)
    doc["groups"][0]["rules"] = kept
    return yaml.safe_dump(doc, sort_keys=False, width=1 << 20)


def test_fleet_counts_are_exact_sums_and_long_windows_tile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recording, "TILED_FROM", 86400.0)
    (tmp_path / SLO_RULES).write_text(rules())
    series = [{"series": f'sloguard_slo_requests_total{{instance="{i}",slo="{slo}",'
                         + "".join(f'{k}="{v}",' for k, v in SLI[slo].items())
                         + (f'replica="{r}",' if r else "") + f'good="{str(good).lower()}"}}',
               "values": values(inc, good, first, restart)}
              for i, slo, r, inc, first, restart in SERIES for good in (True, False)]
    checks = []
    for slo in ("srv", "ux"):
        # 1 h: the pair's replica r1 counted once, though c saw only the last 10 steps of it at step 110
        for at in (110, STEPS):
            req, bad = truth(slo, at - 12, at)
            checks += [{"expr": f'sloguard:slo_requests:increase1h{{slo="{slo}"}}', "eval_time": f"{at * 5}m",
                        "exp_samples": [sample("sloguard:slo_requests:increase1h", slo, req)]},
                       {"expr": f'sloguard:slo_bad_requests:increase1h{{slo="{slo}"}}', "eval_time": f"{at * 5}m",
                        "exp_samples": [sample("sloguard:slo_bad_requests:increase1h", slo, bad)]}]
    req, bad = truth("srv", STEPS - 288, STEPS)  # 1 d = 288 tiles of 5 min, across a's restart
    checks += [{"expr": f'sloguard:slo_{name}:increase1d{{slo="srv"}}', "eval_time": f"{STEPS * 5}m",
                "exp_samples": [sample(f"sloguard:slo_{name}:increase1d", "srv", value)]}
               for name, value in (("requests", req), ("bad_requests", bad))]
    for slo, objective, steps in (("srv", 0.95, 288), ("ux", 0.99, 144)):  # budget left over the SLO window
        req, bad = truth(slo, STEPS - steps, STEPS)
        checks.append({"expr": f'sloguard:slo_error_budget_remaining:ratio{{slo="{slo}"}}',
                       "eval_time": f"{STEPS * 5}m", "exp_samples": [
                           sample("sloguard:slo_error_budget_remaining:ratio", slo, 1 - bad / req / (1 - objective))]})
    doc = {"rule_files": [SLO_RULES], "evaluation_interval": "5m",
           "tests": [{"interval": "5m", "input_series": series, "promql_expr_test": checks}]}
    (tmp_path / "fleet.test.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=1 << 20))
    proc = subprocess.run(["promtool", "test", "rules", "fleet.test.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
