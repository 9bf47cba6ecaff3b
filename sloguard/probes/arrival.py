"""Arrival stamps taken in the connection's `data_received`, before aiohttp parses or any coroutine wakes.

Why: at 16 streams the server writes every stream's event at about the same time; a stamp taken when the
reading coroutine resumes is late by the work of every coroutine resumed before it (~15 x 60 us). The
event loop calls each ready socket's `data_received` first and resumes coroutines afterwards, so a stamp
there is late only by the other sockets' parsing (~15 x 10 us).

How (aiohttp 3.9-3.14): `StampedResponse.start` wraps `data_received` of the connection's
`ResponseHandler` once (an instance attribute; the transport looks the method up on every read). The
wrapper stamps `perf_counter_ns()`, lets aiohttp parse the read (its C or Python parser feeds the body
into the response's StreamReader inside that call), then logs `(stamp, StreamReader.total_bytes)`. The
reader later cuts what it reads at those byte offsets, so every piece carries the stamp of the read that
delivered it, however many reads one `readany()` joins. Bytes the hook did not see (an aiohttp change,
or a whole response parsed and released inside one read) fall back to the resume stamp and are counted;
tests/unit/probes/test_probe_arrival.py fails if the hook stops covering body bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp

Clock = Callable[[], int]
Mark = tuple[int, int]  # (arrival stamp ns, body bytes received up to and including that read)
_ATTR = "_sloguard_arrivals"


class Arrivals:
    """Per-connection log of reads: `marks` for the body of the response being received."""

    __slots__ = ("head_ns", "marks", "payload")

    def __init__(self) -> None:
        self.payload: object | None = None
        self.marks: list[Mark] = []
        self.head_ns = 0  # arrival of the read that completed the current response's head (status line)

    def record(self, t_ns: int, current: Any) -> None:
        """Log `(t_ns, body bytes so far)` after a read; a new StreamReader starts a new list."""
        if current is not None and current is not self.payload:
            # A new body reader: this read completed a new response's head (HTTP/1.1 answers in order).
            self.payload, self.marks, self.head_ns = current, [], t_ns
        total = getattr(self.payload, "total_bytes", None)
        if isinstance(total, int) and total > (self.marks[-1][1] if self.marks else 0):
            self.marks.append((t_ns, total))


def install(protocol: Any, clock: Clock = time.perf_counter_ns) -> Arrivals:
    """Wrap `protocol.data_received` once to stamp each read before parsing; return its log."""
    found = vars(protocol).get(_ATTR)
    if isinstance(found, Arrivals):
        return found
    log, inner = Arrivals(), protocol.data_received

    def data_received(data: bytes) -> None:
        t_ns = clock()
        inner(data)
        log.record(t_ns, getattr(protocol, "_payload", None))

    protocol.data_received = data_received
    setattr(protocol, _ATTR, log)
    return log


class StampedResponse(aiohttp.ClientResponse):
    """ClientResponse whose body reads are stamped at arrival; `marks` belong to this body only."""

    clock: Clock = staticmethod(time.perf_counter_ns)
    marks: Sequence[Mark] = ()
    head_ns = 0  # arrival stamp of the read that completed this response's head; 0 when not seen

    async def start(self, connection: aiohttp.connector.Connection) -> aiohttp.ClientResponse:
        """Install the hook before any response byte is parsed, then keep this body's marks."""
        log = install(connection.protocol, type(self).clock) if connection.protocol is not None else None
        resp = await super().start(connection)
        if log is not None and log.payload is self.content:
            self.marks, self.head_ns = log.marks, log.head_ns
        return resp


class Slicer:
    """Cut the bytes a reader gets into `(arrival_ns, piece)` per read, using a response's marks."""

    __slots__ = ("_i", "_marks", "_pos", "late")

    def __init__(self, marks: Sequence[Mark]) -> None:
        self._marks, self._i, self._pos = marks, 0, 0
        self.late = 0  # pieces the hook did not see, stamped at resume instead

    def cut(self, data: bytes, resume_ns: int, out: list[tuple[int, bytes]]) -> None:
        """Append `data`'s pieces to `out`, each stamped by the read that delivered it."""
        marks, start, n = self._marks, 0, len(data)
        while start < n:
            while self._i < len(marks) and marks[self._i][1] <= self._pos + start:
                self._i += 1
            if self._i == len(marks):
                out.append((resume_ns, data[start:]))
                self.late += 1
                break
            t_ns, upto = marks[self._i]
            end = min(upto - self._pos, n)
            out.append((t_ns, data[start:end]))
            start = end
        self._pos += n
