"""Per-stage summary maths over measured requests (pure): throughput, latency quantiles, goodput, lag.

Definitions (docs/load-tests.md):
- measured requests: those scheduled after the stage's warm-up; warm-up requests are sent (the server is
  loaded the same) but excluded from every figure, and counted in `warmup_requests`;
- rates: a timed stage counts the requests that completed inside its measured window (warm-up end →
  stage end), warm-up ones included, per second of that window (`rate_basis: window`), so requests
  straddling either edge bias nothing; a stage sized in requests (or cut short) uses its measured
  requests over their span, first send → last completion (`rate_basis: span`). `rps` = succeeded,
  `output_tok_s` = their server-reported output tokens, goodput `rate` = good requests;
- latency quantiles: numpy `linear` percentiles over succeeded requests (as the daemon's exact windows);
  ITL over every per-token gap of every request, from the probes' per-request gap counts in
  sloguard.probes.timing.ITL_BUCKETS (quantiles at bucket resolution, as Prometheus' histogram_quantile;
  the mean exact; `itl_basis` = "buckets"); `*_sched` from the scheduled send time (no coordinated
  omission);
- send lag = actual − scheduled send; errors by kind; a stall is a request whose largest gap between
  token events reached `stall_s`;
- behaviours: latency, goodput and the judge read `normal` requests only; `by_behaviour` gives each
  behaviour's own count, ok share, TTFT / E2E and (oversized prompts) check outcomes, so the unhappy
  requests are reported like the others and their effect shows in the normal ones' figures.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from sloguard import histogram
from sloguard.bench.record import RequestRecord
from sloguard.model import Histogram
from sloguard.probes.timing import ITL_BUCKETS
from sloguard.slo.model import SLO, is_good

QUANTILES = (50, 95, 99)
NORMAL = "normal"
# error text prefix -> kind (the rest: the text before the first ':' or space, lower-cased)
ERROR_KINDS: tuple[tuple[str, str], ...] = (
    ("timeout", "timeout"), ("error event", "error_event"), ("truncated stream", "truncated"),
    ("no tokens", "no_tokens"), ("probe crashed", "client_bug"), ("response larger", "too_large"),
    ("ClientConnector", "connect"), ("ServerDisconnected", "disconnected"), ("ClientOSError", "connection"),
)
LATENCIES: Mapping[str, Callable[[RequestRecord], float | None]] = {
    "ttft": lambda r: r.result.ttft_s, "ttfot": lambda r: r.result.ttfot_s, "tpot": lambda r: r.result.tpot_s,
    "e2e": lambda r: r.result.e2e_s, "connect": lambda r: r.result.connect_s,
    "ttft_sched": lambda r: r.ttft_sched_s, "e2e_sched": lambda r: r.e2e_sched_s,
}


def error_kind(error: str | None) -> str:
    """Return a short kind for an error message (`http_503`, `timeout`, `connect`, ...)."""
    if not error:
        return "none"
    if m := re.match(r"http (\d{3})", error):
        return f"http_{m.group(1)}"
    for prefix, kind in ERROR_KINDS:
        if error.startswith(prefix):
            return kind
    return re.split(r"[:\s]", error, maxsplit=1)[0].lower()[:40] or "other"


def quantiles(values: Iterable[float]) -> dict[str, float | int | None]:
    """Return n, mean and p50/p95/p99 (numpy linear); None figures for no values."""
    arr = np.fromiter(values, dtype=float)
    if arr.size == 0:
        return {"n": 0, "mean": None, **{f"p{q}": None for q in QUANTILES}}
    qs = np.percentile(arr, QUANTILES)
    by_q = {f"p{q}": float(v) for q, v in zip(QUANTILES, qs, strict=True)}
    return {"n": int(arr.size), "mean": float(arr.mean()), **by_q}


def _present(records: Iterable[RequestRecord], get: Callable[[RequestRecord], float | None]) -> Iterable[float]:
    for r in records:
        value = get(r)
        if value is not None:
            yield value


def _itl(ok: Sequence[RequestRecord]) -> tuple[dict[str, float | int | None], str]:
    """ITL over every per-token gap: the requests' bucket counts summed (bucket-resolution quantiles, exact
    mean); requests without counts fall back to quantiles over each request's p50 gap."""
    counted = [r.result for r in ok if r.result.itl_counts]
    if not counted:
        return quantiles(_present(ok, lambda r: r.result.itl_p50_s)), "request_p50"
    counts = [sum(c) for c in zip(*(r.itl_counts for r in counted), strict=True)]
    bounds = (*ITL_BUCKETS, math.inf)[:len(counts)]
    cumulative = tuple(zip(bounds, itertools.accumulate(float(c) for c in counts), strict=True))
    h = Histogram(cumulative, float(sum(counts)), sum(r.itl_sum_s for r in counted))
    by_q = {f"p{q}": histogram.quantile(q / 100, h) for q in QUANTILES}
    return {"n": int(h.count), "mean": h.sum / h.count if h.count else None, **by_q}, "buckets"


