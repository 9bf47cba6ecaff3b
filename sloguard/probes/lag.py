"""Continuous loop-lag accounting for the probe process: how late an arrival stamp can be, measured always.

Where reads carry the kernel's receive stamp (Linux, plain TCP: `rxstamp`) loop lag no longer reaches arrival
stamps, only when requests go out (open-loop send lag); elsewhere (TLS, other OSes) a socket read is stamped
when the loop runs its `data_received`, i.e. at the loop's next poll of the sockets; data that arrives while
the loop runs callbacks waits until that busy period ends. BusyMeter wraps the loop selector's `select` (one
call per loop iteration, ~0.3 us added) and records every busy period (from one poll's return to the next
poll). An arrival at a random moment waits for the rest of the busy period it lands in, so over a window of T
seconds, P(wait > x) = sum(max(0, B - x)) / T over the busy periods B; the reported `p99` is the x where that
is 1 %, exact at bucket bounds (8 per octave), linear between. Nothing is sampled: a 100 ms stall shows in
`max` whenever it happens, and in `p99` once stalls fill 1 % of the time. Sampling lag after the meter's own
wake-ups (the previous design) missed stalls between samples. """

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

Clock = Callable[[], int]
SUB = 8  # buckets per octave of busy time (in microseconds)
NBUCKETS = 40 * SUB


def bucket(us: int) -> int:
    """Return the bucket of a busy period of `us` microseconds (bucket 0 holds < 1 us)."""
    if us < SUB:
        return us
    top = us.bit_length() - 4  # SUB = 2**3: the 3 bits below the leading one pick the sub-bucket
    return min((top + 1) * SUB + ((us >> top) & (SUB - 1)), NBUCKETS - 1)


def lower_us(b: int) -> int:
    """Return the smallest busy time (us) of bucket `b`."""
    if b < SUB:
        return b
    top = b // SUB - 1
    return (SUB + b % SUB) << top


class _Slot:
    __slots__ = ("counts", "max_ns", "start_ns", "sums")

    def __init__(self, start_ns: int) -> None:
        self.start_ns, self.max_ns = start_ns, 0
        self.counts = [0] * NBUCKETS
        self.sums = [0] * NBUCKETS  # ns


class BusyMeter:
    """Record the loop's busy periods into `slots` rotating slots of `slot_s` seconds (the last minute)."""

    def __init__(self, clock: Clock = time.perf_counter_ns, slot_s: float = 5.0, slots: int = 12) -> None:
        self._clock, self._slot_ns, self._nslots = clock, int(slot_s * 1e9), slots
        now = clock()
        self._slots = [_Slot(now)]
        self._last_poll = now

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wrap the selector of a selector event loop (the default on Linux); other loops are left alone."""
        selector: Any = getattr(loop, "_selector", None)
        if selector is None:
            return
        inner = selector.select

        def select(timeout: float | None = None) -> Any:
            self.busy(self._clock() - self._last_poll)
            try:
                return inner(timeout)
            finally:
                self._last_poll = self._clock()

        selector.select = select

    def busy(self, ns: int) -> None:
        """Record one busy period of `ns` nanoseconds ending now."""
        slot = self._slots[-1]
        now = self._last_poll + ns
        if now - slot.start_ns >= self._slot_ns:
            slot = _Slot(now)
            self._slots = [*self._slots[-(self._nslots - 1):], slot]
        b = bucket(ns // 1000)
        slot.counts[b] += 1
        slot.sums[b] += ns
        slot.max_ns = max(slot.max_ns, ns)

    def report(self) -> tuple[float, float]:
        """Return (p99 wait an arrival would see, longest busy period) in seconds over the kept slots."""
        span = max(1, self._clock() - self._slots[0].start_ns)
        counts = [sum(c) for c in zip(*(s.counts for s in self._slots), strict=True)]
        sums = [sum(c) for c in zip(*(s.sums for s in self._slots), strict=True)]
        return wait_quantile(counts, sums, span, 0.99) * 1e-9, max(s.max_ns for s in self._slots) * 1e-9


def wait_quantile(counts: list[int], sums: list[int], span_ns: int, q: float) -> float:
    """Return x (ns) with sum(max(0, B - x)) = (1 - q) * span: exact at bucket bounds, linear between.

    excess(b) = sum(B - lower(b)) over the periods in buckets >= b (all of them are >= lower(b)); it falls
    as b grows, so one downward pass with suffix sums finds the bucket where it crosses the target.
    """
    target = (1 - q) * span_ns
    total, n = 0, 0
    above = 0.0  # excess at the bucket above the current one
    for b in range(NBUCKETS - 1, -1, -1):
        total, n = total + sums[b], n + counts[b]
        low = lower_us(b) * 1000
        cur = float(total - low * n)
        if cur > target:
            hi = lower_us(b + 1) * 1000 if b + 1 < NBUCKETS else low
            return low + (hi - low) * (cur - target) / (cur - above) if cur > above else float(low)
        above = cur
    return 0.0
