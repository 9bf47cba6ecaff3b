"""`prom:URL{SELECTOR}@FROM..TO` inputs: sloguard's exported series through the Prometheus HTTP API.

Works against anything that serves `/api/v1/query` (Prometheus, Thanos Query, Mimir): one instant query
per family at TO over a range of TO − FROM, `increase()` so counter resets (daemon restarts) are handled:
- `sum by (le, prompt_bucket) (increase(sloguard_probe_<metric>_seconds_bucket{SELECTOR}[R]))`
- `sum by (outcome) (increase(sloguard_probe_requests_total{SELECTOR}[R]))`
- `sum by (slo, good) (increase(sloguard_slo_requests_total{SELECTOR}[R]))` (where the selector's labels
  exist on it: instance, job, ...), and `sloguard_release_info{SELECTOR}[R]` for the identity.
"""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import numpy as np

from sloguard.reports.data import DataError, Histograms, Side
from sloguard.reports.histstats import METRICS
from sloguard.reports.storeslice import parse_time

_SPEC = re.compile(r"^prom:(?P<url>https?://[^{@\s]+?)/?(?P<sel>\{.*\})?@(?P<range>[^@]*)$")


def parse(spec: str) -> tuple[str, str, float, float]:
    """Return (URL, selector, from, to); DataError says what a spec must look like."""
    m = _SPEC.match(spec)
    if m is None:
        raise DataError(f"{spec}: expected prom:URL{{SELECTOR}}@FROM..TO, e.g. "
                        "prom:http://prometheus:9090{job=\"sloguard\"}@2026-11-24T10:00:00Z..2026-11-24T11:00:00Z")
    start, _, end = m.group("range").partition("..")
    try:
        t0, t1 = parse_time(start), parse_time(end)
    except ValueError as exc:
        raise DataError(f"{spec}: {exc}") from None
    if t1 <= t0:
        raise DataError(f"{spec}: the time range is empty (FROM must be before TO)")
    return m.group("url"), (m.group("sel") or "{}"), t0, t1


def query(url: str, promql: str, at: float) -> list[dict[str, Any]]:
    """Run an instant query; DataError for an unreachable server or a PromQL error."""
    full = f"{url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': promql, 'time': f'{at:.3f}'})}"
    try:
        with urllib.request.urlopen(full, timeout=60) as resp:
            doc = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            msg = json.loads(exc.read()).get("error", "")
        except ValueError:
            msg = ""
        raise DataError(f"{url}: HTTP {exc.code} for {promql}: {msg}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise DataError(f"{url}: cannot query Prometheus: {exc}") from None
    if doc.get("status") != "success":
        raise DataError(f"{url}: {promql}: {doc.get('error')}")
    result: list[dict[str, Any]] = doc["data"]["result"]
    return result


def _le(text: str) -> float:
    return math.inf if text in ("+Inf", "Inf", "inf") else float(text)


Counts = dict[str, dict[str, np.ndarray]]


def histograms(url: str, sel: str, rng: str, at: float) -> tuple[dict[str, np.ndarray], Counts]:
    """Return per metric its bucket bounds and, per prompt bucket, non-cumulative whole-request counts."""
    bounds: dict[str, np.ndarray] = {}
    counts: dict[str, dict[str, np.ndarray]] = {}
    for metric in METRICS:
        rows = query(url, f"sum by (le, prompt_bucket) (increase(sloguard_probe_{metric}_seconds_bucket{sel}[{rng}]))",
                     at)
        if not rows:
            continue
        les = sorted({_le(r["metric"]["le"]) for r in rows})
        bounds[metric] = np.array(les)
        by_bucket: dict[str, np.ndarray] = {}
        for r in rows:
            b = r["metric"].get("prompt_bucket", "") or "all"
            cum = by_bucket.setdefault(b, np.zeros(len(les)))
            cum[les.index(_le(r["metric"]["le"]))] = max(0.0, float(r["value"][1]))
        counts[metric] = {b: np.diff(np.round(np.maximum.accumulate(c)), prepend=0.0) for b, c in by_bucket.items()}
    return bounds, counts


def identity(url: str, sel: str, rng: str, at: float) -> dict[str, Any]:
    """Return the release identity last seen in the range: the `sloguard_release_info` series with the newest sample.

    Read from the range's raw samples, not an instant query at its end: one failed scrape there (a busy
    daemon) leaves a staleness marker, and an instant query would then find no identity at all.
    """
    rows = query(url, f"sloguard_release_info{sel}[{rng}]", at)
    newest = max(rows, key=lambda r: max((float(t) for t, _ in r.get("values") or ()), default=-math.inf),
                 default=None)
    if newest is None:
        return {"labels": {}}
    m = newest["metric"]
    return {"target": m.get("target"), "engine": m.get("engine"), "engine_version": m.get("engine_version") or None,
            "model": m.get("model"), "labels": {k[6:]: v for k, v in m.items() if k.startswith("label_") and v}}


def read_prom(spec: str, role: str, slos: list[dict[str, Any]] | None) -> Side:
    """Return the Side of a Prometheus range; DataError when it holds no probe data."""
    url, sel, t0, t1 = parse(spec)
    rng = f"{max(1, round(t1 - t0))}s"
    bounds, counts = histograms(url, sel, rng, t1)
    outcomes = {r["metric"].get("outcome", ""): float(r["value"][1]) for r in
                query(url, f"sum by (outcome) (increase(sloguard_probe_requests_total{sel}[{rng}]))", t1)}
    if not bounds or sum(outcomes.values()) < 1:
        raise DataError(f"{spec}: Prometheus holds no sloguard probe data for this selector and range")
    good: dict[str, list[float]] = {}
    for r in query(url, f"sum by (slo, good) (increase(sloguard_slo_requests_total{sel}[{rng}]))", t1):
        entry = good.setdefault(r["metric"].get("slo", ""), [0.0, 0.0])
        entry[1] += float(r["value"][1])
        if r["metric"].get("good") == "true":
            entry[0] += float(r["value"][1])
    ident = identity(url, sel, rng, t1)
    hist = Histograms(bounds, counts, outcomes, {k: (v[0], v[1]) for k, v in good.items()})
    return Side(role=role, kind="prom", spec=spec, histograms=hist, identity=ident, slos=slos or [],
                workload={"prompt_buckets": sorted({b for c in counts.values() for b in c})},
                environment={"prometheus": url, "selector": sel}, time_range=(t0, t1))
