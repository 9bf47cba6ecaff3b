"""GPU canary runner: wait for a quiet GPU, run the torch worker while watching other work, judge, export.

torch never enters this process (the worker is a subprocess). The waiting and contention rules are in
`contention`; the verdict in `verdict`; the baseline (median of the last uncontended healthy runs per GPU
UUID) in `baseline`. A contended run is exported with its contention but never judged on throughput and
never stored as a baseline.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import sloguard
from sloguard.clock import Clock, SystemClock
from sloguard.config.spec import CanarySpec
from sloguard.gpu import contention as ct
from sloguard.gpu.activity import ActivityMonitor
from sloguard.gpu.baseline import BASELINE_FILE, BaselineStore
from sloguard.gpu.health import Reading
from sloguard.gpu.specs import lookup
from sloguard.gpu.verdict import FIGURES, Report, canary_families, judge
from sloguard.sources.base import SourceError, SourceOutput

__all__ = ["BASELINE_FILE", "CanarySource", "stop_gracefully"]
log = logging.getLogger("sloguard.canary")
WORKER = "sloguard.gpu.canary_worker"
KILL_GRACE = 30.0  # SIGKILL a CUDA-holding worker only after it ignored SIGTERM this long
Sleep = Callable[[float], Awaitable[None]]


async def stop_gracefully(proc: asyncio.subprocess.Process, grace: float = KILL_GRACE) -> int:
    """SIGTERM the worker, SIGKILL only if it is still alive after `grace` seconds; return its exit code."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(grace):
                return await proc.wait()
        except TimeoutError:
            log.warning("canary worker ignored SIGTERM; killing", extra={"pid": proc.pid, "grace_s": grace})
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    return await proc.wait()


def _worker_env() -> dict[str, str]:
    root = str(Path(sloguard.__file__).resolve().parent.parent)  # so `-m` finds this very package
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # so cuda:N is the GPU activity.pick_gpu watches
    return env


class CanarySource:
    """Run the canary subprocess at most every max(interval, busy time / duty_cycle); export its verdict."""

    kind = "canary"
    target = ""

    def __init__(self, spec: CanarySpec, state_dir: Path, clock: Clock | None = None,
                 python: str = sys.executable, kill_grace: float = KILL_GRACE, nvml: ModuleType | None = None,
                 sleep: Sleep | None = None) -> None:
        self.spec = spec
        self.clock = clock or SystemClock()
        self.python = python
        self.kill_grace = kill_grace
        self.baseline_path = Path(state_dir) / BASELINE_FILE
        self.baselines = BaselineStore(self.baseline_path, keep=spec.baseline_runs)
        self.policy = ct.Policy(spec.quiet_threshold, spec.quiet_gap, spec.max_wait, spec.poll)
        self.monitor = ActivityMonitor(nvml, self.clock)
        self.sleep = sleep or asyncio.sleep
        self.interval = spec.interval
        self.timeout = spec.timeout + spec.max_wait + 10.0  # our own deadlines fire first and reap the worker
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
        """Wait for a quiet gap, run the worker while sampling, judge; store healthy uncontended runs."""
        start = self.clock.monotonic()
        gpu = await asyncio.to_thread(self.monitor.open, self.spec.device)
        gap, waited = await self._wait() if gpu is not None else (True, 0.0)
        figures, run, during = await self._spawn()
        busy = float(figures.get("busy_seconds") or self.clock.monotonic() - start)
        # duty cycle: GPU-busy time over the period between runs stays <= spec.duty_cycle
        self.interval = max(self.spec.interval, busy / self.spec.duty_cycle)
        self._next_run = start + self.interval
        cont = await self._contention(figures, gap, waited, run)
        problems = {} if cont is ct.ON_CPU else self.monitor.problems(during, await asyncio.to_thread(
            self.monitor.reading))
        driver = self.monitor.driver
        base = None if calibrate else self.baselines.get(figures, driver, FIGURES)
        rep = judge(figures, lookup(str(figures.get("gpu_name", ""))) if figures.get("gpu_uuid") else None,
                    base.figures if base else None, cont, problems)
        if cont.contended is False and not rep.degraded:
            rep.baseline_stored = self.baselines.add(figures, driver, FIGURES, self.clock.now(), reset=calibrate)
        rep.baseline_runs = len(self.baselines.runs(figures, driver))
        rep.duration_seconds = self.clock.monotonic() - start
        rep.timestamp = self.clock.now()
        return rep

    async def _wait(self) -> tuple[bool, float]:
        """Poll until a quiet gap (True) or the bound (False); return it with the seconds waited."""
        started, samples = self.clock.monotonic(), []
        while True:
            samples.append(await asyncio.to_thread(self.monitor.sample))
            decision = ct.should_start(samples, started, self.policy)
            if decision is not False:
                return decision is True, self.clock.monotonic() - started
            await self.sleep(self.policy.poll)

    async def _contention(self, figures: dict[str, Any], gap: bool, waited: float,
                          run: list[ct.Sample]) -> ct.Contention:
        gpu = self.monitor.gpu
        if figures.get("device") == "cpu":
            return ct.ON_CPU
        if gpu is None or figures.get("gpu_uuid") != gpu.uuid:
            if gpu is not None:
                log.warning("canary ran on another GPU than the one watched; contention unknown",
                            extra={"watched": gpu.uuid, "ran_on": figures.get("gpu_uuid")})
            return dataclasses.replace(ct.UNMEASURED, waited=waited)
        after = None
        if not any(s.others is not None for s in run):  # no per-process view: look right after the run
            await self.sleep(self.policy.poll)
            after = await asyncio.to_thread(self.monitor.sample)
        return ct.judge(waited, gap, run, after, self.policy)

    async def _spawn(self) -> tuple[dict[str, Any], list[ct.Sample], list[Reading]]:
        proc = await asyncio.create_subprocess_exec(
            self.python, "-m", WORKER, "--device", self.spec.device, "--json", env=_worker_env(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
        self._proc = proc
        run: list[ct.Sample] = []
        during: list[Reading] = []
        watch = asyncio.ensure_future(self._watch(proc.pid, run, during))
        try:
            async with asyncio.timeout(self.spec.timeout):
                out, err = await proc.communicate()
        except (TimeoutError, asyncio.CancelledError) as exc:
            task = asyncio.ensure_future(stop_gracefully(proc, self.kill_grace))  # never block the caller
            self._reapers.add(task)
            task.add_done_callback(self._reapers.discard)
            if isinstance(exc, TimeoutError):
                raise SourceError("timeout", f"canary worker exceeded {self.spec.timeout:g}s") from None
            raise
        finally:
            self._proc = None
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
        return _parse(proc.returncode, out, err), run, during

    async def _watch(self, pid: int, run: list[ct.Sample], during: list[Reading]) -> None:
        """Sample other processes' activity and this GPU's health every poll while the worker runs."""
        if self.monitor.gpu is None:
            return
        while True:
            await self.sleep(self.policy.poll)
            run.append(await asyncio.to_thread(self.monitor.sample, pid))
            reading = await asyncio.to_thread(self.monitor.reading)
            if reading is not None:
                during.append(reading)

    async def close(self) -> None:
        """Stop a running worker (SIGTERM, SIGKILL after the grace), wait for every reaper, release NVML."""
        if self._proc is not None:
            await stop_gracefully(self._proc, self.kill_grace)
        if self._reapers:
            await asyncio.gather(*self._reapers, return_exceptions=True)
        await asyncio.to_thread(self.monitor.close)


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
