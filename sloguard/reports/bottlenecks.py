"""The report's "Bottlenecks and recommendations": where the candidate's extra time went, and which of the
diagnosis rules (sloguard.diagnose.rules.RULES) can explain it, with their levers.

Pure. A stage counts as grown when its p50 or p95 difference's 95 % interval lies above 0 and it is slower
by more than the stage threshold (default 5 %; TTFT's relative interval above it); stages are ranked by
the time they added at that quantile. For each grown stage the rules
whose stages include it are the candidate causes, in the rules' precedence order, each with its lever and
the signals that tell them apart (a bench file or a store slice holds latencies, not engine/GPU signals:
the daemon's own verdicts, where given, name the one cause). `connect` is the network stage's; where the
inputs do not split queue and prefill (no server records), TTFT stands for both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from sloguard.diagnose.rules import RULES
from sloguard.reports.cells import Cell

TTFT_STAGE = "queue+prefill (TTFT, not split in these inputs)"
DIAGNOSIS_STAGE = {"connect": "network", "network": "network", "queue": "queue", "prefill": "prefill",
                   "decode": "decode", TTFT_STAGE: "queue+prefill"}


def _stage_of(c: Cell, split: bool) -> str | None:
    """Return the stage a cell measures: a stage cell's, or TTFT's as queue+prefill where they are not split."""
    if c.kind == "stage":
        return c.metric.removeprefix("stage:")
    return TTFT_STAGE if not split and c.kind == "latency" and c.metric == "ttft" else None


def _grown_beyond(c: Cell) -> bool:
    """A stage cell (absolute seconds) grew when its interval is above 0 and it is `threshold` slower
    relatively; a latency cell (relative) when its interval lies above the threshold."""
    assert c.ci is not None and c.base is not None and c.cand is not None
    if c.scale == "absolute":
        return c.ci[0] > 0 and c.cand > c.base * (1 + c.threshold)
    return c.ci[0] > c.threshold


def _grown(cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """Return the stages whose candidate is slower beyond the threshold, the largest added time first."""
    split = any(c.metric in ("stage:queue", "stage:prefill") for c in cells)
    best: dict[str, dict[str, Any]] = {}
    for c in cells:
        stage = _stage_of(c, split)
        if stage is None or c.scope != "overall" or c.ci is None or c.base is None or c.cand is None:
            continue
        if not (math.isfinite(c.base) and math.isfinite(c.cand)) or not _grown_beyond(c):
            continue
        added = c.cand - c.base
        if stage not in best or added > best[stage]["added_s"]:
            best[stage] = {"stage": stage, "stat": c.stat, "scale": c.scale, "delta": c.delta, "ci": list(c.ci),
                           "added_s": added, "relative": c.cand / c.base - 1 if c.base > 0 else None,
                           "baseline_s": c.base, "candidate_s": c.cand}
    return sorted(best.values(), key=lambda g: -g["added_s"])


def _change_text(g: Mapping[str, Any]) -> str:
    lo, hi = g["ci"]
    rel = "" if g["relative"] is None else f" ({g['relative'] * 100:+.1f} %)"
    if g["scale"] == "absolute":
        return f"{g['added_s'] * 1e3:+.1f} ms [{lo * 1e3:+.1f}, {hi * 1e3:+.1f} ms]{rel} at {g['stat']}"
    added = f"{g['added_s'] * 1e3:+.1f} ms"
    return f"{g['delta'] * 100:+.1f} % [{lo * 100:+.1f} %, {hi * 100:+.1f} %] ({added}) at {g['stat']}"


def _causes(stage: str) -> list[dict[str, Any]]:
    """Return each cause that can explain the stage once (a cause with several rows: the union of their signals)."""
    where = set(DIAGNOSIS_STAGE.get(stage, "").split("+"))
    out: dict[str, dict[str, Any]] = {}
    for rule in RULES:
        if where & rule.stages:
            first = out.setdefault(rule.cause, {"cause": rule.cause, "lever": rule.lever, "detail": rule.detail,
                                                "signals": []})
            first["signals"] = sorted({*first["signals"], *(c.signal for c in (*rule.needs, *rule.any_of))})
    return list(out.values())


def _daemon_items(verdicts: Sequence[Mapping[str, Any]]) -> list[str]:
    """Return one line per SLO verdict of the daemon (its /api/v1/slos `diagnosis`) that names a cause."""
    out = []
    for v in verdicts:
        if v.get("cause") in (None, "none"):
            continue
        head = f"the daemon's diagnosis for SLO {v.get('slo')}: {v.get('summary') or v.get('cause')}"
        out.append(head + (f"; lever: {v['lever']}" if v.get("lever") else ""))
    return out


def bottlenecks(cells: Sequence[Cell], verdicts: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """Return the section: grown stages with their candidate causes and levers, the daemon's verdicts."""
    grown = [{**g, "causes": _causes(g["stage"])} for g in _grown(cells)]
    measured = {c.metric.removeprefix("stage:") for c in cells if c.kind == "stage"}
    if not measured and not verdicts:
        return {"available": False, "reason": "no per-request stage times in these inputs and no diagnosis "
                "verdicts (the daemon adds its own to its automatic reports; else --diagnosis FILE)"}
    items = _daemon_items(verdicts)
    for g in grown:
        causes = "; ".join(f"{c['cause']} (lever: {c['lever']}; tell apart by {', '.join(c['signals'])})"
                           for c in g["causes"])
        items.append(f"{g['stage']} grew {_change_text(g)}: the diagnosis rules that explain a slower "
                     f"{DIAGNOSIS_STAGE.get(g['stage'], g['stage'])} stage: {causes}")
    if not items:
        items.append(f"no measured stage ({', '.join(sorted(measured))}) is slower beyond its threshold")
    return {"available": True, "stages": grown, "daemon": list(verdicts), "items": items}
