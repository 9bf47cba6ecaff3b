"""OTLP/HTTP trace requests (protobuf or JSON) -> validated SpanData; runs in the decoder process.

Only what a join needs survives decoding: spans no engine map reads are counted and dropped here, and a kept
span keeps only the attributes the maps read, each bounded (so memory per held span is bounded). A span is
invalid, dropped and counted by reason (`Decoded.invalid`, which the daemon adds to
`sloguard_invalid_input_total{source="otlp"}`) when its ids are of the wrong length or all zero, it ends before
it starts, it ends in the future or started long ago (beyond `Window`), or an attribute a map reads is not a
finite, non-negative number below 2^53 (strings: at most 64 characters). A body that is not an
ExportTraceServiceRequest at all raises MalformedRequest (the whole request is refused with 400).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from sloguard.traces.engines import RELEVANT_ATTRS, RELEVANT_NAMES, RELEVANT_SUBSTRINGS
from sloguard.traces.ids import probe_span_id
from sloguard.traces.span import AttrValue, SpanData
from sloguard.untrusted import MAX_COUNT, MAX_SECONDS

EMPTY_RESPONSE = ExportTraceServiceResponse().SerializeToString()
MAX_NAME = 256  # a kept span's name (names the maps read are short)
MAX_ATTR_TEXT = 64  # a kept string attribute (TGI's "1.234567ms")
MAX_FORWARD_BYTES = 64 * 1024  # a span kept with its bytes for forwarding, resource included
MAX_KEPT = 4096  # other traffic's spans one request hands to the join (its shared lane holds 4096 by default)


class MalformedRequest(ValueError):
    """The body is not an OTLP ExportTraceServiceRequest."""


@dataclass(frozen=True, slots=True)
class Window:
    """When a span may lie: ending at most `skew_ns` after `now_ns`, starting at most `max_age_ns` before it."""

    now_ns: int
    skew_ns: int = 30 * 10**9
    max_age_ns: int = 3600 * 10**9


@dataclass(slots=True)
class Decoded:
    """Kept spans and counts of the rest."""

    spans: list[SpanData] = field(default_factory=list)
    received: int = 0
    irrelevant: int = 0
    malformed: int = 0  # invalid spans, all reasons (sloguard_trace_spans_total{outcome="malformed"})
    overflow: int = 0  # kept spans beyond MAX_KEPT in one request
    invalid: dict[str, int] = field(default_factory=dict)  # reason -> spans (and forwards) dropped as invalid
    unforwarded: int = 0  # kept for the join but too large to forward


def _relevant_name(name: str) -> bool:
    return name in RELEVANT_NAMES or any(s in name for s in RELEVANT_SUBSTRINGS)


class SpanInvalid(ValueError):
    """One span out of bounds; `args[0]` is the reason."""


def _attr(value: object) -> AttrValue:
    """Return a kept attribute value, bounded; raise SpanInvalid for a number out of range."""
    if isinstance(value, str):
        return value[:MAX_ATTR_TEXT]
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise SpanInvalid("not_finite")
        if not 0 <= value <= MAX_COUNT:
            raise SpanInvalid("out_of_range")
        return value
    raise SpanInvalid("not_a_number")


def _check_times(start: int, end: int, window: Window) -> None:
    if start <= 0 or end < start:
        raise SpanInvalid("end_before_start" if start > 0 else "no_start")
    if end > window.now_ns + window.skew_ns:
        raise SpanInvalid("in_future")
    if start < window.now_ns - window.max_age_ns:
        raise SpanInvalid("too_old")
    if end - start > MAX_SECONDS * 1e9:
        raise SpanInvalid("out_of_range")


class Keeper:
    """Validate spans from either encoding and keep the relevant ones (both decoders feed it).

    At most MAX_KEPT spans of other traffic are handed on (the join's shared lane holds no more); spans of a
    probe's trace (one of them parented on the probe's keyed span id, traces.ids) always are, whatever the
    batch's size.
    """

    def __init__(self, window: Window, keep_raw: bool) -> None:
        self.window, self.keep_raw, self.out = window, keep_raw, Decoded()
        self._probes: set[str] = set()  # trace ids with a span parented on a probe's span id

    def invalid(self, reason: str) -> None:
        self.out.malformed += 1
        self.out.invalid[reason] = self.out.invalid.get(reason, 0) + 1

    def offer(self, ids: tuple[bytes, bytes, bytes], name: str, kind: int, times: tuple[int, int],
              attrs: Iterable[tuple[str, object]], raw: Callable[[], bytes], resource: bytes) -> None:
        """Take one decoded span: count it, and keep it when an engine map could read it and it is valid."""
        self.out.received += 1
        wanted = [(k, v) for k, v in attrs if k in RELEVANT_ATTRS]
        if not wanted and not _relevant_name(name):
            self.out.irrelevant += 1
            return
        trace_id, span_id, parent = ids
        try:
            if len(trace_id) != 16 or len(span_id) != 8 or not any(trace_id) or not any(span_id) \
                    or len(parent) not in (0, 8):
                raise SpanInvalid("bad_id")
            _check_times(*times, self.window)
            kept = {k: _attr(v) for k, v in wanted}
        except SpanInvalid as exc:
            self.invalid(str(exc.args[0]))
            return
        body = raw() if self.keep_raw else b""
        if self.keep_raw and len(body) + len(resource) > MAX_FORWARD_BYTES:
            body, resource = b"", b""
            self.out.unforwarded += 1
        tid, pid = trace_id.hex(), parent.hex() if any(parent) else ""
        if pid and pid == probe_span_id(tid):
            self._probes.add(tid)
        self.out.spans.append(SpanData(tid, span_id.hex(), name[:MAX_NAME], times[0], times[1], pid, kind, kept,
                                       body, resource if body else b""))

    def result(self) -> Decoded:
        """Return what was kept: every span of a probe's trace, then at most MAX_KEPT others."""
        spans = self.out.spans
        if len(spans) > MAX_KEPT:
            ours = [s for s in spans if s.trace_id in self._probes]
            others = [s for s in spans if s.trace_id not in self._probes]
            self.out.overflow += max(0, len(others) - MAX_KEPT)
            self.out.spans = ours + others[-MAX_KEPT:]  # the newest: they wait in the lane the longest
        return self.out


