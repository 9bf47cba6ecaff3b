"""OTLP/HTTP protobuf trace requests -> SpanData, decoded with the official opentelemetry-proto classes.

Only what a join needs survives decoding: spans no engine map reads are counted and dropped here, and a
kept span keeps only the attributes the maps read (so memory per held span is bounded). Malformed spans
(ids of the wrong length or all zero, end before start) are counted and dropped; a body that is not an
ExportTraceServiceRequest at all raises MalformedRequest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from sloguard.traces.engines import RELEVANT_ATTRS, RELEVANT_NAMES, RELEVANT_SUBSTRINGS
from sloguard.traces.span import AttrValue, SpanData

EMPTY_RESPONSE = ExportTraceServiceResponse().SerializeToString()


class MalformedRequest(ValueError):
    """The body is not a protobuf ExportTraceServiceRequest."""


@dataclass(slots=True)
class Decoded:
    """Kept spans and counts of the rest."""

    spans: list[SpanData] = field(default_factory=list)
    received: int = 0
    irrelevant: int = 0
    malformed: int = 0


def _value(v: AnyValue) -> AttrValue | None:
    kind = v.WhichOneof("value")
    if kind in ("string_value", "bool_value", "int_value", "double_value"):
        value: AttrValue = getattr(v, kind)
        return value
    return None


def _relevant_name(name: str) -> bool:
    return name in RELEVANT_NAMES or any(s in name for s in RELEVANT_SUBSTRINGS)


def decode(body: bytes, keep_raw: bool = False) -> Decoded:
    """Decode one request body; keep the spans an engine map could read (with their bytes if `keep_raw`)."""
    try:
        req = ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise MalformedRequest(str(exc)) from None
    out = Decoded()
    for rs in req.resource_spans:
        resource = rs.resource.SerializeToString() if keep_raw else b""
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.received += 1
                attrs = {kv.key: val for kv in s.attributes
                         if kv.key in RELEVANT_ATTRS and (val := _value(kv.value)) is not None}
                if not attrs and not _relevant_name(s.name):
                    out.irrelevant += 1
                    continue
                if len(s.trace_id) != 16 or len(s.span_id) != 8 or not any(s.trace_id) \
                        or s.end_time_unix_nano < s.start_time_unix_nano:
                    out.malformed += 1
                    continue
                out.spans.append(SpanData(
                    s.trace_id.hex(), s.span_id.hex(), s.name, s.start_time_unix_nano, s.end_time_unix_nano,
                    s.parent_span_id.hex(), s.kind, attrs, s.SerializeToString() if keep_raw else b"", resource))
    return out


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
