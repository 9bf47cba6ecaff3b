"""sloguard's own probe traffic per target, to take out of the engine's counts (pure, clock-free).

The engine counts every request it serves, the probes' too. Where probes are a large share of the traffic
(a quiet night, a small deployment, the diagnosis benchmark: 2 of 3 requests), their fixed prompts and
fixed schedule dilute what the users do: a 4x shift of the users' prompts read ~2.1x in the engine's mean,
and a 3x surge of users moved the arrivals 1.2-1.7x (benchmark traces), so long_prompts and capacity were
named 10-50 evaluations after the breach. The signals that describe the users' traffic (arrivals, prompt
length) subtract what this records: each probe's start (sent by the probe process when it starts, so the
ones still running count) and, once its result is back, its prompt length at its first token and finish.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sloguard.model import Histogram, ProbeResult


@dataclass(frozen=True, slots=True)
class Prefilled:
    """One probe request's prompt as the engine counted it: at its first token and at its finish."""

    first_at: float | None  # None: no first token (the engine may not have prefilled it)
    finished_at: float
    prompt_tokens: int | None  # None: the response did not say (then nothing can be subtracted exactly)


class ProbeLoad:
    """Per target, probe starts and prefilled prompts of the last `horizon` seconds."""

    def __init__(self, horizon: float) -> None:
        self.horizon = horizon
        self._starts: dict[str, deque[float]] = {}
        self._prompts: dict[str, deque[Prefilled]] = {}

    def observe(self, started: Iterable[tuple[str, float]], results: Iterable[ProbeResult], now: float) -> None:
        """Record probe starts (target, wall time) and finished latency results; forget what is over the horizon."""
        for target, ts in started:
            self._starts.setdefault(target, deque()).append(ts)
        for r in results:
            if r.check_kind or r.status_code is None:  # a check, or a request that never reached the engine
                continue
            first = r.ts + r.ttft_s if r.ttft_s is not None else None
            end = r.ts + (r.elapsed_s if r.elapsed_s is not None else r.e2e_s or 0.0)
            self._prompts.setdefault(r.target, deque()).append(Prefilled(first, end, r.prompt_tokens))
        for points in self._starts.values():
            while points and points[0] < now - self.horizon:
                points.popleft()
        for kept in self._prompts.values():
            while kept and kept[0].finished_at < now - self.horizon:
                kept.popleft()

    def starts(self, target: str, window: float, now: float) -> int:
        """Return how many probe requests to the target started in (now − window, now]."""
        return sum(1 for ts in self._starts.get(target, ()) if now - window < ts <= now)

    def prefilled(self, target: str, window: float, now: float) -> tuple[int, float] | None:
        """Return (requests, prompt tokens) of probes whose first token came in the window; None if unknown."""
        inside = [p for p in self._prompts.get(target, ()) if p.first_at is not None
                  and now - window < p.first_at <= now]
        if any(p.prompt_tokens is None for p in inside):
            return None
        return len(inside), float(sum(p.prompt_tokens or 0 for p in inside))

    def finished(self, target: str, window: float, now: float) -> list[int] | None:
        """Return the prompt lengths of probes that finished in the window; None if any is unknown."""
        inside = [p for p in self._prompts.get(target, ()) if now - window < p.finished_at <= now]
        if any(p.prompt_tokens is None for p in inside):
            return None
        return [p.prompt_tokens or 0 for p in inside]

    def forget(self, keep: Iterable[str]) -> None:
        """Drop the targets not in `keep`."""
        names = set(keep)
        self._starts = {t: v for t, v in self._starts.items() if t in names}
        self._prompts = {t: v for t, v in self._prompts.items() if t in names}


def without(h: Histogram, prompts: Sequence[int]) -> Histogram | None:
    """Return the histogram with one observation per prompt length taken out; None when nothing is left.

    The engine's window and the probes' may disagree by a scrape at their edges: no bucket goes below 0, and
    the cumulative counts stay non-decreasing.
    """
    buckets, running = [], 0.0
    for le, cum in h.buckets:
        left = max(running, cum - sum(1 for p in prompts if p <= le))
        buckets.append((le, left))
        running = left
    count = max(0.0, h.count - len(prompts))
    total = max(0.0, h.sum - float(sum(prompts)))
    if count <= 0 or not buckets:
        return None
    return Histogram(tuple(buckets), count, total)
