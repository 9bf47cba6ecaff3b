"""`sloguard canary`: run the GPU canary once (waiting for a quiet GPU), print its verdict."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from pydantic import ValidationError

from sloguard.config.load import errors_from_validation
from sloguard.config.spec import CanarySpec
from sloguard.gpu.canary import CanarySource
from sloguard.gpu.verdict import TESTS, Report
from sloguard.sources.base import SourceError

# figure -> (divisor, unit) for the text report; --json keeps base units (FLOP/s, bytes/s, seconds)
UNITS = {"matmul_flops": (1e12, "TFLOP/s"), "copy_bandwidth_bytes_per_second": (1e9, "GB/s"),
         "decoder_bandwidth_bytes_per_second": (1e9, "GB/s"), "decoder_ttft_seconds": (1e-3, "ms"),
         "decoder_tpot_seconds": (1e-3, "ms")}


def _frac(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _figure(name: str, value: object) -> str:
    if not isinstance(value, int | float):
        return "-"
    div, unit = UNITS.get(name, (1.0, ""))
    return f"{value / div:.4g} {unit}".strip()


def _device(f: dict[str, object]) -> str:
    """Name the device honestly: a CPU run is not a GPU."""
    device, name = f.get("device"), f.get("gpu_name") or f.get("cpu_name") or ""
    if device == "cpu":
        return f"device=cpu ({name})" if name else "device=cpu"
    return f"device={device} gpu={name or '?'}"


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
    print(f"{_device(f)} spec={rep.spec_model or '-'} "
          f"degraded={rep.degraded}{stored} {'; '.join(rep.reasons)}")
    print(f"  {_contention(rep)}; waited {rep.waited_seconds:.1f}s for a quiet gap")
    for t in TESTS:
        spec_frac, base_frac = rep.fraction_of_spec.get(t.name), rep.fraction_of_baseline.get(t.name)
        print(f"  {t.name:18} {_figure(t.figure, f.get(t.figure)):<16} of spec {_frac(spec_frac):>4}"
              f"  of baseline {_frac(base_frac):>4}")


def main(argv: list[str]) -> int:
    """`sloguard canary [--device auto|cpu|cuda:N] [--json] [--calibrate]`: 0 ok, 1 degraded, 2 error."""
    p = argparse.ArgumentParser(prog="sloguard canary", description="Run the GPU canary once.")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.add_argument("--calibrate", action="store_true",
                   help="start this GPU's baseline afresh from this run (only if the run had the GPU to itself)")
    p.add_argument("--state-dir", default=os.environ.get("SLOGUARD_STATE_DIR"),
                   help="where the per-GPU baseline lives (the daemon's state_dir, e.g. /var/lib/sloguard); "
                        "default $SLOGUARD_STATE_DIR, else none: judged against the spec only, nothing stored")
    p.add_argument("--timeout", default="300s", help="duration, e.g. 300s")
    p.add_argument("--max-wait", default="60s", help="how long to wait for a quiet GPU, e.g. 60s")
    args = p.parse_args(argv)
    try:
        spec = CanarySpec(enabled=True, device=args.device, timeout=args.timeout, max_wait=args.max_wait)
    except ValidationError as exc:
        print(f"sloguard canary: {'; '.join('--' + e.replace('_', '-', 1) for e in errors_from_validation(exc))}",
              file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        if args.state_dir is None:
            print("sloguard canary: no --state-dir: the baseline is neither read nor stored", file=sys.stderr)
        state = args.state_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="sloguard-canary-"))
        return _run(CanarySource(spec, Path(state)), args.calibrate, args.json)


def _run(src: CanarySource, calibrate: bool, as_json: bool) -> int:

    async def once() -> Report:
        try:
            return await src.run_once(calibrate=calibrate)
        finally:
            await src.close()

    try:
        rep = asyncio.run(once())
    except SourceError as exc:
        print(f"canary failed ({exc.reason}): {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps(asdict(rep), indent=2, sort_keys=True))
    else:
        print_report(rep)
    return 1 if rep.degraded else 0
