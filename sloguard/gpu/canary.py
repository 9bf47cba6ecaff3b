"""GPU canary runner: spawn the torch worker, judge it against spec peaks and a stored baseline, export.

torch never enters this process (the worker is a subprocess). Verdict: `degraded` when any test is
below 0.90× this GPU's calibrated baseline, or GEMM / copy below 0.5× the datasheet peak (SPEC_FLOOR).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import sloguard
from sloguard.clock import Clock, SystemClock
from sloguard.config.spec import CanarySpec
from sloguard.gpu.specs import lookup
from sloguard.gpu.verdict import (
    TESTS,
    Report,
    baseline_key,
    canary_families,
    judge,
    load_baselines,
    store_baseline,
)
from sloguard.sources.base import SourceError, SourceOutput

log = logging.getLogger("sloguard.canary")
WORKER = "sloguard.gpu.canary_worker"
BASELINE_FILE = "canary_baseline.json"
KILL_GRACE = 30.0  # SIGKILL a CUDA-holding worker only after it ignored SIGTERM this long


async def stop_gracefully(proc: asyncio.subprocess.Process, grace: float = KILL_GRACE) -> int:
    """SIGTERM the worker, SIGKILL only if it is still alive after `grace` seconds; return its exit code."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(proc.wait(), grace)
        except TimeoutError:
            log.warning("canary worker ignored SIGTERM; killing", extra={"pid": proc.pid, "grace_s": grace})
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    return await proc.wait()


def _worker_env() -> dict[str, str]:
    root = str(Path(sloguard.__file__).resolve().parent.parent)  # so `-m` finds this very package
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


class CanarySource:
    """Run the canary subprocess at most every max(interval, busy time / duty_cycle); export its verdict."""

    kind = "canary"
    target = ""

    def __init__(self, spec: CanarySpec, state_dir: Path, clock: Clock | None = None,
                 python: str = sys.executable, kill_grace: float = KILL_GRACE) -> None:
        self.spec = spec
        self.clock = clock or SystemClock()
        self.python = python
        self.kill_grace = kill_grace
        self.baseline_path = Path(state_dir) / BASELINE_FILE
        self.interval = spec.interval
        self.timeout = spec.timeout + 5.0  # our own deadline fires first and reaps the worker
        self._next_run = float("-inf")
        self._last: SourceOutput | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._reapers: set[asyncio.Task[int]] = set()

    async def collect(self) -> SourceOutput:
        """Run the canary, or return the previous result while the duty-cycle cap forbids a new run."""
        if self._last is not None and self.clock.monotonic() < self._next_run:
            return self._last
        rep = await self.run_once()
        self._last = SourceOutput(families=canary_families(rep), payload=rep)
        return self._last

    async def run_once(self, calibrate: bool = False) -> Report:
        """Spawn the worker, judge its figures, store a baseline on first run or when asked to calibrate."""
        start = self.clock.monotonic()
        figures = await self._spawn()
        busy = float(figures.get("busy_seconds") or self.clock.monotonic() - start)
        # duty cycle: GPU-busy time over the period between runs stays <= spec.duty_cycle
        self.interval = max(self.spec.interval, busy / self.spec.duty_cycle)
        self._next_run = start + self.interval
        stored = load_baselines(self.baseline_path).get(baseline_key(figures))
        base = None if calibrate or not stored else stored.get("figures")
        rep = judge(figures, lookup(str(figures.get("gpu_name", ""))) if figures.get("gpu_uuid") else None, base)
        if base is None:
            rep.baseline_stored = store_baseline(self.baseline_path, figures, self.clock.now())
        rep.duration_seconds = self.clock.monotonic() - start
        rep.timestamp = self.clock.now()
        return rep

    async def _spawn(self) -> dict[str, Any]:
        proc = await asyncio.create_subprocess_exec(
            self.python, "-m", WORKER, "--device", self.spec.device, "--json", env=_worker_env(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
        self._proc = proc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.spec.timeout)
        except (TimeoutError, asyncio.CancelledError) as exc:
            task = asyncio.ensure_future(stop_gracefully(proc, self.kill_grace))  # never block the caller
            self._reapers.add(task)
            task.add_done_callback(self._reapers.discard)
            if isinstance(exc, TimeoutError):
                raise SourceError("timeout", f"canary worker exceeded {self.spec.timeout:g}s") from None
            raise
        finally:
            self._proc = None
        return _parse(proc.returncode, out, err)

    async def close(self) -> None:
        """Stop a running worker (SIGTERM, SIGKILL after the grace) and wait for every reaper."""
        if self._proc is not None:
            await stop_gracefully(self._proc, self.kill_grace)
        if self._reapers:
            await asyncio.gather(*self._reapers, return_exceptions=True)


def _parse(code: int | None, out: bytes, err: bytes) -> dict[str, Any]:
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else {}
    except ValueError:
        data = {}
    if code != 0 or not isinstance(data, dict) or "error" in data or not data:
        detail = str(data.get("error") or "") if isinstance(data, dict) else ""
        detail = detail or err.decode(errors="replace").strip()[-500:]
        raise SourceError("worker_failed", f"canary worker exit {code}: {detail}")
    return data


def _frac(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str]) -> int:
    """`sloguard canary [--device auto|cpu|cuda:N] [--json] [--calibrate]`: 0 ok, 1 degraded, 2 error."""
    p = argparse.ArgumentParser(prog="sloguard canary", description="Run the GPU canary once.")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.add_argument("--calibrate", action="store_true", help="store this run as the device's baseline")
    p.add_argument("--state-dir", default=os.environ.get("SLOGUARD_STATE_DIR", "/var/lib/sloguard"))
    p.add_argument("--timeout", default="300s", help="duration, e.g. 300s")
    args = p.parse_args(argv)
    try:
        spec = CanarySpec(enabled=True, device=args.device, timeout=args.timeout)
    except ValueError as exc:  # pydantic's ValidationError names the bad option
        print(f"sloguard canary: {exc}", file=sys.stderr)
        return 2
    try:
        rep = asyncio.run(CanarySource(spec, Path(args.state_dir)).run_once(calibrate=args.calibrate))
    except SourceError as exc:
        print(f"canary failed ({exc.reason}): {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(asdict(rep), indent=2, sort_keys=True))
    else:
        f = rep.figures
        stored = " (stored as baseline)" if rep.baseline_stored else ""
        print(f"device={f.get('device')} gpu={f.get('gpu_name')} spec={rep.spec_model or '-'} "
              f"degraded={rep.degraded}{stored} {'; '.join(rep.reasons)}")
        for t in TESTS:
            spec_frac, base_frac = rep.fraction_of_spec.get(t.name), rep.fraction_of_baseline.get(t.name)
            print(f"  {t.name:18} {f.get(t.figure, float('nan')):<11.4g} of spec {_frac(spec_frac)}"
                  f"  of baseline {_frac(base_frac)}")
    return 1 if rep.degraded else 0
