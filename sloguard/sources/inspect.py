"""`sloguard inspect-metrics FILE_OR_URL`: show what sloguard reads from an engine's /metrics.

Prints the detected engine, for every canonical signal (`sloguard_server_<signal>`) the raw series that fed
it or "not available", and the normalised values per model. Exit 0, 1 if the page cannot be read or parsed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sloguard.config.spec import TargetSpec
from sloguard.escape import terminal
from sloguard.model import Histogram, Sample, ServerView
from sloguard.sources.base import SourceError
from sloguard.sources.engines import ENGINES, detect_engine, normalise
from sloguard.sources.engines.provenance import Fed, provenance
from sloguard.sources.parse import ParseError, parse_text
from sloguard.sources.scrape import ScrapeSource


def _num(v: float) -> float | str:
    """JSON has no Inf/NaN: spell them as Prometheus does."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return v


def _hist(h: Histogram) -> dict[str, Any]:
    return {"buckets": [[_num(b), c] for b, c in h.buckets], "count": h.count, "sum": h.sum}


def view_json(view: ServerView) -> dict[str, Any]:
    """Return the normalised view as plain JSON data (bounds `+Inf` as a string)."""
    models = {
        name: {
            "histograms": {sig: _hist(h) for sig, h in mv.histograms.items()},
            "gauges": dict(mv.gauges),
            "counters": dict(mv.counters),
            "finished_by_reason": dict(mv.finished_by_reason),
        }
        for name, mv in view.models.items()
    }
    return {"target": view.target, "engine": view.engine, "models": models}


def signals_json(feds: Sequence[Fed]) -> dict[str, Any]:
    """Return {canonical signal: {"available": bool, "fed_by": [raw series], "note": str}}."""
    return {f.signal: {"available": f.available, "fed_by": list(f.sources), "note": "" if f.available else f.how}
            for f in feds}


def _signals_text(feds: Sequence[Fed]) -> list[str]:
    lines = ["signals (sloguard_server_<signal> <- raw series):"]
    for f in feds:
        fed = " ; ".join(f.sources) if f.available else "not available" + (f": {f.how}" if f.how else "")
        fed += " (a mean per window, no quantiles)" if f.how == "mean" else ""
        lines.append(f"  {f.signal:<30} {fed}")
    return lines


def _text(view: ServerView, feds: Sequence[Fed] = ()) -> str:
    lines = [f"engine: {view.engine}"]
    if feds:
        lines.extend(_signals_text(feds))
    for name, mv in view.models.items():
        lines.append(f"model: {terminal(name)}")  # a label value the server chose: escape bytes, CR, U+2028
        for sig, h in mv.histograms.items():
            mean = f"{h.sum / h.count:.6g}s" if h.count else "-"
            lines.append(f"  {sig:<22} histogram count={h.count:g} mean={mean} buckets={len(h.buckets)}")
        for sig, v in {**mv.gauges, **mv.counters}.items():
            lines.append(f"  {sig:<22} {v:g}")
        for reason, v in mv.finished_by_reason.items():
            lines.append(f"  finished[{terminal(reason)}]{'':<{max(0, 12 - len(reason))}} {v:g}")
    return "\n".join(lines)


async def _read(source: str, engine: str) -> str:
    if source == "-":
        return sys.stdin.read()
    url = source if "://" in source else Path(source).resolve().as_uri()
    scraper = ScrapeSource(TargetSpec(name="inspect", engine=engine, metrics_url=url))
    try:
        return await scraper.fetch_text()
    finally:
        await scraper.close()


def main(argv: list[str]) -> int:
    """Print the detected engine and normalised signals (or --raw samples); 0 ok, 1 unreadable, 2 usage."""
    ap = argparse.ArgumentParser(prog="sloguard inspect-metrics", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", metavar="FILE_OR_URL", help="a file, file:// or http(s):// URL, or - for stdin")
    ap.add_argument("--engine", default="auto", choices=["auto", *ENGINES],
                    help="engine map to apply (default: detected from the metric names)")
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--raw", action="store_true", help="print the parsed samples [{name, labels, value}]")
    args = ap.parse_args(argv)
    try:
        text = asyncio.run(_read(args.source, args.engine))
        samples = parse_text(text)
    except (SourceError, ParseError) as exc:
        reason = getattr(exc, "reason", "parse")
        print(f"sloguard inspect-metrics: {reason}: {terminal(str(exc))}", file=sys.stderr)
        return 1
    if args.raw:
        raw = [{"name": s.name, "labels": dict(s.labels), "value": _num(s.value)} for s in samples]
        print(json.dumps(raw, indent=None if args.json else 1))
        return 0
    view = normalise(samples, args.engine, "inspect", 0.0)
    if (problem := unrecognised(view, samples, args.engine)) is not None:
        print(f"sloguard inspect-metrics: {args.source}: {problem}", file=sys.stderr)
        return 1
    feds = provenance(ENGINES[view.engine], samples) if view.engine in ENGINES else []
    if args.json:
        print(json.dumps({**view_json(view), "signals": signals_json(feds)}, indent=2))
    else:
        print(_text(view, feds))
    return 0


def unrecognised(view: ServerView, samples: Sequence[Sample], engine: str) -> str | None:
    """Say why a parsed page gave no engine signals (not an engine page, or the wrong --engine); None if it did."""
    if view.models:
        return None
    names = sorted({s.name for s in samples})
    seen = f"{len(samples)} sample(s), e.g. {', '.join(names[:3])}" if names else "no samples"
    if engine == "auto":
        return (f"no inference-engine metrics recognised ({seen}); expected the /metrics of one of "
                f"{', '.join(ENGINES)} (--raw prints what was parsed)")
    detected = detect_engine(samples)
    hint = f"it looks like {detected}: use --engine {detected} or auto" if detected else "try --engine auto"
    return f"no {engine} metrics found ({seen}); {hint}"
