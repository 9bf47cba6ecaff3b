"""Incremental Server-Sent Events splitter over raw byte chunks, keeping each chunk's arrival stamp."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

DONE = "[DONE]"


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
    (as the SSE spec says). Work is O(bytes): each byte is scanned once.
    """

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._event = ""
        self._cr_pending = False

    @property
    def pending(self) -> bool:
        """Return True when bytes of an unfinished event are buffered (a truncated stream at EOF)."""
        return bool(self._buf.strip()) or bool(self._data)

    def feed(self, chunk: bytes, t_ns: int) -> list[SSEEvent]:
        """Consume one read and return the events it completed, stamped `t_ns`."""
        if self._cr_pending and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the `\n` of a `\r\n` split across two reads
        self._cr_pending = chunk.endswith(b"\r")
        buf = self._buf + chunk
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
        self._buf = buf[start:]
        return out

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
