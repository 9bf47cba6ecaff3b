"""Arrival stamps taken in the connection's `data_received`, before aiohttp parses or any coroutine wakes.

Why: at 16 streams the server writes every stream's event at about the same time; a stamp taken when the
reading coroutine resumes is late by the work of every coroutine resumed before it (~15 x 60 us). The
event loop calls each ready socket's `data_received` first and resumes coroutines afterwards, so a stamp
there is late only by the other sockets' parsing (~15 x 10 us).

How (aiohttp 3.9-3.14): the probe connector (`connection.FreshConnector`, before the request is written; else
`StampedResponse.start`) wraps `data_received` of the connection's `ResponseHandler`, and its transport's
`write` (the request's send stamp, t0), once (an instance attribute; the transport looks the method up on
every read). The wrapper stamps the read (on Linux with the kernel's receive stamp of its last segment, see
`rxstamp`, so not even the loop's own delay reaches the stamp; elsewhere `perf_counter_ns()`), lets aiohttp
parse the read (its C or Python parser feeds the body into the response's StreamReader inside that call), then
logs `(stamp, StreamReader.total_bytes)`. The reader later cuts what it reads at those byte offsets, so every
piece carries the stamp of the read that delivered it, however many reads one `readany()` joins. Bytes the
hook did not see (an aiohttp change, or a whole response parsed and released inside one read) fall back to the
resume stamp and are counted; tests/unit/probes/test_probe_arrival.py fails if the hook stops covering body
bytes.

The same hook keeps what aiohttp loses or never says (aiohttp 3.14): the status line it saw (aiohttp drops a
parsed head when later bytes of the same read are malformed), the error a connection ended with (a reset),
and it wakes the body reader when the parser fails mid-body (the C parser closes the connection without
failing the body, so a read would wait for the timeout). Reads on probe connections are capped at
READ_SIZE bytes, which bounds the parsing one read costs the loop (a 256 KiB read of tiny chunks: ~8 ms).

While a request runs, the CPU aiohttp spends parsing its reads is charged to its budget (`budget`), and
`complete_by` tells its deadline whether its whole answer arrived in time, after reading what the kernel holds.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import aiohttp

from sloguard.probes import rxstamp
from sloguard.probes.budget import CpuBudget

Clock = Callable[[], int]
Mark = tuple[int, int]  # (arrival stamp ns, body bytes received up to and including that read)
_ATTR = "_sloguard_arrivals"
READ_SIZE = 16 * 1024  # bytes per socket read on a probe connection (asyncio's default: 256 KiB)
DRAIN_READS = 16  # reads `complete_by` runs at most (256 KiB): an answer the loop is further behind on is late


class Arrivals:
    """Per-connection log of reads: `marks` for the body being received, the last status line, how it ended."""

    __slots__ = ("budget", "head_ns", "lost", "marks", "payload", "read_ns", "sent_ns", "status", "transport")

    def __init__(self, transport: Any = None) -> None:
        self.transport = transport
        self.budget: CpuBudget | None = None  # the running request's, charged for parsing its reads
        self.sent_ns = 0  # when the latest write on this connection was handed to the kernel
        self.read_ns = 0  # the stamp of the latest socket read on this connection
        self.payload: object | None = None
        self.marks: list[Mark] = []
        self.head_ns = 0  # arrival of the read that completed the current response's head (status line)
        self.status: int | None = None  # from the raw status line of the latest response head
        self.lost: BaseException | None = None  # the error the connection ended with (None: clean or open)

    @property
    def body_bytes(self) -> int:
        """Return the body bytes of the current response received so far."""
        return self.marks[-1][1] if self.marks else 0

    def record(self, t_ns: int, current: Any) -> None:
        """Log `(t_ns, body bytes so far)` after a read; a new StreamReader starts a new list."""
        if current is not None and current is not self.payload:
            # A new body reader: this read completed a new response's head (HTTP/1.1 answers in order).
            self.payload, self.marks, self.head_ns = current, [], t_ns
        total = getattr(self.payload, "total_bytes", None)
        if isinstance(total, int) and total > (self.marks[-1][1] if self.marks else 0):
            self.marks.append((t_ns, total))

    def complete_by(self, since_ns: int, deadline_ns: int) -> bool:
        """Tell whether the whole answer to a request sent after `since_ns` had arrived by `deadline_ns`.

        Reads what the kernel holds for the connection first (the loop may not have got to it yet), in arrival
        order, until the answer is complete, a read arrived after the deadline, or DRAIN_READS reads were made.
        """
        for _ in range(DRAIN_READS):
            if self._done(since_ns) or (self.marks and self.marks[-1][0] > deadline_ns) or not self._read_now():
                break
        if not self._done(since_ns):
            return False
        end = self.marks[-1][0] if self.marks else self.head_ns
        return end <= deadline_ns

    def _done(self, since_ns: int) -> bool:
        """Return True once the body of the response to a request sent after `since_ns` was received whole."""
        payload: Any = self.payload
        return payload is not None and self.head_ns >= since_ns and bool(payload.is_eof())

    def _read_now(self) -> bool:
        """Run one pending socket read now, stamped and parsed as the loop would (plain TCP); False if none."""
        transport = self.transport
        read, sock = getattr(transport, "_read_ready", None), getattr(transport, "_sock", None)
        if read is None or not isinstance(sock, socket.socket) or transport.is_closing() or not _readable(sock):
            return False
        read()
        return True


def _readable(sock: socket.socket) -> bool:
    """Return True if a read on `sock` would not block (bytes, end of file or an error are pending)."""
    try:
        sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    return True


def install(protocol: Any, clock: Clock = time.perf_counter_ns) -> Arrivals:
    """Wrap `protocol.data_received` (and `connection_lost`) once: stamp each read before parsing; return its log."""
    found = vars(protocol).get(_ATTR)
    if isinstance(found, Arrivals):
        return found
    transport: Any = getattr(protocol, "transport", None)
    log, inner, inner_lost = Arrivals(transport), protocol.data_received, protocol.connection_lost
    if isinstance(getattr(transport, "max_size", None), int):  # plain TCP transports (not TLS)
        transport.max_size = READ_SIZE
    if clock is time.perf_counter_ns:  # an injected clock (tests) stays in charge
        clock = rxstamp.enable(transport) or clock
    if transport is not None:
        _stamp_writes(transport, log)

    def data_received(data: bytes) -> None:
        # b"": aiohttp resumes parsing bytes it held back while its buffer was full: they came with earlier reads
        t_ns = log.read_ns = clock() if data else log.read_ns
        budget = log.budget
        cpu_ns = time.thread_time_ns() if budget is not None else 0
        before = getattr(protocol, "_payload", None)
        if (before is None or before.is_eof()) and data[:5] == b"HTTP/":
            log.status = _status(data)
        inner(data)
        log.record(t_ns, getattr(protocol, "_payload", None))
        if before is not None and not before.is_eof():
            _fail_body(before, protocol)
        if budget is not None:
            budget.charge(time.thread_time_ns() - cpu_ns)

    def connection_lost(exc: BaseException | None) -> None:
        log.lost = exc
        inner_lost(exc)

    protocol.data_received = data_received
    protocol.connection_lost = connection_lost
    setattr(protocol, _ATTR, log)
    return log


def _stamp_writes(transport: Any, log: Arrivals) -> None:
    """Stamp `log.sent_ns` as each write is handed to the kernel: t0 is when the request's last write began.

    Stamped before the call, not after: on loopback the kernel delivers the bytes (and may run the server's
    receive path and send its answer) inside `send()`, so a stamp after it is late by up to ~0.2 ms.
    """
    write, writelines = transport.write, transport.writelines

    def stamped_write(data: Any) -> None:
        log.sent_ns = time.perf_counter_ns()
        write(data)

    def stamped_writelines(chunks: Any) -> None:
        log.sent_ns = time.perf_counter_ns()
        writelines(chunks)

    transport.write, transport.writelines = stamped_write, stamped_writelines


def reset_status(protocol: Any) -> None:
    """Forget the last status line of a connection about to carry a new request."""
    found = vars(protocol).get(_ATTR) if protocol is not None else None
    if isinstance(found, Arrivals):
        found.status, found.lost = None, None


def _status(data: bytes) -> int | None:
    code = data[9:12]
    return int(code) if code.isdigit() else None


def _fail_body(payload: Any, protocol: Any) -> None:
    """Fail a body the parser gave up on (the protocol holds the error): its reader wakes at once."""
    failed = protocol.exception() if hasattr(protocol, "exception") else None
    if failed is not None and payload.exception() is None:
        exc = aiohttp.ClientPayloadError(f"malformed body: {failed}")
        exc.__cause__ = failed
        payload.set_exception(exc)


class Capture:
    """Which connection log served the request running in this task (set by StampedResponse.start)."""

    __slots__ = ("budget", "log")

    def __init__(self, budget: CpuBudget | None = None) -> None:
        self.log: Arrivals | None = None
        self.budget = budget  # charged for the reads of this request's connection while it runs


_capture: ContextVar[Capture | None] = ContextVar("sloguard_arrivals_capture", default=None)


@contextmanager
def capturing(budget: CpuBudget | None = None) -> Iterator[Capture]:
    """Collect the connection log of the request made inside this block (even when its head fails)."""
    cap = Capture(budget)
    token = _capture.set(cap)
    try:
        yield cap
    finally:
        _capture.reset(token)
        if cap.log is not None and cap.log.budget is budget:
            cap.log.budget = None  # a kept-alive connection's next request has its own


class StampedResponse(aiohttp.ClientResponse):
    """ClientResponse whose body reads are stamped at arrival; `marks` belong to this body only."""

    clock: Clock = staticmethod(time.perf_counter_ns)
    marks: Sequence[Mark] = ()
    head_ns = 0  # arrival stamp of the read that completed this response's head; 0 when not seen

    async def start(self, connection: aiohttp.connector.Connection) -> aiohttp.ClientResponse:
        """Install the hook before any response byte is parsed, then keep this body's marks."""
        log = install(connection.protocol, type(self).clock) if connection.protocol is not None else None
        if (cap := _capture.get()) is not None:
            cap.log = log
            if log is not None:
                log.budget = cap.budget
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
