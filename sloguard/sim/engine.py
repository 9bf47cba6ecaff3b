"""Synchronous continuous-batching core: admit, plan a step, complete it; clock injected, no I/O.

The async loop (`scheduler.py`) calls `plan()`, sleeps the returned seconds, then `complete()`.
Timestamps follow vLLM V1: queue = scheduled − queued, prefill = first token − scheduled,
decode = last token − first token, inference = last − scheduled, TTFT and e2e from arrival.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from sloguard.sim.model import LatencyProfile, blocks_for, step_seconds

CHUNKS_KEPT = 8  # token chunks whose write times a request keeps (a late reader merges the first with the next)
# A sink receives (tokens emitted now, finish reason or None) for one request.
TokenSink = Callable[[int, str | None], None]


@dataclass(slots=True)
class SimRequest:
    """One request inside the engine, with its server-side timeline (monotonic seconds)."""

    rid: str
    prompt_tokens: int
    max_tokens: int
    target_tokens: int
    finish_reason: str
    arrival: float
    cached_tokens: int = 0
    stall_s: float = 0.0
    sink: TokenSink | None = None
    queued: float | None = None
    scheduled: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    generated: int = 0
    preemptions: int = 0
    needs_prefill: bool = True
    finished: str | None = None
    cancelled: str | None = None  # cancelled while in the batch: it leaves when the step in flight ends
    # The model's own duration of the step that emitted the first token (multiplier and jitter included), as
    # planned: unlike first_token - scheduled it does not grow when a busy host wakes the event loop late.
    prefill_step_s: float | None = None
    # The `network_delay_s` fault as actually waited (the loop may wake late), and the client's trace id: the
    # truth a test holds sloguard's per-request network stage to.
    network_delay_s: float = 0.0
    trace_id: str = ""
    on_scheduled: Callable[[], None] | None = None  # a slot took it (llama.cpp's profile sends its head then)
    # What else happened outside the engine's TTFT (loop clock): the wait from the kernel's receipt of the
    # request to its handler (sim.receipt; None unknown), and [before, after] the writes of the response head
    # and of the first CHUNKS_KEPT token chunks.
    front_s: float | None = None
    head_sent: tuple[float, float] | None = None
    chunks_sent: list[tuple[float, float]] = field(default_factory=list)

    def computed_tokens(self) -> int:
        """Return the tokens this request's next prefill computes (recompute after preemption)."""
        if self.generated:
            return self.prompt_tokens + self.generated
        return self.prompt_tokens - self.cached_tokens


class Recorder(Protocol):
    """Receives engine events; `metrics.SimMetrics` implements it."""

    def step(self, running: int, waiting: int, kv_usage: float, tokens: int | None) -> None: ...
    def preempted(self) -> None: ...
    def token(self, req: SimRequest, gap: float | None) -> None: ...
    def finished(self, req: SimRequest, now: float) -> None: ...


