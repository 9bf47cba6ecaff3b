"""`sloguard evaluate -c FILE --results RESULTS.jsonl [--at TIMESTAMP] [--json]`: SLOs over recorded probes."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Iterator

from sloguard import untrusted
from sloguard.clock import FakeClock
from sloguard.config.files import read_text
from sloguard.config.load import ConfigError, load_config
from sloguard.escape import lines
from sloguard.model import ProbeResult
from sloguard.probes.bounds import from_row
from sloguard.slo.engine import SLOEngine
from sloguard.slo.export import api_json
from sloguard.slo.model import slos_from_config
from sloguard.slo.status import render_tables
from sloguard.untrusted import Invalid


def read_results(lines: Iterable[str], source: str = "results") -> Iterator[ProbeResult]:
    """Yield the results of `sloguard probe --json` lines (blank lines skipped; unknown keys ignored); a bad line
    raises ValueError `SOURCE:LINE: field: problem` (a latency out of range, NaN, `ok: "false"`, `ttft_s: "fast"`)."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield from_row(untrusted.json_doc(line, what="line"))
        except Invalid as exc:
            if exc.reason == "not_json":
                raise ValueError(f"{source}:{number}: not JSON (lines of `sloguard probe --json`; no NaN)") from None
            raise ValueError(f"{source}:{number}: {exc}") from None


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
        results = list(read_results(text.splitlines(), "-" if args.results == "-" else args.results))
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
        print(lines(render_tables(doc)))  # names and errors come from the file
    return 0


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts)) if ts > 0 else "-"
