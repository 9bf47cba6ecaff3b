"""The in-process engine and `promtool test rules` on the generated rules agree on firing/resolving times.

Both consume the same synthetic `sloguard_slo_requests_total` counters (15 s samples, a third of requests bad
from minute 60 to 80, 500 minutes in all). In-process, burn rates come from counter increases over each
window and go through the live engine's burn rules; the rule generator's output goes through promtool. At
every minute that is not within one evaluation interval (1 m) of an in-process transition, promtool must see
exactly the alerts the engine has firing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from sloguard.alerts import engine
from sloguard.alerts.engine import Alert
from sloguard.alerts.rules import BURN_ALERT, burn_rules
from sloguard.config.load import load_config
from sloguard.config.units import format_duration
from sloguard.model import Sample
from sloguard.rulegen.prometheus import SLO_RULES, generate
from sloguard.slo.burnrate import STANDARD_WINDOWS, burn_rate
from sloguard.slo.model import budget_objective, slos_from_config

pytestmark = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not on PATH")
ROOT = Path(__file__).resolve().parents[2]
STEP, EVAL, N = 15, 60, 2000  # sample spacing (s), evaluation interval (s), samples after t=0
BAD_FROM, BAD_TO = 240, 320  # sample indices between which each sample adds 10 bad requests (20 good always)


def good(i: int) -> float:
    return 20.0 * i


def bad(i: int) -> float:
    return 10.0 * max(0, min(i, BAD_TO) - BAD_FROM)


def samples_at(t: int, slo: str, objective: float) -> list[Sample]:
    """Return in-process burn-rate samples: error ratio of counter increases over each window at t."""
    j = t // STEP
    out = []
    for w in STANDARD_WINDOWS:
        k = max(0, j - int(w) // STEP)
        total = good(j) + bad(j) - good(k) - bad(k)
        ratio = (bad(j) - bad(k)) / total if total > 0 else None
        rate = burn_rate(ratio, objective)
        if rate is not None:
            out.append(Sample("sloguard_slo_burn_rate", {"slo": slo, "window": format_duration(w)}, rate))
    return out


def labels_of(a: Alert) -> dict[str, str]:
    return {k: v for k, v in a.labels if k != "alertname"}


def test_engine_and_promtool_agree_within_one_interval(tmp_path: Path) -> None:
    cfg = load_config(ROOT / "sloguard.example.yaml")
    slo = next(s for s in slos_from_config(cfg) if s.source == "probe")
    rules = burn_rules(slo)
    active: dict[str, Alert] = {}
    firing_at: dict[int, list[dict[str, str]]] = {}
    transitions: list[tuple[int, str, str]] = []
    for t in range(0, N * STEP + 1, EVAL):
        active, events = engine.evaluate(rules, active, samples_at(t, slo.name, budget_objective(slo)), float(t))
        transitions += [(t, e.kind, dict(e.alert.labels)["long_window"]) for e in events]
        firing_at[t] = [labels_of(a) for a in active.values() if a.state == "firing"]
    # The scenario must exercise every rule: each fires once and resolves once.
    assert sorted((k, w) for _, k, w in transitions) == sorted(
        (k, format_duration(bw)) for k in ("firing", "resolved") for bw in (3600.0, 21600.0, 86400.0, 259200.0))

    files = generate(cfg, "sloguard.example.yaml")
    for name in (SLO_RULES,):
        doc = yaml.safe_load(files[name])
        for group in doc["groups"]:
            for r in group["rules"]:
                r.pop("annotations", None)  # $value differs slightly (extrapolated rate()); times are compared
        (tmp_path / name).write_text(yaml.safe_dump(doc))
    near = {t for t, _, _ in transitions}
    checks = [{"eval_time": f"{t}s", "alertname": BURN_ALERT,
               "exp_alerts": [{"exp_labels": lab} for lab in firing_at[t]]}
              for t in firing_at if t > 0 and all(abs(t - x) > EVAL for x in near)]
    series = [
        {"series": f'sloguard_slo_requests_total{{slo="{slo.name}",good="true"}}', "values": f"0+20x{N}"},
        {"series": f'sloguard_slo_requests_total{{slo="{slo.name}",good="false"}}',
         "values": f"0x{BAD_FROM} 10+10x{BAD_TO - BAD_FROM - 1} {bad(BAD_TO):g}x{N - BAD_TO - 1}"},
    ]
    test = {"rule_files": [SLO_RULES], "evaluation_interval": f"{EVAL}s",
            "tests": [{"interval": f"{STEP}s", "input_series": series, "alert_rule_test": checks}]}
    (tmp_path / "eq.test.yaml").write_text(yaml.safe_dump(test))
    proc = subprocess.run(["promtool", "test", "rules", "eq.test.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert len(checks) > 400
