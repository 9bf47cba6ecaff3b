"""What the parent tells one worker process to do for one stage, and what comes back (picklable values)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LoadKind = Literal["concurrency", "rate"]


@dataclass(frozen=True, slots=True)
class StageOrder:
    """One worker's share of a stage; offsets in seconds from `start_ns` (perf_counter_ns, shared clock).

    Closed loop: `streams` streams send requests `first_seq`, `first_seq + stride`, ... back to back until
    `end_s` (no new request starts later) or until `quota` measured requests have started. Open loop: one
    request per `arrivals` entry (seq, offset). A request is warm-up when scheduled before `warmup_s` or
    when its seq < `warmup_n`.
    """

    stage: int
    kind: LoadKind
    start_ns: int
    streams: int = 0
    first_seq: int = 0
    stride: int = 1
    arrivals: tuple[tuple[int, float], ...] = ()
    end_s: float | None = None
    quota: int | None = None
    warmup_s: float = 0.0
    warmup_n: int = 0
    max_inflight: int = 100_000

    def is_warmup(self, seq: int, scheduled_s: float) -> bool:
        """Return whether a request is warm-up (sent, but excluded from every figure)."""
        return seq < self.warmup_n or scheduled_s < self.warmup_s


@dataclass(frozen=True, slots=True)
class LoopLag:
    """How late a ready callback ran in a worker's loop during a stage (seconds), sampled every 50 ms."""

    samples: int
    p50: float
    p99: float
    max: float
