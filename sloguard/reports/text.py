"""Words and numbers the renderers share: values with units, changes with intervals, the summary line."""

from __future__ import annotations

import math
from typing import Any

NAMES = {"ttft": "TTFT", "ttfot": "TTFOT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E", "error_rate": "error rate",
         "throughput": "throughput"}
VERDICT_WORD = {"regression": "REGRESSION", "improvement": "IMPROVEMENT",
                "no significant change": "NO SIGNIFICANT CHANGE", "not enough data": "NOT ENOUGH DATA"}
METHODOLOGY = (
    "Changes are candidate vs baseline: latency quantiles and goodput as relative changes (candidate / baseline "
    "− 1), the error rate as a difference in percentage points, closed-loop throughput by Little's law "
    "(concurrency / mean request cycle).",
    "95 % intervals: seeded bootstrap over requests ({replicates} replicates, seed {seed}), resampled within "
    "strata (load level × prompt bucket) and weighted with the baseline's stratum shares; log-ratio normal "
    "intervals with a robust (interquartile) standard error, percentile intervals where a quantile falls among "
    "censored requests.",
    "Verdict: a change counts only when it is significant after Holm's correction over all {family} judged "
    "numbers of the report (family-wise false-positive rate ≤ {alpha:g}) and larger than the practical "
    "threshold ({thresholds}). A quantile is judged only with ≥ {min_tail} values beyond it on each side.",
    "Censored requests (failed before the first token or the end) are never dropped: they count as slower "
    "than every measured request (shown as \"> the time they ran\"); a quantile that falls among them is a "
    "lower bound. Requests with no token at all (`empty`) have no TTFT; they count as successes.",
    "Excluded: bench warm-up requests (the bench does not write them; counted in its stage summaries) and "
    "requests of other behaviours than `normal`; open-loop bench latencies are measured from the scheduled "
    "send time (`*_sched_s`: no coordinated omission). Probe results carry the target's identity when they "
    "are stored.",
    "Clock: per-request latencies on the client's monotonic clock (`perf_counter_ns` at chunk arrival); wall "
    "times (time ranges) are UTC.",
)


def seconds(x: float | None) -> str:
    """Return a latency with a readable unit ('—' for none, '∞' for censored)."""
    if x is None:
        return "—"
    if math.isinf(x):
        return "∞"
    if abs(x) < 1e-3:
        return f"{x * 1e6:.0f} µs"
    if abs(x) < 1.0:
        return f"{x * 1e3:.1f} ms"
    return f"{x:.2f} s"


def value(cell: dict[str, Any], role: str) -> str:
    """Return one side's value of a cell: seconds, a percentage or rps; '> X' where censored."""
    x = cell.get("base" if role == "baseline" else "cand")
    censored = cell.get("base_censored" if role == "baseline" else "cand_censored")
    if censored:
        bound = cell.get("base_bound" if role == "baseline" else "cand_bound")
        return f"> {seconds(bound)}" if isinstance(bound, int | float) and math.isfinite(bound) else "> timeout"
    if x is None:
        return "—"
    if cell["kind"] in ("goodput", "error_rate"):
        return f"{x * 100:.2f} %"
    if cell["kind"] == "throughput":
        return f"{x:.2f} req/s"
    return seconds(x)


def _signed(cell: dict[str, Any], x: float | None) -> str:
    if x is None:
        return "?"
    if cell["scale"] == "absolute":
        if cell["kind"] == "error_rate":
            return f"{x * 100:+.2f} pp"
        return f"{x * 1e3:+.1f} ms"
    return f"{x * 100:+.1f} %"


def change(cell: dict[str, Any]) -> str:
    """Return 'Δ [low, high]', or why there is none."""
    if cell.get("delta") is None and (cell.get("base_censored") or cell.get("cand_censored")) and cell.get("ci"):
        lo = cell["ci"][0]
        return f"≥ {_signed(cell, lo)}" if lo is not None else "censored"
    if cell.get("delta") is None:
        return "—"
    ci = cell.get("ci")
    text = _signed(cell, cell["delta"])
    if ci:
        text += f" [{_signed(cell, ci[0])}, {_signed(cell, ci[1])}]" if ci[1] is not None else \
            f" [{_signed(cell, ci[0])}, +∞]"
    return text


def what(cell: dict[str, Any]) -> str:
    """Return e.g. 'p95 TTFT', 'goodput chat-latency', 'error rate'."""
    metric = str(cell["metric"])
    if metric.startswith("goodput:"):
        return f"goodput {metric.split(':', 1)[1]}"
    if metric.startswith("stage:"):
        return f"{cell['stat']} {metric.split(':', 1)[1]}"
    if cell["kind"] == "latency":
        return f"{cell['stat']} {NAMES.get(metric, metric)}"
    return NAMES.get(metric, metric)


def scope(cell: dict[str, Any]) -> str:
    """Return the scope in words: '' for overall, 'bucket short', 'at concurrency 8'."""
    s = str(cell["scope"])
    if s == "overall":
        return ""
    kind, _, name = s.partition(":")
    return f"prompt bucket {name}" if kind == "bucket" else f"at {name}"


def summary(doc: dict[str, Any]) -> str:
    """Return the one-line verdict with the three biggest changes."""
    head = VERDICT_WORD[doc["verdict"]]
    parts = []
    for c in doc["top_changes"]:
        where = scope(c)
        parts.append(f"{what(c)}{' (' + where + ')' if where else ''} {change(c)} ({c['verdict']})")
    n_b, n_c = doc["baseline"]["requests"], doc["candidate"]["requests"]
    tail = f"; {n_b} vs {n_c} requests"
    return f"{head}: " + ("; ".join(parts) if parts else "no comparable metric") + tail


def label(side: dict[str, Any]) -> str:
    """Return a short name of a side: its release label, engine version or model, else where it came from."""
    ident = side.get("identity") or {}
    labels = ident.get("labels") or {}
    for key in ("release", "version"):
        if labels.get(key):
            return str(labels[key])
    if labels:
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return str(ident.get("engine_version") or ident.get("model") or side.get("spec"))


def methodology(doc: dict[str, Any]) -> list[str]:
    """Return the methodology paragraphs with this report's settings filled in."""
    st = doc["settings"]
    family = sum(1 for c in doc["cells"] if c["family"] and c["p_adjusted"] is not None)
    thresholds = ", ".join(f"{NAMES.get(k, k)} {v * 100:g} %" if k != "error_rate" else f"error rate {v * 100:g} pp"
                           for k, v in sorted(st["thresholds"].items()) if k != "stage")
    out = [m.format(replicates=st["replicates"], seed=st["seed"], family=family, alpha=st["alpha"],
                    thresholds=thresholds, min_tail=st["min_tail"]) for m in METHODOLOGY]
    if doc.get("resolution"):
        out.append(str(doc["resolution"]))
    return out
