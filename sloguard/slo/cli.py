"""`sloguard evaluate -c FILE --results RESULTS.jsonl [--at TIMESTAMP] [--json]`: SLOs over recorded probes."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from sloguard.clock import FakeClock
from sloguard.config.files import read_text
from sloguard.config.load import ConfigError, load_config
from sloguard.model import ProbeResult
from sloguard.slo.engine import SLOEngine
from sloguard.slo.export import api_json
from sloguard.slo.model import slos_from_config
from sloguard.slo.status import render_tables

_FIELDS = {f.name for f in dataclasses.fields(ProbeResult)}
_REQUIRED = [f.name for f in dataclasses.fields(ProbeResult)
             if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]


def _result(row: Any) -> ProbeResult:
    if not isinstance(row, dict):
        raise ValueError(f"expected a JSON object per line (from `sloguard probe --json`), got {type(row).__name__}")
    missing = [name for name in _REQUIRED if name not in row]
    if missing:
        raise ValueError(f"missing key(s) {', '.join(missing)}: expected lines of `sloguard probe --json`")
    values = {k: v for k, v in row.items() if k in _FIELDS}
    if "itl_counts" in values:
        values["itl_counts"] = tuple(values["itl_counts"])
    return ProbeResult(**values)


def read_results(lines: Iterable[str]) -> Iterator[ProbeResult]:
    """Yield the results of `sloguard probe --json` lines (blank lines skipped; unknown keys ignored)."""
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                row = json.loads(line)
            except ValueError:
                raise ValueError(f"line {number}: not JSON: expected lines of `sloguard probe --json`") from None
            try:
                yield _result(row)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"line {number}: not a probe result: {exc}") from exc


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sloguard evaluate", description=__doc__)
    p.add_argument("-c", "--config", required=True)
    p.add_argument("--results", required=True, help="JSON lines from `sloguard probe --json` ('-' = stdin)")
    p.add_argument("--at", type=float, help="evaluate at this Unix time (default: the newest result)")
    p.add_argument("--json", action="store_true", help="print the full status as JSON (default: a text table)")
    return p


def main(argv: list[str]) -> int:
    """Evaluate the config's probe-sourced SLOs over recorded results; 2 on usage or input errors."""
    args = _parser().parse_args(argv)
    try:
        cfg = load_config(args.config)
        text = sys.stdin.read() if args.results == "-" else read_text(args.results, limit=1 << 31)
        results = list(read_results(text.splitlines()))
    except (ConfigError, OSError, ValueError) as exc:
        print(f"sloguard evaluate: {exc}", file=sys.stderr)
        return 2
    at = args.at if args.at is not None else max((r.ts for r in results), default=0.0)
    slos = tuple(s for s in slos_from_config(cfg) if s.source == "probe")
    engine = SLOEngine(slos, FakeClock(at))
    engine.rebuild(sorted((r for r in results if r.ts <= at), key=lambda r: r.ts))  # rebuild streams as given
    doc = {"at": at, "results": len(results), **api_json(engine.evaluate(at))}
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        print(f"{len(results)} probe results, evaluated at {_when(at)} (--json for every figure)\n")
        print(render_tables(doc))
    return 0


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts)) if ts > 0 else "-"
