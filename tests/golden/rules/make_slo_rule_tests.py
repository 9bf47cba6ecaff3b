"""Write alerts/tests/sloguard-slo.test.yaml: scenario counters -> the alerts expected, computed here.

The firing decisions are computed in Python from the counters (windows (t − long, t], the rows and k_min of
sloguard.slo.burnrate), independently of Prometheus; `promtool test rules` (tests/golden/rules) then checks
the generated rules against them. Rerun after changing sloguard.example.yaml:
    .venv/bin/python tests/golden/rules/make_slo_rule_tests.py
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sloguard.alerts.rules import burn_annotations, burn_groups, burn_hold, burn_labels, burn_plans
from sloguard.config.load import load_config
from sloguard.slo.model import SLO, slos_from_config

ROOT = Path(__file__).resolve().parents[3]
MINUTES, PER_MINUTE = 450, 2  # chat-mix probes every 30 s
REMAIN = {"availability": 0.62, "latency": 0.09}  # budget-left gauges the summaries read
COVER = 0.25  # coverage gauge: a quarter of 28 d = 7 d of data
TIMES = (4, 60, 70, 78, 90, 112, 116, 120, 200, 206, 215, 235, 260, 330, 450)  # 112: a page kept firing
HEAD = """\
# promtool test rules alerts/tests/sloguard-slo.test.yaml  (run from alerts/)
# chat-latency (28d, probes every 30 s: 2 requests a minute) has two budgets, availability 99.5% and latency 99%.
# Minute 3: one failure on a fresh install (a 25x availability "burn" in both page windows) pages nothing: 1 bad is
# not significant (the 1h row needs 6). Minutes 61-80: every request fails: both budgets page and ticket, then
# resolve once their rows have stopped holding for the hold (keep_firing_for: the alert's shortest short window).
# Minutes 200-229: requests are slow but succeed: only sli="latency" alerts fire. The summaries read the budget
# left and coverage gauges given below.
# Written by tests/golden/rules/make_slo_rule_tests.py, which computes the expected alerts outside Prometheus.
"""


def bad_at(minute: int) -> tuple[int, int]:
    """Return the (availability, latency) bad requests of a minute."""
    if minute == 3:
        return 1, 1  # a fresh install's first failure
    if 61 <= minute <= 80:
        return 2, 2  # outage: every request fails (and a failed request is never good)
    if 200 <= minute <= 229:
        return 0, 2  # latency fault: slow, but every request succeeds
    return 0, 0


def counters() -> dict[tuple[str, bool], list[int]]:
    """Return the cumulative sloguard_slo_requests_total values per (sli, good), one per minute."""
    cum: dict[tuple[str, bool], list[int]] = {(s, g): [0] for s in REMAIN for g in (False, True)}
    for m in range(1, MINUTES + 1):
        for sli, b in zip(REMAIN, bad_at(m), strict=True):
            cum[(sli, False)].append(cum[(sli, False)][-1] + b)
            cum[(sli, True)].append(cum[(sli, True)][-1] + PER_MINUTE - b)
    return cum


def holding(slo: SLO, cum: dict[tuple[str, bool], list[int]], t: int) -> dict[tuple[str, str], float]:
    """Return (sli, severity) -> the largest long-window burn among the rows that hold at minute t."""
    out: dict[tuple[str, str], float] = {}
    for ind, rule in burn_plans(slo):
        def window(seconds: float, sli: str = ind.sli) -> tuple[int, int]:
            s = max(0, t - int(seconds // 60))
            bad = cum[(sli, False)][t] - cum[(sli, False)][s]
            return bad, bad + cum[(sli, True)][t] - cum[(sli, True)][s]

        (bl, nl), (bs, ns) = window(rule.window.long), window(rule.window.short)
        burn_l, burn_s = bl / nl / (1 - ind.objective), bs / ns / (1 - ind.objective)
        if burn_l > rule.window.factor and burn_s > rule.window.factor and bl >= (rule.min_bad or 0):
            key = (ind.sli, rule.window.severity)
            out[key] = max(out.get(key, 0.0), burn_l)
    return out


def firing(slo: SLO, cum: dict[tuple[str, bool], list[int]], t: int) -> dict[tuple[str, str], float]:
    """Return (sli, severity) -> $value of the alerts firing at minute t: an alert whose rows last held at t' < t
    is kept firing (keep_firing_for, burn_hold) while t - (t' + 1) < its hold, with t''s value."""
    holds = {(sli, sev): burn_hold(rows) / 60 for sli, sev, rows in burn_groups(slo)}
    out: dict[tuple[str, str], float] = {}
    for key, hold in holds.items():
        last = next((m for m in range(t, 0, -1) if key in holding(slo, cum, m)), None)
        if last is not None and (last == t or t - (last + 1) < hold):
            out[key] = holding(slo, cum, last)[key]
    return out


def expected(slo: SLO, sli: str, severity: str, burn: float) -> dict[str, Any]:
    """Return the one alert of an SLI and severity: its value computed here, its fixed texts from the generator."""
    rows = next(r for s, sev, r in burn_groups(slo) if (s, sev) == (sli, severity))
    summary = (f"SLO {slo.name} {sli} budget burning {burn:.3g}x ({severity}); {REMAIN[sli] * 100:.4g}% of the 28d "
               "budget left (7d 0h 0m 0s of data)")
    fixed = {k: v for k, v in burn_annotations(slo, sli, severity, rows).items() if k not in ("summary", "title")}
    title = f"SLO {slo.name} {sli} budget burning {burn:.3g}x"
    return {"exp_labels": dict(burn_labels(slo, sli, severity)),
            "exp_annotations": {"title": title, "summary": summary, **fixed}}


PATH = ROOT / "alerts" / "tests" / "sloguard-slo.test.yaml"


def render() -> str:
    """Return the test file's text."""
    slo = next(s for s in slos_from_config(load_config(ROOT / "sloguard.example.yaml")) if s.name == "chat-latency")
    cum = counters()
    series = [{"series": f'sloguard_slo_requests_total{{slo="{slo.name}",sli="{sli}",good="{str(good).lower()}"}}',
               "values": " ".join(map(str, values))} for (sli, good), values in sorted(cum.items())]
    series += [{"series": f'sloguard_slo_{name}{{slo="{slo.name}",sli="{sli}"}}', "values": f"{value}x{MINUTES}"}
               for sli, left in REMAIN.items()
               for name, value in (("error_budget_remaining_ratio", left), ("window_coverage_ratio", COVER))]
    checks = [{"eval_time": f"{t}m", "alertname": "SloguardErrorBudgetBurn",
               "exp_alerts": [expected(slo, sli, sev, b) for (sli, sev), b in sorted(firing(slo, cum, t).items())]}
              for t in TIMES]
    doc = {"rule_files": ["../sloguard-slo.yaml"], "evaluation_interval": "1m",
           "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": checks}]}
    return HEAD + yaml.safe_dump(doc, sort_keys=False, width=200)


def main() -> None:
    """Write the test file."""
    PATH.write_text(render(), encoding="utf-8")
    print(PATH)


if __name__ == "__main__":
    main()
