"""Pure guardrail maths: ratios from counter deltas, window means of gauges, GPU activity, contradictions."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence

from sloguard.model import Sample

# GPU activity per target, best first: GPM/DCGM SM activity says the SMs did work; NVML utilisation only
# says a kernel ran (a loop of tiny kernels reads 100 %).
ACTIVITY = (("sloguard_gpu_sm_active_ratio", "sm_active"), ("sloguard_gpu_utilization_ratio", "utilization"))


def ratio(part: float | None, whole: float | None) -> float | None:
    """Return part / whole, or None without a positive whole."""
    if part is None or whole is None or whole <= 0:
        return None
    return max(0.0, part / whole)


def acceptance_length(accepted: float | None, drafts: float | None) -> float | None:
    """Return tokens emitted per draft-and-verify step: 1 + accepted / drafts (vLLM's convention: the bonus token)."""
    got = ratio(accepted, drafts)
    return None if got is None else 1.0 + got


def gpu_activity(samples: Iterable[Sample], target: str) -> tuple[float, str] | None:
    """Return (mean activity 0..1 over the target's GPUs, which series) or None without a GPU reading.

    The target's GPUs are the series labelled with it (a per-target dcgm-exporter source); without any,
    the host's unlabelled GPU series (NVML): one daemon per GPU node serves that node's targets.
    """
    rows = list(samples)
    for name, source in ACTIVITY:
        series = [s for s in rows if s.name == name]
        mine = [s.value for s in series if s.labels.get("target") == target]
        values = mine or [s.value for s in series if not s.labels.get("target")]
        if values:
            return sum(values) / len(values), source
    return None


class Ring:
    """Timestamped values kept for `horizon` seconds; means and shares over a trailing window."""

    def __init__(self, horizon: float) -> None:
        self.horizon = horizon
        self._items: deque[tuple[float, float]] = deque()

    def add(self, ts: float, value: float) -> None:
        """Append one value (timestamps non-decreasing) and forget what left the horizon."""
        self._items.append((ts, value))
        while self._items and self._items[0][0] < ts - self.horizon:
            self._items.popleft()

    def values(self, window: float, now: float) -> list[float]:
        """Return the values stamped in (now − window, now]."""
        return [v for ts, v in self._items if now - window < ts <= now]

    def mean(self, window: float, now: float) -> tuple[float, int] | None:
        """Return (mean, count) over the window, or None when it holds nothing."""
        vals = self.values(window, now)
        return (sum(vals) / len(vals), len(vals)) if vals else None


def summed(views: Mapping[str, Mapping[str, float]], signal: str) -> float | None:
    """Return a gauge summed over a target's models ({model: {signal: value}}), None when no model has it."""
    values = [g[signal] for g in views.values() if signal in g]
    return float(sum(values)) if values else None


def contradictions(activity: float, waiting: float, busy: tuple[float, float],
                   idle: tuple[float, float]) -> tuple[bool, bool]:
    """Return (busy GPU + empty queue, idle GPU + deep queue) for one reading.

    busy = (activity at least, waiting at most); idle = (activity at most, waiting at least).
    """
    return (activity >= busy[0] and waiting <= busy[1], activity <= idle[0] and waiting >= idle[1])


def share(flags: Sequence[float]) -> float | None:
    """Return the share of true (1.0) readings, or None without readings."""
    return sum(flags) / len(flags) if flags else None
