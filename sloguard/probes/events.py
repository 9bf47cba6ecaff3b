"""Split and decode a stream's stamped reads as they arrive, in bounded slices, under a per-request event cap.

Isolation: every probe shares one event loop, so parsing one stream must never hold the loop long. A read is fed
to the splitter in FEED_BYTES pieces; after SLICE_NS of parsing, `feed` yields twice, which lets the loop poll
the sockets and run every `data_received` that became ready during the slice before the next slice starts (one
`sleep(0)` would resume this task first: the loop queues I/O callbacks behind it), and each stream waiting to
parse gets its slice in turn (the loop runs ready tasks first in, first out). The CPU a feed takes is charged to
the request's budget (sloguard.probes.budget); past it the stream ends as an event flood, as it does past
`max_events`. Measured in benchmarks/hostile_streams.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from sloguard.probes.budget import CpuBudget
from sloguard.probes.chunk import Chunk
from sloguard.probes.sse import DONE, LineTooLong, SSESplitter
from sloguard.probes.timing import Summary, Tally
from sloguard.untrusted import Invalid, reject

Decoder = Callable[[str], Chunk]
Sink = Callable[[int, bytes], Awaitable[str | None]]  # a stamped read -> an error to stop reading, or None
FEED_BYTES = 2048  # bytes handed to the splitter at once (~40 small events)
SLICE_NS = 200_000  # parsing time after which `feed` yields to the loop
MAX_EVENTS = 1_000_000  # default cap; probes set theirs from max_tokens (ProbeJob.max_events)
FLOOD = "event flood"  # error prefix (sloguard.outcome)
INVALID = "invalid answer"  # error prefix of an event holding a value out of range (sloguard.untrusted)


class Events:
    """Split and decode stamped reads into a Tally, in arrival order; `error` once the stream broke a limit."""

    def __init__(self, decode: Decoder, max_events: int = MAX_EVENTS, budget: CpuBudget | None = None) -> None:
        self._splitter, self._decode, self.max_events = SSESplitter(), decode, max_events
        self.budget = budget
        self.tally = Tally()
        self.error: str | None = None

    async def feed(self, t_ns: int, data: bytes) -> str | None:
        """Decode the events this read completed, stamped `t_ns`, yielding to the loop between slices.

        Return an error (and stop consuming) once the stream exceeds `max_events` or its CPU budget, or sends
        an oversized line.
        """
        cpu_ns, start = _cpu_now(self.budget), time.perf_counter_ns()
        for i in range(0, len(data), FEED_BYTES):
            if self.feed_now(t_ns, data[i : i + FEED_BYTES]) is not None:
                return self.error
            if time.perf_counter_ns() - start > SLICE_NS:
                if self._spent(cpu_ns) is not None:
                    return self.error
                await yield_to_io()
                cpu_ns, start = _cpu_now(self.budget), time.perf_counter_ns()
        return self._spent(cpu_ns)

    def _spent(self, cpu_ns: int) -> str | None:
        """Charge the CPU used since `cpu_ns` (thread time) to the budget; return the error once it is over."""
        budget = self.budget
        if budget is None or self.error is not None:
            return self.error
        budget.charge(time.thread_time_ns() - cpu_ns)
        over = budget.over(time.perf_counter_ns(), self.tally.events)
        if over is not None:
            self.error = f"{FLOOD}: {over}"
        return self.error

    def feed_now(self, t_ns: int, data: bytes) -> str | None:
        """Decode the events `data` completed without yielding (pure assembly, tests); return the error if any."""
        if self.error is not None:
            return self.error
        try:
            events = self._splitter.feed(data, t_ns)
        except LineTooLong as exc:
            self.error = f"protocol error: {exc}"
            return self.error
        tally = self.tally
        for e in events:
            if tally.events >= self.max_events:
                self.error = f"{FLOOD}: more than {self.max_events} events"
                return self.error
            tally.add(e.t_ns, safe_decode(self._decode, e.data))
        return None

    async def summary(self, t0_ns: int, gaps: bool = True) -> Summary:
        """Apply §4 to what arrived, yielding to the loop between slices of the end-of-request pass."""
        gen = self.tally.steps(t0_ns, gaps)
        start = time.perf_counter_ns()
        while True:
            try:
                next(gen)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            if time.perf_counter_ns() - start > SLICE_NS:
                await yield_to_io()
                start = time.perf_counter_ns()

    @property
    def unfinished(self) -> bool:
        """Return True when an event was left incomplete (a truncated stream at EOF)."""
        return self._splitter.pending


def _cpu_now(budget: CpuBudget | None) -> int:
    return time.thread_time_ns() if budget is not None else 0


async def yield_to_io() -> None:
    """Let the loop run the I/O callbacks that became ready while this task ran (two loop iterations)."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def safe_decode(decode: Decoder, data: str) -> Chunk:
    """Decode one event's data; `[DONE]` is the terminator, anything undecodable a malformed-event error, a value
    out of range (a token count of 2^63, NaN) an invalid answer, counted in sloguard_invalid_input_total."""
    if data == DONE:
        return Chunk(done=True)
    try:
        return decode(data)
    except Invalid as exc:
        reject("probe", exc.reason, str(exc))
        return Chunk(error=f"{INVALID}: {exc}")
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError):
        return Chunk(error=f"malformed event: {data[:80]!r}")
