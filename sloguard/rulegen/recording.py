"""Recording rules: exact request counts per SLO budget and window, added up across replicas and sloguard instances.

Each window an alert row or the SLO window reads gets these records, labelled slo, sli (and metric, percentile for a
per-objective budget): `sloguard:slo_requests_by_good:increase<w>` (the counts, by `good`: the one record that reads
raw series), `sloguard:slo_requests:increase<w>` (requests judged), `sloguard:slo_bad_requests:increase<w>` (requests
that spent the budget) and `sloguard:slo_error_ratio:rate<w>` (bad / requests).

- A count is the counter's own difference over the window, as the live evaluator counts: its last value in the
  window minus its value at the window's start (the last sample at or up to 5 min before the start, else the oldest
  in the window: a series first seen inside the window counts from its first sample). Both ends skip staleness
  markers: while scrapes of sloguard fail (an overloaded host) a window counts up to the last scrape, and the first
  windows after the gap span the gap's requests, never a few seconds of requests judged as a whole window (nor one
  extrapolated from them); a series that ended (a replica gone) counts up to its last sample. Integers, no
  extrapolation, so sums over instances stay exact. Only where the counter reset in the window (a sloguard restart):
  increase().
- Fleet: server-SLO series carry `replica` (the engine replica, sloguard.slo.counters): one replica seen by several
  sloguard instances (an HA pair scrapes the same pods) counts once (the largest count), different replicas add up.
  Probe-SLO series have no replica and add up across instances: each instance's probes are requests of their own.
- Long windows (TILED_FROM, e.g. the 28-30 d SLO windows) are sums of the recorded 5 min counts (Pyrra's performance
  mode): a subquery at 5 min steps reads 8,064 recorded points per budget for 28 d instead of every raw sample of
  every series. With a rule interval that divides 5 min the evaluations sit at a fixed offset before the steps, so
  the 5 min counts tile the window exactly; the window ends at the last step (≤ 5 min old). Its range is the window
  less 1 ms: exactly window / 5 min steps on Prometheus 2 (closed ranges) and 3 (left-open).
- Budget left over the SLO window: 1 − error ratio / (1 − objective), i.e. expected requests = requests seen. The
  daemon's sloguard_slo_error_budget_remaining_ratio is the same once its window is covered (while it fills, it
  extrapolates the rate seen, or a probe schedule's, over the whole window).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sloguard.alerts.rules import burn_plans
from sloguard.config.units import format_duration
from sloguard.slo.model import SLO, Indicator, indicators

COUNTER = "sloguard_slo_requests_total"
BY = "slo, sli, metric, percentile"  # one series per SLO budget (absent labels stay absent)
TILE = 300.0
LOOKBACK_S = 300.0  # Prometheus's default lookback: how far before a window's start its first count is looked for
TILED_FROM = 7 * 86400.0
BUDGET_RECORD = "sloguard:slo_error_budget_remaining:ratio"
HIST_METRICS = ("ttft", "itl", "tpot", "e2e")  # probe histograms: sloguard_probe_<metric>_seconds
QUANTILE_WINDOWS = (300.0, 3600.0)
OF_REPLICA, OF_PROBES = 'replica!=""', 'replica=""'  # server-SLO series (an engine replica's) / probe-SLO series


def error_ratio_record(window: float) -> str:
    """Return the recording rule name of the budget-spending request ratio over a window."""
    return f"sloguard:slo_error_ratio:rate{format_duration(window)}"


def bad_record(window: float) -> str:
    """Return the recording rule name of the budget-spending request count over a window."""
    return f"sloguard:slo_bad_requests:increase{format_duration(window)}"


def requests_record(window: float) -> str:
    """Return the recording rule name of the judged request count over a window."""
    return f"sloguard:slo_requests:increase{format_duration(window)}"


def by_good_record(window: float) -> str:
    """Return the recording rule name of the judged request counts by `good` over a window."""
    return f"sloguard:slo_requests_by_good:increase{format_duration(window)}"


def tiled(window: float) -> bool:
    """Return whether a window's counts are sums of the recorded TILE counts (long and a whole number of tiles)."""
    return window >= TILED_FROM and round(window * 1000) % round(TILE * 1000) == 0


