"""A verdict as one line, as evidence lines and as JSON: for Slack, alert annotations, status and the API.

"p95 ttft 2.4s > 1s — queue: 78% of the ttft increase; 41 waiting, KV cache 97%, 12 preemptions/min →
capacity: add replicas or lower max concurrency"
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from sloguard.diagnose.model import Evidence, Verdict
from sloguard.diagnose.rules import RULES, Condition

# What the text calls each signal, with its unit for formatting.
SIGNAL_TEXT: dict[str, tuple[str, str]] = {
    "requests_waiting": ("waiting", "count"),
    "requests_waiting_peak": ("waiting at the most at a recent scrape", "count"),
    "queue_seconds_per_second": ("waiting on average (the engine's queue time)", "count"),
    "requests_running": ("running", "count"),
    "replica_outliers": ("replicas out of line with the others", "count"),
    "kv_cache_usage_ratio": ("KV cache", "ratio"), "preemptions_per_second": ("preemptions", "per_min"),
    "request_rate": ("request rate", "per_s"), "user_request_rate": ("users' request rate", "per_s"),
    "arrival_surge_z": ("users' arrivals over their baseline", "sd"),
    "prompt_tokens_per_request": ("users' prompt tokens/request", "count"),
    "prompt_tokens_recent": ("users' recent prompt tokens/request", "count"),
    "prompt_tokens_p90": ("p90 prompt tokens", "count"), "kv_cache_usage_p90": ("KV cache p90", "ratio"),
    "kv_cache_usage_peak": ("KV cache recent peak", "ratio"),
    "prefix_cache_hit_ratio": ("prefix-cache hits", "ratio"), "engine_restarts": ("engine restarts", "count"),
    "cold_starts": ("process cold starts", "count"), "serving_cpu_cores": ("serving CPU", "cores"),
    "serving_cpu_wait": ("serving CPU wait for a core", "cores"),
    "serving_cpu_demand": ("serving CPU demand (running + waiting)", "cores"),
    "gpu_throttle_reasons": ("GPU clock-event reasons", "count"), "gpu_sm_clock_ratio": ("SM clock of max", "ratio"),
    "gpu_health_problems": ("GPU health problems", "count"), "canary_degraded": ("canary degraded", "count"),
    "network_measured": ("network measured per request", "count"), "gpu_utilization_ratio": ("GPU busy", "ratio"),
}


def seconds(v: float) -> str:
    """Return a duration the way people read it: 2.4s, 85ms, 0.19ms."""
    if v >= 1.0:
        return f"{v:.3g}s"
    if v >= 1e-3:
        return f"{v * 1e3:.3g}ms"
    return f"{v * 1e3:.2g}ms"


def signal_value(name: str, value: float) -> str:
    """Return a signal's value with its unit, e.g. "KV cache 97%", "12 preemptions/min"."""
    label, unit = SIGNAL_TEXT.get(name, (name.replace("_", " "), ""))
    if unit == "ratio":
        return f"{label} {value:.0%}"
    if unit == "per_min":
        return f"{value * 60:.3g} {label}/min"
    if unit == "per_s":
        return f"{label} {value:.3g}/s"
    if unit == "cores":
        return f"{label} {value:.2g} cores"
    if unit == "sd":
        return f"{label} {value:+.2g} sd"
    return f"{value:.3g} {label}"


def _signals(evidence: tuple[Evidence, ...]) -> list[str]:
    return [signal_value(e.signal, e.value) for e in evidence
            if e.value is not None and e.signal in SIGNAL_TEXT and e.signal != "network_measured"]


def line(v: Verdict) -> str:
    """Return the verdict as one line (empty for a healthy SLO)."""
    if v.healthy or v.breach is None:
        return ""
    b = v.breach
    head = f"p{b.quantile * 100:g} {b.metric} {seconds(b.value)} > {seconds(b.threshold)}"
    if b.censored:  # the value is a lower bound under the threshold: requests cut short could exceed it
        head = f"p{b.quantile * 100:g} {b.metric} ≥ {seconds(b.value)}, requests cut short > {seconds(b.threshold)}"
    if not b.recent:  # over the SLO's own (longer) window only
        head = (f"p{b.quantile * 100:g} {b.metric} > {seconds(b.threshold)} over the SLO's window "
                f"({seconds(b.value)} now)")
    where: str = v.stage if v.stage != "none" else "no single stage"
    if v.share is not None and v.stage != "none":
        where += f": {v.share:.0%} of the {b.metric} increase"
    signals = _signals(v.evidence)
    tail = f"{v.cause}: {v.lever}" if v.lever else v.cause
    return f"{head} — {where}" + (f"; {', '.join(signals)}" if signals else "") + f" → {tail}"


def evidence_lines(v: Verdict) -> list[str]:
    """Return one line per piece of evidence: signal, value, what it was compared with."""
    out = []
    for e in v.evidence:
        value = "not available" if e.value is None else (
            seconds(e.value) if e.signal not in SIGNAL_TEXT else signal_value(e.signal, e.value))
        mark = "" if e.compared == "context" else (" ✓" if e.holds else " ✗")
        out.append(f"{e.signal}: {value} ({e.compared}){mark}" + (f" [{e.detail}]" if e.detail else ""))
    if v.missing:
        out.append("not available: " + ", ".join(v.missing))
    return out


def as_json(v: Verdict) -> dict[str, Any]:
    """Return the verdict as plain JSON types (the `diagnosis` of /api/v1/slos)."""
    return {
        "stage": v.stage, "cause": v.cause, "confidence": v.confidence, "lever": v.lever, "at": v.at,
        "summary": line(v), "share": v.share, "missing": list(v.missing),
        "breach": None if v.breach is None else asdict(v.breach),
        "evidence": [asdict(e) for e in v.evidence],
    }


def _condition(c: Condition) -> str:
    below = c.op in ("<", "<=")
    base = f"{'<' if below else '≥'} {c.vs_baseline:g}× its baseline" if c.vs_baseline is not None else ""
    base += f" (or {c.floor:g})" if c.floor and below and base else ""
    plain = f"{c.op} {c.threshold:g}" if math.isfinite(c.threshold) else ""
    text = f"`{c.signal}` {' and '.join(x for x in (plain, base) if x)}" + (" (where available)" if c.optional else "")
    return text + "".join(f", else {_condition(a)}" for a in c.alternatives)


def markdown() -> str:
    """Return the cause table of docs/diagnosis-rules.md (generated from RULES, in precedence order)."""
    rows = ["| # | cause | stages it explains | evidence (all of / one of) | lever |",
            "| --- | --- | --- | --- | --- |"]
    for i, r in enumerate(RULES, start=1):
        needs = " and ".join(_condition(c) for c in r.needs)
        any_of = " or ".join(_condition(c) for c in r.any_of)
        evidence = "; ".join(x for x in (needs, f"one of: {any_of}" if any_of and needs else any_of) if x)
        stages = ", ".join(s for s in ("network", "queue", "prefill", "decode") if s in r.stages)
        stages += " (or none located)" if r.unlocated else ""
        rows.append(f"| {i} | `{r.cause}` | {stages} | {evidence} | **{r.lever}**: {r.detail} |")
    return "\n".join(rows) + "\n"
