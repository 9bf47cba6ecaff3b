"""Whether a canary run had the GPU to itself: the waiting rule and the verdict on contention (pure).

Policy. Before a run, the GPU's activity from other work is sampled every `poll` seconds (GPM SM activity
where the GPU has GPM, else NVML utilisation). The run starts once the last `quiet_gap` seconds were quiet
(other work's share <= `threshold`), or after `max_wait` seconds without such a gap; the latter run is
**contended**. During the run, other processes' SM use is sampled (nvmlDeviceGetProcessUtilization); if
more than MAX_BUSY_SHARE of those samples show other work above `threshold`, the run is contended. Where
per-process use cannot be read, one device-level sample right after the run decides instead. A contended
run never becomes or moves the baseline and its throughput is never judged; its contention is exported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_BUSY_SHARE = 0.1  # of a run's samples: more than this with other work busy makes the run contended


@dataclass(frozen=True)
class Policy:
    """The waiting rule; defaults live in CanarySpec."""

    threshold: float = 0.05
    quiet_gap: float = 3.0
    max_wait: float = 60.0
    poll: float = 0.5


@dataclass(frozen=True)
class Sample:
    """Other work's busy share over the period ending at monotonic time `t` (None: not measurable)."""

    t: float
    others: float | None


@dataclass(frozen=True)
class Contention:
    """The contention verdict of one run; `contended` None means it could not be measured."""

    contended: bool | None
    share: float | None  # share of the run's samples with other work busy
    waited: float  # seconds spent waiting for a quiet gap
    reason: str


UNMEASURED = Contention(None, None, 0.0, "GPU activity not measurable")
# The CPU fallback shares its cores with everything else and cannot tell: figures only, never judged.
ON_CPU = Contention(None, None, 0.0, "CPU fallback: shared with every other process, figures only")


def busy(s: Sample, policy: Policy) -> bool:
    """Return whether other work was busy in this sample (unknown counts as busy)."""
    return s.others is None or s.others > policy.threshold


def quiet_for(samples: Sequence[Sample], policy: Policy) -> float:
    """Return how long the trailing run of quiet samples has lasted (0 when the last sample is busy)."""
    if not samples or busy(samples[-1], policy):
        return 0.0
    busy_ends = [s.t for s in samples if busy(s, policy)]
    start = busy_ends[-1] if busy_ends else samples[0].t  # the quiet run starts where the last busy one ended
    return samples[-1].t - start


def should_start(samples: Sequence[Sample], started: float, policy: Policy) -> bool | None:
    """Return True to start (quiet gap reached), None to start contended (bound reached), False to wait."""
    if samples and samples[-1].others is None:
        return True  # blind: waiting cannot help; the verdict says "not measurable"
    if quiet_for(samples, policy) >= policy.quiet_gap:
        return True
    if samples and samples[-1].t - started >= policy.max_wait:
        return None
    return False


def judge(waited: float, gap: bool, run: Sequence[Sample], after: Sample | None, policy: Policy) -> Contention:
    """Return the contention verdict from the wait outcome, the samples during the run and one after it."""
    known = [s for s in run if s.others is not None]
    share = sum(busy(s, policy) for s in known) / len(known) if known else None
    if not gap:
        return Contention(True, share, waited, f"no quiet gap of {policy.quiet_gap:g}s within {policy.max_wait:g}s")
    if share is not None:
        hit = share > MAX_BUSY_SHARE
        return Contention(hit, share, waited, f"other work busy in {share:.0%} of the run" if hit else "quiet")
    if after is None or after.others is None:
        return Contention(None, None, waited, "GPU activity during the run not measurable")
    hit = busy(after, policy)
    return Contention(hit, None, waited, "other work busy right after the run" if hit else "quiet")