class Engine:
    """FIFO continuous batching with a max batch, a prefill token budget and a KV block budget."""

    def __init__(
        self, profile: LatencyProfile, rng: random.Random, recorder: Recorder, clock: Callable[[], float]
    ) -> None:
        self.profile = profile
        self.multiplier = 1.0
        self._rng = rng
        self._rec = recorder
        self._clock = clock
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.step_s = 0.0  # the duration plan() returned last

    @property
    def recorder(self) -> Recorder:
        """Return where engine events go (the metrics registry)."""
        return self._rec

    @recorder.setter
    def recorder(self, rec: Recorder) -> None:
        self._rec = rec  # an engine restart starts a fresh registry: its counters reset, as vLLM's do

    def submit(self, req: SimRequest) -> None:
        """Queue a request; it is admitted at the next `plan()`."""
        req.queued = self._clock()
        self.waiting.append(req)

    def cancel(self, req: SimRequest, reason: str = "abort") -> None:
        """Finish a request early with `reason`; no-op when already finished or cancelled.

        A waiting request leaves at once. A running one is in the step being computed, so it leaves the batch
        when that step completes (its slot and KV blocks are freed then, as in vLLM); its client is told now.
        """
        if req.finished is not None or req.cancelled is not None:
            return
        if req not in self.running:
            if req in self.waiting:
                self.waiting.remove(req)
            self._finish(req, reason, self._clock())
            self._record_state()
            return
        req.cancelled = reason
        if req.sink is not None:
            req.sink(0, reason)
            req.sink = None

    def abort_all(self, reason: str) -> None:
        """Finish every waiting and running request now (an engine restart: no step completes them)."""
        now = self._clock()
        for req in [*self.waiting, *self.running]:
            if req.finished is None:
                self._finish(req, req.cancelled or reason, now)
        self.waiting.clear()
        self.running.clear()
        self._record_state()

    def _record_state(self) -> None:
        # Gauges follow the scheduler after every change, so an idle server reads 0 running, as vLLM does.
        self._rec.step(len(self.running), len(self.waiting), self.kv_usage(), None)

    def idle(self) -> bool:
        """Return True when nothing is waiting or running."""
        return not self.waiting and not self.running

    def plan(self) -> float | None:
        """Admit waiting requests and return the next step's duration, or None when idle."""
        now = self._clock()
        self._preempt_overflow()
        self._admit(now)
        if not self.running:
            self._record_state()
            return None
        prefill = sum(r.computed_tokens() for r in self.running if r.needs_prefill)
        decode = sum(1 for r in self.running if not r.needs_prefill)
        self._rec.step(len(self.running), len(self.waiting), self.kv_usage(), prefill + decode)
        self.step_s = step_seconds(self.profile, prefill, decode, self.multiplier, self._rng)
        return self.step_s

    def complete(self) -> list[SimRequest]:
        """Emit one token for every running request; return those that finished in this step."""
        now = self._clock()
        done: list[SimRequest] = []
        for req in list(self.running):
            if req.cancelled is not None:
                self.running.remove(req)
                self._finish(req, req.cancelled, now)
                done.append(req)
                continue
            req.needs_prefill = False
            gap = None if req.last_token is None else now - req.last_token
            if req.first_token is None:
                req.first_token = now
                req.prefill_step_s = self.step_s
            req.last_token = now
            req.generated += 1
            self._rec.token(req, gap)
            finished = req.generated >= req.target_tokens
            if req.sink is not None:
                req.sink(1, req.finish_reason if finished else None)
            if finished:
                self.running.remove(req)
                self._finish(req, req.finish_reason, now)
                done.append(req)
        if done:
            self._record_state()
        return done

    def kv_usage(self) -> float:
        """Return the fraction of KV blocks held by running requests."""
        used = sum(self._blocks(r) for r in self.running)
        return min(1.0, used / self.profile.kv_blocks)

    def _blocks(self, req: SimRequest, extra: int = 1) -> int:
        return blocks_for(self.profile, req.prompt_tokens + req.generated + extra)

    def _admit(self, now: float) -> None:
        budget = self.profile.max_batched_tokens
        free = self.profile.kv_blocks - sum(self._blocks(r) for r in self.running)
        while self.waiting and len(self.running) < self.profile.max_batch:
            nxt = self.waiting[0]
            cost = nxt.computed_tokens()
            # Always admit one request into an empty batch so oversize prompts still make progress.
            if self.running and (cost > budget or self._blocks(nxt) > free):
                break
            self.waiting.popleft()
            budget -= cost
            free -= self._blocks(nxt)
            if nxt.scheduled is None:
                nxt.scheduled = now
                if nxt.on_scheduled is not None:
                    nxt.on_scheduled()
            self.running.append(nxt)

    def _preempt_overflow(self) -> None:
        # Growth of running sequences can exceed the KV budget: evict the newest, as vLLM V1 does.
        while len(self.running) > 1 and sum(self._blocks(r) for r in self.running) > self.profile.kv_blocks:
            victim = self.running.pop()
            victim.needs_prefill = True
            victim.preemptions += 1
            self.waiting.appendleft(victim)
            self._rec.preempted()

    def _finish(self, req: SimRequest, reason: str, now: float) -> None:
        req.finished = reason
        if req.sink is not None and reason != req.finish_reason:
            req.sink(0, reason)
        self._rec.finished(req, now)
