"""`sloguard canary`: run the GPU canary once (waiting for a quiet GPU), print its verdict."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from sloguard.config.spec import CanarySpec
from sloguard.gpu.canary import CanarySource
from sloguard.gpu.verdict import TESTS, Report
from sloguard.sources.base import SourceError


def _frac(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _contention(rep: Report) -> str:
    if rep.contended is None:
        return f"contention unknown ({rep.contention_reason})"
    if not rep.contended:
        return "alone on the GPU"
    share = "" if rep.contention_share is None else f", other work in {rep.contention_share:.0%} of it"
    return f"CONTENDED ({rep.contention_reason}{share}): throughput not judged, not baselined"


def print_report(rep: Report) -> None:
    """Print the verdict, contention and one line per test."""
    f = rep.figures
    stored = f" (baseline: {rep.baseline_runs} run(s), this one stored)" if rep.baseline_stored else \
        f" (baseline: {rep.baseline_runs} run(s))"
    print(f"device={f.get('device')} gpu={f.get('gpu_name')} spec={rep.spec_model or '-'} "
          f"degraded={rep.degraded}{stored} {'; '.join(rep.reasons)}")
    print(f"  {_contention(rep)}; waited {rep.waited_seconds:.1f}s for a quiet gap")
    for t in TESTS:
        spec_frac, base_frac = rep.fraction_of_spec.get(t.name), rep.fraction_of_baseline.get(t.name)
        print(f"  {t.name:18} {f.get(t.figure, float('nan')):<11.4g} of spec {_frac(spec_frac)}"
              f"  of baseline {_frac(base_frac)}")


def main(argv: list[str]) -> int:
    """`sloguard canary [--device auto|cpu|cuda:N] [--json] [--calibrate]`: 0 ok, 1 degraded, 2 error."""
    p = argparse.ArgumentParser(prog="sloguard canary", description="Run the GPU canary once.")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.add_argument("--calibrate", action="store_true",
                   help="start this GPU's baseline afresh from this run (only if the run had the GPU to itself)")
    p.add_argument("--state-dir", default=os.environ.get("SLOGUARD_STATE_DIR", "/var/lib/sloguard"))
    p.add_argument("--timeout", default="300s", help="duration, e.g. 300s")
    p.add_argument("--max-wait", default="60s", help="how long to wait for a quiet GPU, e.g. 60s")
    args = p.parse_args(argv)
    try:
        spec = CanarySpec(enabled=True, device=args.device, timeout=args.timeout, max_wait=args.max_wait)
    except ValueError as exc:  # pydantic's ValidationError names the bad option
        print(f"sloguard canary: {exc}", file=sys.stderr)
        return 2
    src = CanarySource(spec, Path(args.state_dir))

    async def once() -> Report:
        try:
            return await src.run_once(calibrate=args.calibrate)
        finally:
            await src.close()

    try:
        rep = asyncio.run(once())
    except SourceError as exc:
        print(f"canary failed ({exc.reason}): {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(asdict(rep), indent=2, sort_keys=True))
    else:
        print_report(rep)
    return 1 if rep.degraded else 0
