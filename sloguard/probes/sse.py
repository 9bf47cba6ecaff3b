"""Incremental Server-Sent Events splitter over raw byte chunks, keeping each chunk's arrival stamp."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

DONE = "[DONE]"
MAX_LINE_BYTES = 1024 * 1024  # longer SSE lines are a protocol error (real events are < 10 KiB)


class LineTooLong(ValueError):
    """An SSE line grew beyond the splitter's limit without ending."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: its joined `data` lines and the arrival stamp of the chunk that completed it."""

    data: str
    t_ns: int
    event: str = ""


class SSESplitter:
    """Split SSE bytes into events; an event split across reads gets the stamp of the read that ends it.

    Accepts `\\n`, `\\r\\n` and `\\r` line endings, skips comment lines (`:`), joins multi-line `data`
    with `\\n`, and ignores fields other than `data` and `event`. Events without data are not dispatched
    (as the SSE spec says). Work is O(bytes): each byte is scanned once, and an unfinished line is kept as a
    list of reads (joined once it ends), so a long line costs O(its length), not O(length squared).
    A line longer than `max_line` raises LineTooLong.
    """

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self._parts: list[bytes] = []  # an unfinished line, read by read
        self._size = 0
        self._data: list[str] = []
        self._event = ""
        self._cr_pending = False
        self._max = max_line

    @property
    def pending(self) -> bool:
        """Return True when bytes of an unfinished event are buffered (a truncated stream at EOF)."""
        return any(p.strip() for p in self._parts) or bool(self._data)

    def feed(self, chunk: bytes, t_ns: int) -> list[SSEEvent]:
        """Consume one read and return the events it completed, stamped `t_ns`."""
        if self._cr_pending and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the `\n` of a `\r\n` split across two reads
        self._cr_pending = chunk.endswith(b"\r")
        if _line_end(chunk, 0) < 0:
            self._keep(chunk)
            return []
        buf = b"".join((*self._parts, chunk)) if self._parts else chunk
        self._parts, self._size = [], 0
        out: list[SSEEvent] = []
        start = 0
        n = len(buf)
        while start < n:
            nl = _line_end(buf, start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + (2 if buf[nl : nl + 2] == b"\r\n" else 1)
            event = self._line(line, t_ns)
            if event is not None:
                out.append(event)
        self._keep(buf[start:])
        return out

    def _keep(self, rest: bytes) -> None:
        if rest:
            self._parts.append(rest)
            self._size += len(rest)
            if self._size > self._max:
                raise LineTooLong(f"event line longer than {self._max} bytes")

    def _line(self, raw: bytes, t_ns: int) -> SSEEvent | None:
        if not raw:
            return self._dispatch(t_ns)
        if raw.startswith(b":"):
            return None
        name, _, value = raw.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value.decode("utf-8", "replace"))
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        return None

    def _dispatch(self, t_ns: int) -> SSEEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = SSEEvent("\n".join(self._data), t_ns, self._event)
        self._data, self._event = [], ""
        return event


def _line_end(buf: bytes, start: int) -> int:
    """Return the index of the first `\\r` or `\\n` at or after `start`, or -1."""
    lf = buf.find(b"\n", start)
    cr = buf.find(b"\r", start, lf if lf >= 0 else len(buf))
    return cr if cr >= 0 else lf


def split(chunks: Iterable[tuple[int, bytes]]) -> tuple[list[SSEEvent], bool]:
    """Split stamped reads `(t_ns, bytes)` into events; the flag is True if an event was left unfinished."""
    splitter = SSESplitter()
    events: list[SSEEvent] = []
    for t_ns, chunk in chunks:
        events.extend(splitter.feed(chunk, t_ns))
    return events, splitter.pending
