"""A request's CPU budget in the probe process: what one stream may take of the loop before it is an event flood.

Every probe shares one event loop. Parsing is sliced (sloguard.probes.events), so no stream holds the loop for
long at a time, and arrival stamps come from the kernel, so a busy loop skews no measurement; but a stream that
keeps the loop parsing without delivering events (SSE comments or data-less events, which the event cap does not
count, or events that are costly to decode) takes a core from the other probes and from whatever shares the host,
and makes the kernel schedule the whole probe process as a CPU hog, so its loop reads the other targets' sockets
late. A request may use BURST_S of CPU, plus EVENT_S for each SSE event it delivered; past that it fails as
`event flood: N ms of CPU for E events ...` (outcome `event_flood`) and its connection is closed. Tiny events are
cheap: a flood of them ends at the event cap (`max_events`) instead. The CPU is thread CPU time (what this thread
ran, not the wall time a loaded host adds), charged for the socket reads aiohttp parses for the request
(sloguard.probes.arrival) and for splitting and decoding its events (sloguard.probes.events).

Measured on a 2-core VM at load average 33: a real answer streamed one event per read costs ~160 us of charged CPU
per event (~400 us in all, with the loop's own work); quiet, a few tens of us. EVENT_S leaves 6x that.
"""

from __future__ import annotations

import time

BURST_S = 0.020  # CPU any request may use
EVENT_S = 0.001  # and this much more for each event it delivered


class CpuBudget:
    """CPU a request used so far (thread CPU ns) against its burst plus an allowance per event it delivered."""

    __slots__ = ("burst_ns", "event_ns", "start_ns", "used_ns")

    def __init__(self, burst_s: float = BURST_S, event_s: float = EVENT_S, start_ns: int | None = None) -> None:
        self.start_ns = time.perf_counter_ns() if start_ns is None else start_ns
        self.burst_ns, self.event_ns = int(burst_s * 1e9), int(event_s * 1e9)
        self.used_ns = 0

    def charge(self, ns: int) -> None:
        """Add `ns` of CPU spent on this request."""
        self.used_ns += max(0, ns)

    def over(self, now_ns: int, events: int) -> str | None:
        """Return what the request used once that is more than it may use after `events` events, else None."""
        if self.used_ns <= self.burst_ns + self.event_ns * events:
            return None
        wall = max(0, now_ns - self.start_ns) / 1e9
        return (f"{self.used_ns / 1e6:.0f} ms of CPU for {events} events in {wall:.2f} s "
                f"(allowed {self.burst_ns / 1e6:.0f} ms + {self.event_ns / 1e6:g} ms per event)")