def _value(v: AnyValue) -> object:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind in ("string_value", "bool_value", "int_value", "double_value") else None


def decode(body: bytes, keep_raw: bool = False, window: Window | None = None) -> Decoded:
    """Decode one protobuf request body; keep the spans an engine map could read (with their bytes if `keep_raw`)."""
    try:
        req = ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise MalformedRequest(str(exc)) from None
    keeper = Keeper(window or Window(time.time_ns()), keep_raw)
    for rs in req.resource_spans:
        resource = rs.resource.SerializeToString() if keep_raw else b""
        for ss in rs.scope_spans:
            for s in ss.spans:
                keeper.offer((s.trace_id, s.span_id, s.parent_span_id), s.name, s.kind,
                             (s.start_time_unix_nano, s.end_time_unix_nano),
                             ((kv.key, _value(kv.value)) for kv in s.attributes), s.SerializeToString, resource)
    return keeper.result()


def encode_spans(spans: list[SpanData]) -> bytes:
    """Return an ExportTraceServiceRequest holding spans kept with `keep_raw`, grouped by resource."""
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span

    req = ExportTraceServiceRequest()
    groups: dict[bytes, ResourceSpans] = {}
    for s in spans:
        rs = groups.get(s.resource)
        if rs is None:
            rs = groups[s.resource] = req.resource_spans.add()
            rs.resource.CopyFrom(Resource.FromString(s.resource))
            rs.scope_spans.add()
        rs.scope_spans[0].spans.append(Span.FromString(s.raw))
    return bytes(req.SerializeToString())


def response(rejected: int, message: str = "") -> bytes:
    """Return an ExportTraceServiceResponse, with partial_success when spans were rejected."""
    if not rejected:
        return bytes(EMPTY_RESPONSE)
    resp = ExportTraceServiceResponse()
    resp.partial_success.rejected_spans = rejected
    resp.partial_success.error_message = message
    return bytes(resp.SerializeToString())
