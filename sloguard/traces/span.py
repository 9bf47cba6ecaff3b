"""SpanData: one received span as a plain value (ids as lower-case hex, times in Unix nanoseconds)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

AttrValue = str | bool | int | float


@dataclass(frozen=True, slots=True)
class SpanData:
    """The parts of an OTLP span the join needs; `raw` (the serialised span) only when it is forwarded."""

    trace_id: str
    span_id: str
    name: str
    start_ns: int
    end_ns: int
    parent_id: str = ""
    kind: int = 0  # OTLP SpanKind: 2 = SERVER, 3 = CLIENT
    attrs: Mapping[str, AttrValue] = field(default_factory=dict)
    raw: bytes = b""
    resource: bytes = b""  # the serialised Resource of its ResourceSpans, for forwarding

    @property
    def duration_s(self) -> float:
        """Return end − start in seconds (≥ 0 for a well-formed span)."""
        return (self.end_ns - self.start_ns) * 1e-9