def selector(slo: SLO, ind: Indicator) -> str:
    """Return the label matchers of one budget's records (absent labels matched as empty)."""
    labels = {"slo": slo.name, "metric": "", "percentile": "", **ind.labels()}
    return "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in labels.items()) + "}"


def _diff(matchers: str, window: float) -> str:
    """Return each series' own difference over the window (module docstring)."""
    x, w = f"{COUNTER}{{{matchers}}}", format_duration(window)
    # A range skips staleness markers: after a failed scrape of sloguard the window still starts before the gap.
    start = f"(last_over_time({x}[{format_duration(LOOKBACK_S)}] offset {w}) or min_over_time({x}[{w}]))"
    # resets since the earliest start sample: a sloguard restart inside a scrape gap would count negative
    since = format_duration(window + LOOKBACK_S)
    return f"(last_over_time({x}[{w}]) - {start} unless resets({x}[{since}]) > 0) or increase({x}[{w}])"


def count_expr(window: float) -> str:
    """Return the counts by budget and `good`: an engine replica's once across instances, replicas and probe series
    added."""
    keep = f"{BY}, good"
    fleet = f"max by ({keep}, replica) ({_diff(OF_REPLICA, window)})"
    return f"sum by ({keep}) ({fleet}) or sum by ({keep}) ({_diff(OF_PROBES, window)})"


def tile_range(seconds: float) -> str:
    """Return a duration 1 ms short of `seconds` in Prometheus's compound form (`27d23h59m59s999ms`)."""
    left, parts = round(seconds * 1000) - 1, []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        n, left = divmod(left, size)
        parts += [f"{n}{unit}"] if n else []
    return "".join(parts)


def _counts(window: float) -> list[dict[str, Any]]:
    if tiled(window):
        expr = f"sum_over_time({by_good_record(TILE)}[{tile_range(window)}:{format_duration(TILE)}])"
    else:
        expr = count_expr(window)
    counts = by_good_record(window)
    return [{"record": counts, "expr": expr},
            {"record": requests_record(window), "expr": f"sum without (good) ({counts})"},
            {"record": bad_record(window), "expr": f'sum without (good) ({counts}{{good="false"}})'}]


def windows(slos: Sequence[SLO]) -> list[float]:
    """Return every window recorded: the alert rows' long and short windows, each SLO window, and TILE if needed."""
    found = {w for s in slos for _, r in burn_plans(s) for w in (r.window.long, r.window.short)}
    found |= {s.window for s in slos}
    return sorted(found | ({TILE} if any(tiled(w) for w in found) else set()))


def _quantile(slo: SLO, metric: str, q: float, window: float) -> dict[str, Any]:
    sel = f'probe="{slo.probe}"' if slo.probe else f'target="{slo.target}"'
    w = format_duration(window)
    return {"record": f"sloguard:slo_quantile_seconds:rate{w}",
            "expr": f"histogram_quantile({float(q)!r}, sum by (le) "
                    f"(rate(sloguard_probe_{metric}_seconds_bucket{{{sel}}}[{w}])))",
            "labels": {"slo": slo.name, "metric": metric, "quantile": f"{q:g}"}}


def recording_rules(slos: Sequence[SLO]) -> list[dict[str, Any]]:
    """Return the records in evaluation order: counts (tiles before the sums of them), ratios, budgets, quantiles."""
    ws = windows(slos)
    rules = [r for w in sorted(ws, key=tiled) for r in _counts(w)]
    rules += [{"record": error_ratio_record(w),
               "expr": f"({bad_record(w)} or {requests_record(w)} * 0) / {requests_record(w)}"} for w in ws]
    budgets = {(s.name, tuple(ind.labels().items())): {
        "record": BUDGET_RECORD,
        "expr": f"1 - {error_ratio_record(s.window)}{selector(s, ind)} / (1 - {float(ind.objective)!r})",
        "labels": {"slo": s.name, **ind.labels()}}  # the same labels the expression keeps: promtool's lint
        for s in slos for ind in indicators(s)}  # two identical objectives: one budget
    rules += list(budgets.values())
    rules += [_quantile(s, o.metric, o.quantile, w) for s in slos if s.source == "probe"
              for o in s.objectives if o.metric in HIST_METRICS for w in QUANTILE_WINDOWS]
    return rules
