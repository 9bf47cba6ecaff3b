"""OTLP/HTTP JSON trace requests (`Content-Type: application/json`) -> the same validated SpanData as protobuf.

The OTLP JSON encoding is protobuf's JSON mapping with three differences that json_format cannot parse, so
the few fields a join needs are read by hand: trace and span ids are hex (not base64), enums are integers, and
keys are lowerCamelCase (snake_case accepted too, as the Collector does). 64-bit integers may be strings.
A body over MAX_CONTAINERS objects and arrays is refused before parsing: JSON's objects cost ~100x their
bytes in memory, and no real export of a 20 MiB body needs more.
"""

from __future__ import annotations

import base64
import functools
import json
import time
from collections.abc import Iterator
from typing import Any

from sloguard.traces.otlp import Decoded, Keeper, MalformedRequest, Window

MAX_CONTAINERS = 500_000  # ~40,000 spans of five attributes; ~200 bytes of decoder memory each
_VALUE_KEYS = (("stringValue", "string_value"), ("boolValue", "bool_value"), ("intValue", "int_value"),
               ("doubleValue", "double_value"))


def _get(d: Any, camel: str, snake: str, default: Any = None) -> Any:
    if not isinstance(d, dict):
        return default
    v = d.get(camel, d.get(snake, default))
    return default if v is None else v


def _list(d: Any, camel: str, snake: str) -> list[Any]:
    v = _get(d, camel, snake, [])
    return v if isinstance(v, list) else []


def _hex(text: Any) -> bytes:
    if not isinstance(text, str) or len(text) > 64:
        return b"?"  # wrong length: the span is refused as bad_id
    try:
        return bytes.fromhex(text)
    except ValueError:
        return b"?"


def _int(v: Any) -> int:
    if isinstance(v, bool):
        return 0
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.isascii() and v.isdigit() and len(v) <= 20:  # "²".isdigit() is True
        return int(v)
    return 0


def _number(v: Any) -> object:
    if isinstance(v, str):  # protobuf JSON: int64 as a string, and "NaN" / "Infinity" for doubles
        try:
            return int(v) if v.isascii() and v.lstrip("-").isdigit() and len(v) <= 20 else float(v)
        except ValueError:
            return v
    return v


def _attrs(span: Any) -> Iterator[tuple[str, object]]:
    for kv in _list(span, "attributes", "attributes"):
        key, value = _get(kv, "key", "key"), _get(kv, "value", "value", {})
        if not isinstance(key, str) or not isinstance(value, dict):
            continue
        for camel, snake in _VALUE_KEYS:
            if camel in value or snake in value:
                v = value.get(camel, value.get(snake))
                yield key, (_number(v) if camel in ("intValue", "doubleValue") else v)
                break


def _raw(span: dict[str, Any]) -> bytes:
    """Return the span as protobuf bytes (for forwarding); b"" when it does not convert."""
    from google.protobuf import json_format
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    copy = dict(span)
    for camel, snake in (("traceId", "trace_id"), ("spanId", "span_id"), ("parentSpanId", "parent_span_id")):
        for k in (camel, snake):
            if isinstance(copy.get(k), str):
                copy[k] = base64.b64encode(_hex(copy[k])).decode()
    try:
        return bytes(json_format.ParseDict(copy, Span(), ignore_unknown_fields=True).SerializeToString())
    except (json_format.ParseError, ValueError, TypeError, RecursionError):
        return b""


def _resource(rs: Any, keep_raw: bool) -> bytes:
    if not keep_raw:
        return b""
    from google.protobuf import json_format
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    try:
        return bytes(json_format.ParseDict(_get(rs, "resource", "resource", {}), Resource(),
                                           ignore_unknown_fields=True).SerializeToString())
    except (json_format.ParseError, ValueError, TypeError, RecursionError):
        return b""


def decode_json(body: bytes, keep_raw: bool = False, window: Window | None = None) -> Decoded:
    """Decode one OTLP JSON request body; raise MalformedRequest when it is not one."""
    if body.count(b"{") + body.count(b"[") > MAX_CONTAINERS:
        raise MalformedRequest(f"more than {MAX_CONTAINERS} JSON objects and arrays")
    try:
        req = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise MalformedRequest(f"not JSON: {type(exc).__name__}") from None
    if not isinstance(req, dict):
        raise MalformedRequest("not an ExportTraceServiceRequest object")
    keeper = Keeper(window or Window(time.time_ns()), keep_raw)
    for rs in _list(req, "resourceSpans", "resource_spans"):
        resource = _resource(rs, keep_raw)
        for ss in _list(rs, "scopeSpans", "scope_spans"):
            for s in _list(ss, "spans", "spans"):
                if not isinstance(s, dict):
                    keeper.out.received += 1
                    keeper.invalid("malformed")
                    continue
                name = _get(s, "name", "name", "")
                keeper.offer((_hex(_get(s, "traceId", "trace_id", "")), _hex(_get(s, "spanId", "span_id", "")),
                              _hex(_get(s, "parentSpanId", "parent_span_id", ""))),
                             name if isinstance(name, str) else "", _int(_get(s, "kind", "kind", 0)),
                             (_int(_get(s, "startTimeUnixNano", "start_time_unix_nano", 0)),
                              _int(_get(s, "endTimeUnixNano", "end_time_unix_nano", 0))),
                             _attrs(s), functools.partial(_raw, s), resource)
    return keeper.result()