def _rates(records: Sequence[RequestRecord], everything: Sequence[RequestRecord], slos: Sequence[SLO],
           window: tuple[float, float] | None) -> tuple[float, dict[str, Any]]:
    """Return (seconds, {figure: per second}) over the window, or over the measured span without one."""
    if window is not None:
        seconds = window[1] - window[0]
        done = [r for r in everything if window[0] <= r.ended_s < window[1]]
    else:
        seconds = (max(r.ended_s for r in records) - min(r.sent_s for r in records)) if records else 0.0
        done = list(records)
    ok = [r for r in done if r.result.ok and r.behaviour == NORMAL]
    counts = {"rps": len(ok), "output_tok_s": sum(r.result.output_tokens or 0 for r in ok)}
    for slo in slos:
        if slo.source == "probe" and slo.goodput is not None:
            counts[slo.name] = sum(1 for r in done if is_good(r.result, slo.goodput))
    return seconds, {k: v / seconds if seconds > 0 else None for k, v in counts.items()}


def summarise(records: Sequence[RequestRecord], slos: Sequence[SLO], stall_s: float,
              everything: Sequence[RequestRecord] = (), window: tuple[float, float] | None = None) -> dict[str, Any]:
    """Return the summary figures of one stage; `records` are its measured requests (no warm-up).

    Rates count completions inside `window` (stage seconds: the measured part of a timed stage), warm-up
    requests included (`everything`), so requests still running at either edge bias nothing; without a
    window, the measured requests over their span.
    """
    ok = [r for r in records if r.result.ok and r.behaviour == NORMAL]
    seconds, per_s = _rates(records, everything or records, slos, window)
    latency: dict[str, Any] = {name: quantiles(_present(ok, get)) for name, get in LATENCIES.items()}
    latency["itl"], itl_basis = _itl(ok)
    errors = Counter(error_kind(r.result.error) for r in records if not r.result.ok)
    goodput = {}
    normal = [r for r in records if r.behaviour == NORMAL]
    for slo in slos:
        if slo.source == "probe" and slo.goodput is not None:
            good = sum(1 for r in normal if is_good(r.result, slo.goodput))
            goodput[slo.name] = {"good": good, "ratio": good / len(normal) if normal else None,
                                 "rate": per_s[slo.name], "target": slo.goodput.target}
    return {
        "requests": len(records), "ok": sum(1 for r in records if r.result.ok), "failed": sum(errors.values()),
        "error_ratio": sum(errors.values()) / len(records) if records else None,
        "errors": dict(sorted(errors.items())), "timeouts": errors.get("timeout", 0),
        "stalls": sum(1 for r in records if (r.result.itl_max_s or 0.0) >= stall_s),
        "behaviours": dict(sorted(Counter(r.behaviour for r in records).items())),
        "span_s": seconds, "rate_basis": "window" if window is not None else "span",
        "rps": per_s["rps"], "output_tok_s": per_s["output_tok_s"],
        "output_tokens": sum(r.result.output_tokens or 0 for r in ok),
        "latency": latency, "itl_basis": itl_basis, "goodput": goodput,
        "send_lag": quantiles(r.send_lag_s for r in records),
        "by_behaviour": by_behaviour(records),
    }


def by_behaviour(records: Sequence[RequestRecord]) -> dict[str, dict[str, Any]]:
    """Return each behaviour's own figures: requests, ok share, errors, TTFT and E2E, check outcomes."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted({r.behaviour for r in records}):
        mine = [r for r in records if r.behaviour == name]
        ok = [r for r in mine if r.result.ok]
        out[name] = {
            "requests": len(mine), "ok": len(ok), "ok_ratio": len(ok) / len(mine),
            "errors": dict(sorted(Counter(error_kind(r.result.error) for r in mine if not r.result.ok).items())),
            "ttft": quantiles(_present(ok, LATENCIES["ttft"])), "e2e": quantiles(_present(ok, LATENCIES["e2e"])),
            "output_tokens": sum(r.result.output_tokens or 0 for r in ok),
            "checks": dict(sorted(Counter(r.result.check_outcome for r in mine if r.result.check_outcome).items())),
        }
    return out
