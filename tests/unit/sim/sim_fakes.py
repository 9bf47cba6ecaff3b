"""Test doubles for the simulator engine: a recording Recorder and an engine on a FakeClock."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sloguard.clock import FakeClock
from sloguard.sim.engine import Engine, SimRequest
from sloguard.sim.model import LatencyProfile

# Jitter-free profile with round numbers: prefill 10 ms + 1 ms/token, decode 5 ms + 1 ms/seq.
PROFILE = LatencyProfile(prefill_base_s=0.010, prefill_per_token_s=0.001, decode_base_s=0.005,
                         decode_per_seq_s=0.001, jitter_sigma=0.0, max_batch=4, max_batched_tokens=1000,
                         kv_blocks=1000, block_size=16)


@dataclass
class RecordingRecorder:
    """Keeps every engine event in lists."""

    steps: list[tuple[int, int, float, int | None]] = field(default_factory=list)
    preemptions: int = 0
    tokens: list[tuple[str, float | None]] = field(default_factory=list)
    done: list[tuple[str, str | None]] = field(default_factory=list)

    def step(self, running: int, waiting: int, kv_usage: float, tokens: int | None) -> None:
        self.steps.append((running, waiting, kv_usage, tokens))

    def preempted(self) -> None:
        self.preemptions += 1

    def token(self, req: SimRequest, gap: float | None) -> None:
        self.tokens.append((req.rid, gap))

    def finished(self, req: SimRequest, now: float) -> None:
        self.done.append((req.rid, req.finished))


def make_engine(profile: LatencyProfile = PROFILE, seed: int = 0) -> tuple[Engine, RecordingRecorder, FakeClock]:
    clock = FakeClock()
    rec = RecordingRecorder()
    return Engine(profile, random.Random(seed), rec, clock.monotonic), rec, clock


def request(rid: str, clock: FakeClock, prompt: int = 100, tokens: int = 3, cached: int = 0) -> SimRequest:
    return SimRequest(rid=rid, prompt_tokens=prompt, max_tokens=tokens, target_tokens=tokens,
                      finish_reason="length", arrival=clock.monotonic(), cached_tokens=cached)


def run_step(engine: Engine, clock: FakeClock) -> tuple[float | None, list[SimRequest]]:
    """Plan one step, advance the fake clock by its duration, complete it."""
    duration = engine.plan()
    if duration is None:
        return None, []
    clock.advance(duration)
    return duration, engine.complete()
