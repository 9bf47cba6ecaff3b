"""The simulator's engine driven in virtual time: the same model and decisions, no sleeping, seeded.

`Simulator` runs `Engine` on the event loop, sleeping each step's duration; here a discrete-event loop
jumps from one step end or arrival to the next, so hours of traffic take seconds. Client requests and
the background load (`BACKGROUND_MIX` at `background_rps`) go through the same `Engine` with the same
draws as the served simulator: client output lengths from `output_length`, background prompts with
`prefix_hit_ratio` cached. The client sees every token at the step end that emits it (no network).
Used by benchmarks/report_power.py and tests that need many requests from the simulator's model.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from sloguard.sim.engine import Engine, SimRequest
from sloguard.sim.model import LatencyProfile, output_length
from sloguard.sim.scheduler import BACKGROUND_MIX
from sloguard.sim.simulator import DEFAULT_BACKGROUND_RPS


@dataclass(slots=True)
class Done:
    """One finished client request as the client saw it (seconds from its arrival)."""

    arrival: float
    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    e2e_s: float
    queue_s: float
    prefill_s: float
    itls_s: list[float] = field(default_factory=list)

    @property
    def tpot_s(self) -> float | None:
        """Return (E2E − TTFT) / (tokens − 1), None for ≤ 1 token."""
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1) if self.output_tokens > 1 else None


class _Quiet:
    """Recorder that keeps the client requests' token gaps and, when asked, every prefill's end and finish."""

    def __init__(self) -> None:
        self.gaps: dict[str, list[float]] = {}
        self.prefills: list[tuple[float, int]] | None = None  # (first token's time, prompt tokens), all requests
        self.finishes: list[tuple[float, int]] | None = None  # (finish time, prompt tokens), all requests
        self.queues: list[tuple[float, float]] | None = None  # (finish time, seconds queued), as vLLM's histogram
        self.preemptions = 0  # as vLLM's num_preemptions counter

    def step(self, running: int, waiting: int, kv_usage: float, tokens: int | None) -> None:
        return None

    def preempted(self) -> None:
        self.preemptions += 1

    def token(self, req: SimRequest, gap: float | None) -> None:
        if gap is None and self.prefills is not None and req.first_token is not None:
            self.prefills.append((req.first_token, req.prompt_tokens))
        if gap is not None and req.rid in self.gaps:
            self.gaps[req.rid].append(gap)

    def finished(self, req: SimRequest, now: float) -> None:
        if self.finishes is not None:
            self.finishes.append((now, req.prompt_tokens))
        if self.queues is not None and req.scheduled is not None:
            self.queues.append((now, req.scheduled - (req.queued if req.queued is not None else req.arrival)))


class VirtualServer:
    """One simulated server in virtual time; `multiplier`, `stall_s`, `prompt_scale`, `load_multiplier` and
    `shrink_kv` (`kv_blocks`) are the faults so named.

    `record_requests()` starts keeping every request's prefill end and finish (the engine's prompt-token,
    first-token and finished counters, as a served simulator's /metrics would count them).
    """

    def __init__(self, seed: int, profile: LatencyProfile | None = None,
                 background_rps: float = DEFAULT_BACKGROUND_RPS, multiplier: float = 1.0, stall_s: float = 0.0) -> None:
        self.now = 0.0
        self.profile = profile or LatencyProfile()
        self._rec = _Quiet()
        self.engine = Engine(self.profile, random.Random(f"{seed}/engine"), self._rec, lambda: self.now)
        self.engine.multiplier = multiplier
        self._rng_requests = random.Random(f"{seed}/requests")
        self._rng_background = random.Random(f"{seed}/background")
        self._background_rps, self._stall, self._load = background_rps, stall_s, 1.0
        self._events: list[tuple[float, int, str, SimRequest | None]] = []
        self._ids = itertools.count()
        self._next_background = self._gap()
        self._step_end: float | None = None
        self.done: list[Done] = []
        self.prompt_scale = 1.0  # × every background prompt from now on, as the served simulator's fault

    @property
    def preemptions(self) -> int:
        """Return the requests preempted so far (the engine's preemption counter)."""
        return self._rec.preemptions

    def shrink_kv(self, blocks: int) -> None:
        """Shrink the KV cache to `blocks` blocks from now on, as the served simulator's `kv_blocks` fault."""
        self.engine.profile = dataclasses.replace(self.engine.profile, kv_blocks=blocks)

    def record_requests(self) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
        """Keep every request's prefill end and finish, each (virtual time, prompt tokens), from now on.

        Return both lists; they grow in time order as the server advances.
        """
        self._rec.prefills, self._rec.finishes = [], []
        return self._rec.prefills, self._rec.finishes

    def record_queue_times(self) -> list[tuple[float, float]]:
        """Keep every request's (finish time, seconds it queued) from now on, as vLLM's queue-time histogram."""
        self._rec.queues = []
        return self._rec.queues

    @property
    def load_multiplier(self) -> float:
        """Return the factor on the background arrival rate."""
        return self._load

    @load_multiplier.setter
    def load_multiplier(self, factor: float) -> None:
        self._load = factor
        self._next_background = self._gap()  # arrivals are memoryless: redraw the next one at the new rate

    def run_until(self, t: float) -> None:
        """Advance until the next event would come after virtual time `t`."""
        while min(self._next_background, self._events[0][0] if self._events else float("inf"),
                  self._step_end if self._step_end is not None else float("inf")) <= t:
            self._advance()

    def _gap(self) -> float:
        rate = self._background_rps * self._load
        return self.now + self._rng_background.expovariate(rate) if rate > 0 else float("inf")

    def submit(self, at: float, prompt_tokens: int, max_tokens: int, ignore_eos: bool = False) -> None:
        """Schedule a client request arriving at `at` (virtual seconds)."""
        target, reason = output_length(max_tokens, ignore_eos, self._rng_requests)
        rid = f"c{next(self._ids)}"
        req = SimRequest(rid=rid, prompt_tokens=prompt_tokens, max_tokens=max_tokens, target_tokens=target,
                         finish_reason=reason, arrival=at, stall_s=self._stall)
        self._rec.gaps[rid] = []
        heapq.heappush(self._events, (at + self._stall, next(self._ids), "client", req))

    def _background(self, at: float) -> SimRequest:
        prompt, max_tokens, _ = self._rng_background.choices(BACKGROUND_MIX, weights=[w for *_, w in BACKGROUND_MIX])[0]
        prompt = max(1, round(prompt * self.prompt_scale))
        target, reason = output_length(max_tokens, False, self._rng_background)
        return SimRequest(rid=f"bg{next(self._ids)}", prompt_tokens=prompt, max_tokens=max_tokens, target_tokens=target,
                          finish_reason=reason, arrival=at,
                          cached_tokens=int(prompt * self.profile.prefix_hit_ratio))

    def run_until_idle_of_clients(self) -> list[Done]:
        """Advance until every submitted client request finished; return them in finishing order."""
        while self._events or any(r.rid in self._rec.gaps for r in (*self.engine.waiting, *self.engine.running)):
            self._advance()
        out, self.done = self.done, []
        return out

    def _advance(self) -> None:
        """Process the next event: an arrival (client or background) or the end of the running step."""
        nxt_client = self._events[0][0] if self._events else float("inf")
        nxt = min(nxt_client, self._next_background, self._step_end if self._step_end is not None else float("inf"))
        if self._step_end is not None and nxt == self._step_end:
            self.now, self._step_end = nxt, None
            for req in self.engine.complete():
                self._finished(req)
        elif nxt == self._next_background:
            self.now = nxt
            self.engine.submit(self._background(nxt))
            self._next_background = self._gap()
        else:
            self.now = nxt
            client = heapq.heappop(self._events)[3]
            assert client is not None
            self.engine.submit(client)
        if self._step_end is None:
            duration = self.engine.plan()
            self._step_end = None if duration is None else self.now + duration

    def _finished(self, req: SimRequest) -> None:
        gaps = self._rec.gaps.pop(req.rid, None)
        if gaps is None or req.first_token is None or req.last_token is None:
            return
        assert req.scheduled is not None and req.queued is not None
        self.done.append(Done(req.arrival, req.prompt_tokens, req.generated, req.first_token - req.arrival,
                              req.last_token - req.arrival, req.scheduled - req.queued,
                              req.first_token - req.scheduled, gaps))


def spaced(server: VirtualServer, n: int, interval: float, mix: Sequence[tuple[int, float]], max_tokens: int,
           rng: random.Random, ignore_eos: bool = False) -> list[Done]:
    """Return `n` probe-like requests, one every `interval` virtual seconds (±50 % jitter), prompts from `mix`."""
    at = server.now
    for _ in range(n):
        at += interval * rng.uniform(0.5, 1.5)
        tokens = rng.choices([t for t, _ in mix], weights=[w for _, w in mix])[0]
        server.submit(at, tokens, max_tokens, ignore_eos)
    return server.run_until_idle_of_clients()


def closed_loop(server: VirtualServer, concurrency: int, n: int, mix: Sequence[tuple[int, float]], max_tokens: int,
                rng: random.Random, ignore_eos: bool = False) -> Iterator[Done]:
    """Yield `n` requests of `concurrency` streams, each sending its next request when the last one ended."""
    sent = 0
    for _ in range(min(concurrency, n)):
        server.submit(server.now, rng.choices([t for t, _ in mix], weights=[w for _, w in mix])[0], max_tokens,
                      ignore_eos)
        sent += 1
    finished = 0
    while finished < n:
        server._advance()
        while server.done:
            d = server.done.pop(0)
            finished += 1
            yield d
            if sent < n:
                tokens = rng.choices([t for t, _ in mix], weights=[w for _, w in mix])[0]
                server.submit(server.now, tokens, max_tokens, ignore_eos)
                sent += 1
