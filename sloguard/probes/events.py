"""Split and decode a stream's stamped reads as they arrive, in bounded slices, under a per-request event cap.

Isolation: every probe shares one event loop, and a socket's arrival stamp is taken only when the loop gets
to its `data_received`, so parsing one stream must never hold the loop long. A read is fed to the splitter in
FEED_BYTES pieces; after SLICE_NS of parsing, `feed` yields twice, which lets the loop poll the sockets and run
every `data_received` that became ready during the slice before the next slice starts (one `sleep(0)` would
resume this task first: the loop queues I/O callbacks behind it). Measured in benchmarks/hostile_streams.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from sloguard.probes.sse import DONE, LineTooLong, SSESplitter
from sloguard.probes.timing import Chunk, Summary, Tally

Decoder = Callable[[str], Chunk]
FEED_BYTES = 2048  # bytes handed to the splitter at once (~40 small events)
SLICE_NS = 200_000  # parsing time after which `feed` yields to the loop
MAX_EVENTS = 1_000_000  # default cap; probes set theirs from max_tokens (ProbeJob.max_events)
FLOOD = "event flood"  # error prefix (sloguard.probes.outcome)


class Events:
    """Split and decode stamped reads into a Tally, in arrival order; `error` once the stream broke a limit."""

    def __init__(self, decode: Decoder, max_events: int = MAX_EVENTS) -> None:
        self._splitter, self._decode, self.max_events = SSESplitter(), decode, max_events
        self.tally = Tally()
        self.error: str | None = None

    async def feed(self, t_ns: int, data: bytes) -> str | None:
        """Decode the events this read completed, stamped `t_ns`, yielding to the loop between slices.

        Return an error (and stop consuming) once the stream exceeds `max_events` or sends an oversized line.
        """
        start = time.perf_counter_ns()
        for i in range(0, len(data), FEED_BYTES):
            if self.feed_now(t_ns, data[i : i + FEED_BYTES]) is not None:
                return self.error
            if time.perf_counter_ns() - start > SLICE_NS:
                await yield_to_io()
                start = time.perf_counter_ns()
        return None

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


async def yield_to_io() -> None:
    """Let the loop run the I/O callbacks that became ready while this task ran (two loop iterations)."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def safe_decode(decode: Decoder, data: str) -> Chunk:
    """Decode one event's data; `[DONE]` is the terminator, anything undecodable a malformed-event error."""
    if data == DONE:
        return Chunk(done=True)
    try:
        return decode(data)
    except (ValueError, TypeError, AttributeError, KeyError, IndexError):
        return Chunk(error=f"malformed event: {data[:80]!r}")
