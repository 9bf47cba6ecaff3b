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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.metrics_core import Metric

import sloguard
from sloguard.clock import Clock, SystemClock
from sloguard.config.spec import CanarySpec
from sloguard.probes.gpu_specs import GPUPeak, lookup
from sloguard.sources.base import SourceError, SourceOutput
from sloguard.sources.nvml import Families

log = logging.getLogger("sloguard.canary")
WORKER = "sloguard.probes.canary_worker"
BASELINE_FILE = "canary_baseline.json"
BASELINE_FLOOR = 0.90
KILL_GRACE = 30.0  # SIGKILL a CUDA-holding worker only after it ignored SIGTERM this long


@dataclass(frozen=True)
class Test:
    """One judged figure: its key in the worker's JSON, direction, and the spec peak it is held to."""

    name: str
    figure: str
    higher_is_better: bool
    spec_peak: str | None = None  # GPUPeak attribute
    spec_floor: float | None = None
    vs_baseline: bool = True


TESTS: tuple[Test, ...] = (
    Test("matmul", "matmul_flops", True, "bf16_flops", 0.5),
    Test("copy", "copy_bandwidth_bytes_per_second", True, "memory_bandwidth", 0.5),
    Test("decoder_bandwidth", "decoder_bandwidth_bytes_per_second", True, "memory_bandwidth", vs_baseline=False),
    Test("decoder_ttft", "decoder_ttft_seconds", False),
    Test("decoder_tpot", "decoder_tpot_seconds", False),
)


@dataclass
class Report:
    """One canary run, judged; `figures` is the worker's JSON as-is."""

    figures: dict[str, Any]
    spec_model: str | None = None
    fraction_of_spec: dict[str, float] = field(default_factory=dict)
    fraction_of_baseline: dict[str, float] = field(default_factory=dict)
    degraded: bool = False
    reasons: list[str] = field(default_factory=list)
    baseline_stored: bool = False
    duration_seconds: float = 0.0
    timestamp: float = 0.0


def judge(figures: dict[str, Any], peak: GPUPeak | None, baseline: dict[str, float] | None) -> Report:
    """Return fractions of spec (GPU with a known peak only) and of baseline, and the verdict."""
    rep = Report(figures, spec_model=peak.model if peak else None)
    for t in TESTS:
        value = figures.get(t.figure)
        if not isinstance(value, int | float) or value <= 0:
            continue
        if peak is not None and t.spec_peak:
            rep.fraction_of_spec[t.name] = value / float(getattr(peak, t.spec_peak))
            if t.spec_floor is not None and rep.fraction_of_spec[t.name] < t.spec_floor:
                rep.reasons.append(f"{t.name} at {rep.fraction_of_spec[t.name]:.2f}x spec < {t.spec_floor}")
        base = (baseline or {}).get(t.figure) if t.vs_baseline else None
        if base:
            rep.fraction_of_baseline[t.name] = value / base if t.higher_is_better else base / value
            if rep.fraction_of_baseline[t.name] < BASELINE_FLOOR:
                rep.reasons.append(f"{t.name} at {rep.fraction_of_baseline[t.name]:.2f}x baseline < {BASELINE_FLOOR}")
    rep.degraded = bool(rep.reasons)
    return rep


def baseline_key(figures: dict[str, Any]) -> str:
    """Key a baseline by device name and uuid, so a swapped GPU is never judged against another's."""
    return f"{figures.get('gpu_name', '')}|{figures.get('gpu_uuid', '')}"


def load_baselines(path: Path) -> dict[str, Any]:
    """Return the stored baselines ({} when missing or unreadable)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def store_baseline(path: Path, figures: dict[str, Any], now: float) -> bool:
    """Write this device's figures as its baseline atomically; return False if the state dir is not writable."""
    data = load_baselines(path)
    data[baseline_key(figures)] = {"figures": {t.figure: figures[t.figure] for t in TESTS if t.figure in figures},
                                   "calibrated_at": now, "torch_version": figures.get("torch_version")}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("canary baseline not stored", extra={"path": str(path), "error": str(exc)})
        return False
    return True


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


def canary_families(rep: Report) -> list[Metric]:
    """Build the sloguard_canary_* families of one judged run, labelled {device, gpu=uuid}."""
    f, fams = rep.figures, Families()
    dev = {"device": str(f.get("device", "cpu")), "gpu": str(f.get("gpu_uuid", ""))}
    age = " From the last canary run (at most one per interval; see last_run_timestamp)."

    def gauge(name: str, doc: str, value: Any, extra: dict[str, str] | None = None) -> None:
        if isinstance(value, int | float):
            fams.add(name, "gauge", doc + age, dev | (extra or {}), float(value))

    gauge("sloguard_canary_info", "Canary device identity and dtype; always 1.", 1.0,
          {"name": str(f.get("gpu_name", "")), "dtype": str(f.get("dtype", "")), "spec": rep.spec_model or ""})
    gauge("sloguard_canary_matmul_flops", "Achieved GEMM FLOP/s (bf16 on CUDA, fp32 on CPU).", f.get("matmul_flops"))
    gauge("sloguard_canary_copy_bandwidth_bytes_per_second", "Device-to-device copy, read+write bytes/s.",
          f.get("copy_bandwidth_bytes_per_second"))
    gauge("sloguard_canary_decoder_ttft_seconds", "Tiny decoder prefill + first token latency.",
          f.get("decoder_ttft_seconds"))
    gauge("sloguard_canary_decoder_tpot_seconds", "Tiny decoder time per decode step.", f.get("decoder_tpot_seconds"))
    gauge("sloguard_canary_decoder_bandwidth_utilization_ratio",
          "Decoder weight bytes read per step / step time / spec memory bandwidth.",
          rep.fraction_of_spec.get("decoder_bandwidth"))
    for test, frac in rep.fraction_of_spec.items():
        gauge("sloguard_canary_fraction_of_spec", "Achieved / datasheet peak.", frac, {"test": test})
    for test, frac in rep.fraction_of_baseline.items():
        gauge("sloguard_canary_fraction_of_baseline", "Achieved / this GPU's calibrated baseline (>1 better).",
              frac, {"test": test})
    gauge("sloguard_canary_degraded", "1 if below 0.90x baseline or the spec floor.", float(rep.degraded))
    gauge("sloguard_canary_duration_seconds", "Wall time of the canary subprocess.", rep.duration_seconds)
    gauge("sloguard_canary_last_run_timestamp_seconds", "Unix time the last canary run finished.", rep.timestamp)
    return fams.all()


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
