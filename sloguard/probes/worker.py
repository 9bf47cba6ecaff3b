"""The probe process: one asyncio loop doing only network I/O and timestamps, fed schedules by the daemon.

Running probes in their own (spawned) process keeps `/metrics` rendering, scrape parsing and SLO maths of
the main process from delaying a timestamp through the GIL. Results go back over a plain Pipe written by a
feeder thread (it does the pickling and the pipe writes, so a slow parent cannot block the loop). Not a
multiprocessing Queue: its locks are named semaphores registered with the resource tracker, which printed
"leaked semaphore objects" whenever the daemon was SIGKILLed (the tracker cleaned them up; nothing leaked).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing as mp
import os
import random
import signal
import sys
import time
from collections import deque
from collections.abc import Awaitable, Sequence
from multiprocessing.connection import Connection
from typing import Any

import aiohttp

from sloguard import untrusted
from sloguard.model import ProbeResult
from sloguard.probes import PROBES
from sloguard.probes.job import ProbeJob
from sloguard.probes.lag import BusyMeter
from sloguard.probes.outbox import Outbox
from sloguard.probes.prefill import PREFILLED
from sloguard.probes.quarantine import HELPER, SPAN_KEY_ENV, Quarantine
from sloguard.probes.stream import make_session
from sloguard.probes.workload import pick_prompt
from sloguard.traces import ids

STOP_GRACE_S = 3.0  # in-flight requests may finish within this on stop (ProbeWorker.stop waits 1 s longer)
REPORT_FIRST_S = 1.0  # first overhead report after 1 s
REPORT_EVERY_S = 5.0  # then every 5 s
MAX_STARTED = 65536  # probe starts kept until taken (take_started): ~6 MB at most


class ProbeWorker:
    """Own the probe process: start it, swap its schedules, collect results, stop it."""

    def __init__(self, jobs: Sequence[ProbeJob]) -> None:
        self._jobs = tuple(jobs)
        self._ctx = mp.get_context("spawn")
        self._cmd, self._cmd_child = self._ctx.Pipe()
        self._results, self._results_child = self._ctx.Pipe(duplex=False)
        self._proc: Any = None
        self._pending: list[ProbeResult] = []  # drained while stopping, handed out by the next drain()
        # (target, wall time) of each request as it started; bounded for a caller that never takes them (CLI)
        self._started: deque[tuple[str, float]] = deque(maxlen=MAX_STARTED)
        # (target, trace id, wall time, nominal prompt tokens) of each first token as it came, bounded the same way
        self._prefilled: deque[tuple[str, str, float, int]] = deque(maxlen=MAX_STARTED)
        self.overhead_seconds = 0.0
        self.stall_seconds = 0.0

    def start(self) -> None:
        """Spawn the process; its probes start staggered over their intervals, never all at once."""
        self._proc = self._ctx.Process(
            target=main, args=(self._jobs, self._cmd_child, self._results_child, os.getpid(), ids.key()),
            name="sloguard-probe", daemon=True,
        )
        self._proc.start()

    def update(self, jobs: Sequence[ProbeJob]) -> None:
        """Replace the schedules in the running process; unchanged jobs keep their phase."""
        self._jobs = tuple(jobs)
        with contextlib.suppress(OSError):
            self._cmd.send(("jobs", self._jobs))

    def drain(self) -> list[ProbeResult]:
        """Return the results that arrived since the last call, without blocking."""
        out, self._pending = self._pending, []
        while True:
            try:
                if not self._results.poll():
                    return out
                kind, value = self._results.recv()
            except (OSError, EOFError):
                return out
            if kind == "result":
                out.append(value)
            elif kind == "started":
                self._started.append(value)
            elif kind == "prefilled":
                self._prefilled.append(value)
            elif kind == "invalid":  # counted where /metrics is served, logged once there
                untrusted.reject(*value)
            else:
                self.overhead_seconds, self.stall_seconds = (float(v) for v in value)

    def take_started(self) -> list[tuple[str, float]]:
        """Return (target, wall time) of the requests that started since the last call (drain() collects them)."""
        out = list(self._started)
        self._started.clear()
        return out

    def take_prefilled(self) -> list[tuple[str, str, float, int]]:
        """Return (target, trace id, wall time, nominal prompt tokens) of the first tokens since the last call."""
        out = list(self._prefilled)
        self._prefilled.clear()
        return out

    def stop(self, timeout: float = STOP_GRACE_S + 1.0) -> None:
        """Ask the process to finish in-flight requests and exit; terminate it after `timeout`.

        The results queue is drained while waiting (kept for the next `drain()`), because the child cannot
        exit before its queued results are in the pipe.
        """
        if self._proc is None:
            return
        with contextlib.suppress(OSError):
            self._cmd.send(("stop", None))
        deadline = time.monotonic() + timeout
        while self._proc.is_alive() and time.monotonic() < deadline:
            self._proc.join(0.1)
            self._pending.extend(self.drain())
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(1.0)

    def alive(self) -> bool:
        """Return True while the probe process runs."""
        return self._proc is not None and bool(self._proc.is_alive())


def main(jobs: Sequence[ProbeJob], cmd: Connection, results: Connection, parent_pid: int,
         span_key: bytes | None = None, helper: bool = False) -> None:
    """Entry point of the probe process (and of its helper, sloguard.probes.quarantine); freeze import-time
    objects first (full GC: ~13 ms -> ~0)."""
    if span_key is not None:
        ids.use_key(span_key)  # its traceparents carry span ids the daemon's join recognises
    gc.freeze()  # ~30k objects from imports never die; a full collection over them would stall stamps
    # Ctrl-C and a group-wide SIGTERM are the daemon's to handle: it stops this process via the command pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    runner = _Runner(cmd, results, parent_pid, helper)
    untrusted.forward(runner.report_invalid)  # counted in the daemon, where /metrics is served
    asyncio.run(runner.run(jobs))


class _Runner:
    def __init__(self, cmd: Connection, results: Connection, parent_pid: int, helper: bool = False) -> None:
        self._cmd, self._results, self._parent = cmd, Outbox(results), parent_pid
        self._quarantine = None if helper else Quarantine(self._results.put, lambda: self._apply(self._jobs))
        self._jobs: tuple[ProbeJob, ...] = ()  # all of them, quarantined targets' too
        self._schedules: dict[ProbeJob, asyncio.Task[None]] = {}
        self._due: dict[str, float] = {}  # probe name -> next due loop time, kept across setting changes
        self._running: dict[str, asyncio.Task[None]] = {}
        self._inflight: set[asyncio.Task[None]] = set()
        self._stop = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._meter = BusyMeter()

    def report_invalid(self, source: str, reason: str, detail: str, n: int) -> None:
        """Hand rejected peer values to the daemon's counter (sloguard.untrusted.forward)."""
        self._results.put(("invalid", (source, reason, detail, n)))

    async def run(self, jobs: Sequence[ProbeJob]) -> None:
        loop = asyncio.get_running_loop()
        self._meter.install(loop)
        loop.add_reader(self._cmd.fileno(), self._on_command)
        loop.add_signal_handler(signal.SIGTERM, self._stop.set)  # finish in-flight requests, flush results
        async with make_session() as self._session:
            self._apply(jobs)
            monitor = asyncio.create_task(self._monitor())
            await self._stop.wait()
            for task in (monitor, *self._schedules.values()):
                task.cancel()
            waits: list[Awaitable[object]] = [self._quarantine.close(STOP_GRACE_S)] if self._quarantine else []
            if self._inflight:  # a copy: the set empties itself as requests end
                waits.append(asyncio.wait(set(self._inflight), timeout=STOP_GRACE_S))
            await asyncio.gather(*waits)
        loop.remove_reader(self._cmd.fileno())
        self._results.close()

    def _on_command(self) -> None:
        try:
            while self._cmd.poll():
                kind, value = self._cmd.recv()
                if kind == "jobs":
                    self._apply(value)
                else:
                    self._stop.set()
        except (EOFError, OSError):
            asyncio.get_running_loop().remove_reader(self._cmd.fileno())
            self._stop.set()

    def _apply(self, jobs: Sequence[ProbeJob]) -> None:
        """Cancel schedules of removed jobs; a changed job keeps its probe's phase, a new one starts at an
        offset spread over its interval; quarantined targets' jobs go to the helper process."""
        self._jobs = tuple(jobs)
        wanted = list(dict.fromkeys(self._quarantine.split(jobs) if self._quarantine is not None else jobs))
        for job in [j for j in self._schedules if j not in wanted]:
            self._schedules.pop(job).cancel()
        names = {j.name for j in wanted}
        self._due = {n: t for n, t in self._due.items() if n in names}
        added = [j for j in wanted if j not in self._schedules]
        fresh = [j for j in added if j.name not in self._due]
        now = asyncio.get_running_loop().time()
        for job in added:
            if job.name in self._due:  # settings changed: next tick where the old schedule had it
                due = min(self._due[job.name], now + job.interval)
            else:
                due = now + job.interval * fresh.index(job) / len(fresh)
            self._due[job.name] = due
            self._schedules[job] = asyncio.create_task(self._schedule(job, due))

    async def _schedule(self, job: ProbeJob, due: float) -> None:
        """Fire every `interval`; skip a tick while the previous request runs; never catch up in bursts."""
        loop = asyncio.get_running_loop()
        rng = random.Random()
        while True:
            self._due[job.name] = due
            await asyncio.sleep(max(0.0, due - loop.time()))
            running = self._running.get(job.name)
            if running is None or running.done():
                # the diagnosis takes the probes out of the engine's arrivals; an oversized prompt is refused
                # before the engine counts it
                if job.kind != "oversized_prompt":
                    self._results.put(("started", (job.target, time.time())))
                running = self._running[job.name] = asyncio.create_task(self._probe(job, rng))
                self._inflight.add(running)
                running.add_done_callback(self._inflight.discard)
            due += job.interval
            if due < loop.time():
                due = loop.time() + job.interval

    async def _probe(self, job: ProbeJob, rng: random.Random) -> None:
        assert self._session is not None
        prompt = pick_prompt(job, rng)
        # this task's own context: the first token is reported as it comes, not with the result at the stream's end
        PREFILLED.set(lambda trace_id, tokens: self._results.put(
            ("prefilled", (job.target, trace_id, time.time(), tokens))))
        try:
            result = await PROBES[job.probe_key](self._session, job, prompt)
        except Exception as exc:  # a bug in a probe must show up as a failed request, not a silent gap
            result = ProbeResult(ts=time.time(), probe=job.name, target=job.target, model=job.model,
                                 api=job.api, ok=False, error=f"probe crashed: {type(exc).__name__}",
                                 prompt_bucket=prompt.bucket, check_kind="" if job.kind == "latency" else job.kind,
                                 check_outcome="" if job.kind == "latency" else "error")
        self._results.put(("result", result))
        if self._quarantine is not None and self._quarantine.observe(result):
            self._apply(self._jobs)

    async def _monitor(self) -> None:
        """Report the loop's busy-time p99 wait (+ clock cost) and longest stall after 1 s, then every 5 s;
        exit if orphaned. The meter itself records every loop iteration (sloguard.probes.lag)."""
        cost = clock_cost()
        await asyncio.sleep(REPORT_FIRST_S)
        while True:
            p99, worst = self._meter.report()
            self._results.put(("overhead", (p99 + cost, worst)))
            if os.getppid() != self._parent:
                self._stop.set()
            await asyncio.sleep(REPORT_EVERY_S)


def clock_cost(n: int = 1000) -> float:
    """Return the cost of one perf_counter_ns() call in seconds (mean of n calls)."""
    start = time.perf_counter_ns()
    for _ in range(n):
        time.perf_counter_ns()
    return (time.perf_counter_ns() - start) * 1e-9 / n


async def run_once(jobs: Sequence[ProbeJob]) -> list[ProbeResult]:
    """Run one request per job in this process, one after another (no self-interference)."""
    rng = random.Random()
    out: list[ProbeResult] = []
    async with make_session() as session:
        for job in jobs:
            out.append(await PROBES[job.probe_key](session, job, pick_prompt(job, rng)))
    return out


if __name__ == "__main__" and sys.argv[1:2] == [HELPER]:  # a helper process (sloguard.probes.quarantine)
    key = os.environ.pop(SPAN_KEY_ENV, "")  # from the environment, never argv: ps shows argv to every user
    main((), Connection(int(sys.argv[2]), writable=False), Connection(int(sys.argv[3]), readable=False),
         int(sys.argv[4]), bytes.fromhex(key) if key else None, helper=True)
