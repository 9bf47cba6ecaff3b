"""The probe process: one asyncio loop doing only network I/O and timestamps, fed schedules by the daemon.

Running probes in their own (spawned) process keeps `/metrics` rendering, scrape parsing and SLO maths of
the main process from delaying a timestamp through the GIL. Results go back on a multiprocessing Queue
(its feeder thread does the pickling and the pipe writes, so a slow parent cannot block the loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing as mp
import os
import queue
import random
import signal
import time
from collections import deque
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

import aiohttp

from sloguard.model import ProbeResult
from sloguard.probes import PROBES
from sloguard.probes.job import ProbeJob
from sloguard.probes.stream import make_session
from sloguard.probes.timing import percentile
from sloguard.probes.workload import pick_prompt

LAG_PERIOD_S = 0.1  # loop-lag sample period
LAG_WINDOW = 600  # samples kept: the last minute
STOP_GRACE_S = 3.0  # in-flight requests may finish within this on stop (ProbeWorker.stop waits 1 s longer)
REPORT_FIRST = 10  # first overhead report after 1 s
REPORT_EVERY = 50  # then every 5 s


class ProbeWorker:
    """Own the probe process: start it, swap its schedules, collect results, stop it."""

    def __init__(self, jobs: Sequence[ProbeJob]) -> None:
        self._jobs = tuple(jobs)
        self._ctx = mp.get_context("spawn")
        self._cmd, self._cmd_child = self._ctx.Pipe()
        self._results: Any = self._ctx.Queue()
        self._proc: Any = None
        self._pending: list[ProbeResult] = []  # drained while stopping, handed out by the next drain()
        self.overhead_seconds = 0.0

    def start(self) -> None:
        """Spawn the process; its probes start staggered over their intervals, never all at once."""
        self._proc = self._ctx.Process(
            target=main, args=(self._jobs, self._cmd_child, self._results, os.getpid()),
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
                kind, value = self._results.get_nowait()
            except (queue.Empty, OSError, EOFError):
                return out
            if kind == "result":
                out.append(value)
            else:
                self.overhead_seconds = float(value)

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


def main(jobs: Sequence[ProbeJob], cmd: Connection, results: Any, parent_pid: int) -> None:
    """Entry point of the probe process; freeze import-time objects first (full GC: ~13 ms -> ~0)."""
    gc.freeze()  # ~30k objects from imports never die; a full collection over them would stall stamps
    # Ctrl-C and a group-wide SIGTERM are the daemon's to handle: it stops this process via the command pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    runner = _Runner(cmd, results, parent_pid)
    asyncio.run(runner.run(jobs))


class _Runner:
    def __init__(self, cmd: Connection, results: Any, parent_pid: int) -> None:
        self._cmd, self._results, self._parent = cmd, results, parent_pid
        self._schedules: dict[ProbeJob, asyncio.Task[None]] = {}
        self._inflight: set[asyncio.Task[None]] = set()
        self._stop = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None

    async def run(self, jobs: Sequence[ProbeJob]) -> None:
        loop = asyncio.get_running_loop()
        loop.add_reader(self._cmd.fileno(), self._on_command)
        loop.add_signal_handler(signal.SIGTERM, self._stop.set)  # finish in-flight requests, flush results
        async with make_session() as self._session:
            self._apply(jobs)
            monitor = asyncio.create_task(self._monitor())
            await self._stop.wait()
            for task in (monitor, *self._schedules.values()):
                task.cancel()
            if self._inflight:
                await asyncio.wait(self._inflight, timeout=STOP_GRACE_S)
        loop.remove_reader(self._cmd.fileno())
        self._results.close()
        self._results.join_thread()

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
        """Cancel schedules of removed jobs; start added ones at offsets spread over their intervals."""
        wanted = list(dict.fromkeys(jobs))
        for job in [j for j in self._schedules if j not in wanted]:
            self._schedules.pop(job).cancel()
        added = [j for j in wanted if j not in self._schedules]
        for i, job in enumerate(added):
            offset = job.interval * i / len(added)
            self._schedules[job] = asyncio.create_task(self._schedule(job, offset))

    async def _schedule(self, job: ProbeJob, offset: float) -> None:
        """Fire every `interval`; skip a tick while the previous request runs; never catch up in bursts."""
        loop = asyncio.get_running_loop()
        rng = random.Random()
        due = loop.time() + offset
        running: asyncio.Task[None] | None = None
        while True:
            await asyncio.sleep(max(0.0, due - loop.time()))
            if running is None or running.done():
                running = asyncio.create_task(self._probe(job, rng))
                self._inflight.add(running)
                running.add_done_callback(self._inflight.discard)
            due += job.interval
            if due < loop.time():
                due = loop.time() + job.interval

    async def _probe(self, job: ProbeJob, rng: random.Random) -> None:
        assert self._session is not None
        prompt = pick_prompt(job, rng)
        try:
            result = await PROBES[job.api](self._session, job, prompt)
        except Exception as exc:  # a bug in a probe must show up as a failed request, not a silent gap
            result = ProbeResult(ts=time.time(), probe=job.name, target=job.target, model=job.model,
                                 api=job.api, ok=False, error=f"probe crashed: {type(exc).__name__}",
                                 prompt_bucket=prompt.bucket)
        self._results.put(("result", result))

    async def _monitor(self) -> None:
        """Sample loop lag every 100 ms; report p99 + clock cost after 1 s then every 5 s; exit if orphaned."""
        lags: deque[float] = deque(maxlen=LAG_WINDOW)
        cost = clock_cost()
        n = 0
        while True:
            await asyncio.sleep(LAG_PERIOD_S)
            lags.append(await _loop_lag())
            n += 1
            if n == REPORT_FIRST or n % REPORT_EVERY == 0:
                self._results.put(("overhead", percentile(sorted(lags), 0.99) + cost))
            if os.getppid() != self._parent:
                self._stop.set()


async def _loop_lag() -> float:
    """Return how long a callback made ready now waits for the loop: the delay a data arrival would see."""
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    start = time.perf_counter_ns()
    asyncio.get_running_loop().call_soon(_resolve, fut)
    return (await fut - start) * 1e-9


def _resolve(fut: asyncio.Future[int]) -> None:
    if not fut.done():
        fut.set_result(time.perf_counter_ns())


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
            out.append(await PROBES[job.api](session, job, pick_prompt(job, rng)))
    return out
