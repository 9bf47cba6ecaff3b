"""Async driver of the engine: step loop on the real event loop, plus seeded background load.

Each step sleeps the model's duration with `asyncio.sleep`, then stamps tokens with `loop.time()`,
so server-side histograms hold the times a client can observe (± one loop iteration).

Steps follow model time, so capacity follows the queueing model: a step starts when the previous one was
planned to end, not when the loop got round to it. The loop's own work (handing tokens to streams, HTTP,
a busy host) therefore does not stretch every step and lower throughput below the model's; up to
MAX_CARRY_S of such delay is made up by the next steps (the loop sleeps that much less), beyond it the
time is lost, as a real engine's stall would be. An idle engine starts its next step on the first submit.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from sloguard.sim.engine import Engine, SimRequest
from sloguard.sim.model import output_length

# (prompt tokens, max tokens, weight): the background request mix.
BACKGROUND_MIX: tuple[tuple[int, int, int], ...] = ((64, 32, 40), (256, 64, 35), (1024, 128, 20), (2048, 256, 5))
ARRIVAL_LOG = 4096  # background arrivals remembered (GET /sim/arrivals): over an hour at 1 request/s
MAX_CARRY_S = 0.05  # at most this much loop delay is made up by shortening the following steps


def step_start(planned_end: float | None, now: float) -> float:
    """Return when the next step starts: the previous step's planned end, at most MAX_CARRY_S in the past."""
    if planned_end is None:
        return now
    return max(planned_end, now - MAX_CARRY_S)


class Scheduler:
    """Runs `engine` steps while there is work; wakes on submit."""

    def __init__(self, engine: Engine, stall: Callable[[], float]) -> None:
        self.engine = engine
        self._stall = stall
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self.closing = asyncio.Event()
        # Set by the simulator's faults (sim.faults): background rate and prompt-length factors, and a cold
        # start during which no step runs (engine restart). busy_s accumulates time spent in steps.
        self.rate_multiplier = 1.0
        self.prompt_scale = 1.0
        self.paused_until = 0.0
        self.busy_s = 0.0
        self.step_started: float | None = None  # loop time the running step began (None between steps)
        self.multiplier_fn: Callable[[], float] | None = None  # the engine's step multiplier, read every step
        # wall times of the background users' arrivals: the truth a benchmark tells a users' burst from a fault by
        self.arrivals: deque[float] = deque(maxlen=ARRIVAL_LOG)

    def start(self, background_rps: float, rng: random.Random) -> None:
        """Start the step loop and, when `background_rps` > 0, the background load."""
        self._spawn(self._loop())
        if background_rps > 0:
            self._spawn(self._background(background_rps, rng))

    async def stop(self) -> None:
        """Cancel every task this scheduler started and wait for them."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def close(self) -> None:
        """Abort every client request and refuse new ones, so open streams and hangs end now."""
        self.closing.set()
        for req in [*self.engine.waiting, *self.engine.running]:
            if req.sink is not None:
                self.engine.cancel(req)

    async def submit(self, req: SimRequest) -> None:
        """Wait out the stall fault (counted in TTFT), then queue `req` in the engine."""
        stall = self._stall()
        if stall > 0:
            req.stall_s = stall
            await asyncio.sleep(stall)
        if self.closing.is_set():
            self.engine.cancel(req)
            return
        self.engine.submit(req)
        self._wake.set()

    def cancel(self, req: SimRequest, reason: str = "abort") -> None:
        """Finish `req` early (client went away: `abort`; injected stream error: `error`)."""
        self.engine.cancel(req, reason)

    def busy_until(self, now: float) -> float:
        """Return the engine's busy seconds up to `now`, the step in progress included."""
        return self.busy_s + (max(0.0, now - self.step_started) if self.step_started is not None else 0.0)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        planned_end: float | None = None
        while True:
            if (pause := self.paused_until - loop.time()) > 0:  # engine restarting: nothing runs, requests queue
                planned_end = None
                await asyncio.sleep(pause)
                continue
            if self.multiplier_fn is not None:
                self.engine.multiplier = self.multiplier_fn()
            duration = self.engine.plan()
            if duration is None:
                planned_end = None
                self._wake.clear()
                await self._wake.wait()
                continue
            start = step_start(planned_end, loop.time())
            planned_end = start + duration
            self.step_started = start
            await asyncio.sleep(max(0.0, planned_end - loop.time()))
            self.busy_s += duration
            self.step_started = None
            self.engine.complete()

    async def _background(self, rps: float, rng: random.Random) -> None:
        loop = asyncio.get_running_loop()
        seq = 0
        while True:
            await asyncio.sleep(rng.expovariate(rps * self.rate_multiplier) if self.rate_multiplier > 0 else 1.0)
            if self.rate_multiplier <= 0:
                continue
            seq += 1
            self.arrivals.append(time.time())
            prompt, max_tokens, _ = rng.choices(BACKGROUND_MIX, weights=[w for *_, w in BACKGROUND_MIX])[0]
            prompt = max(1, round(prompt * self.prompt_scale))
            target, reason = output_length(max_tokens, False, rng)
            cached = int(prompt * self.engine.profile.prefix_hit_ratio)
            req = SimRequest(rid=f"bg-{seq}", prompt_tokens=prompt, max_tokens=max_tokens,
                             target_tokens=target, finish_reason=reason, arrival=loop.time(),
                             cached_tokens=cached)
            self._spawn(self.submit(req))
