"""Hostile spans (NaN, infinity, absurd times, huge attributes, floods) are dropped, counted and bounded."""

from __future__ import annotations

import json
import time

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from sloguard.model import ProbeResult
from sloguard.traces.join import Joiner
from sloguard.traces.lifetime import span_bytes
from sloguard.traces.otlp import MAX_ATTR_TEXT, Window, decode
from sloguard.traces.otlpjson import decode_json
from sloguard.traces.span import SpanData
from sloguard.untrusted import REJECTIONS

NOW = 1_800_000_000 * 10**9
TID = "4bf92f3577b34da6a3ce929d0e0e4736"
Q = "gen_ai.latency.time_in_queue"


def _request(**over: object) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    s = req.resource_spans.add().scope_spans.add().spans.add()
    s.trace_id, s.span_id, s.name = bytes.fromhex(TID), b"\x01" * 8, "llm_request"
    s.start_time_unix_nano, s.end_time_unix_nano = NOW - 10**8, NOW
    a = s.attributes.add()
    a.key = Q
    value = over.pop("value", 0.001)
    if isinstance(value, str):
        a.value.string_value = value
    elif isinstance(value, int):
        a.value.int_value = value
    else:
        a.value.double_value = value  # type: ignore[assignment]
    for k, v in over.items():
        setattr(s, k, v)
    return req


@pytest.mark.parametrize(("over", "reason"), [
    ({"value": float("nan")}, "not_finite"),
    ({"value": float("inf")}, "not_finite"),
    ({"value": -1.0}, "out_of_range"),
    ({"value": -5}, "out_of_range"),
    ({"value": 2**60}, "out_of_range"),
    ({"end_time_unix_nano": NOW - 2 * 10**8}, "end_before_start"),
    ({"end_time_unix_nano": 16_725_225_600 * 10**9}, "in_future"),  # the year 2500
    ({"start_time_unix_nano": 10**9}, "too_old"),
    ({"start_time_unix_nano": 0}, "no_start"),
    ({"trace_id": b"\0" * 16}, "bad_id"),
    ({"span_id": b"\x01" * 7}, "bad_id"),
    ({"parent_span_id": b"\x01" * 3}, "bad_id"),
])
def test_a_hostile_span_is_dropped_with_its_reason(over: dict[str, object], reason: str) -> None:
    body = _request(**over).SerializeToString()
    d = decode(body, window=Window(NOW))
    assert (d.received, d.malformed, d.spans, d.invalid) == (1, 1, [], {reason: 1})


def test_kept_values_are_bounded() -> None:
    d = decode(_request(value="9" * 100_000, name="llm_request" + "x" * 10_000).SerializeToString(),
               window=Window(NOW))
    [s] = d.spans
    assert len(s.attrs[Q]) == MAX_ATTR_TEXT and len(s.name) == 256  # type: ignore[arg-type]


def test_json_and_protobuf_agree() -> None:
    from google.protobuf import json_format

    req = _request()
    doc = json.loads(json_format.MessageToJson(req))
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["traceId"], span["spanId"] = TID, "01" * 8  # OTLP JSON: ids in hex, not protobuf JSON's base64
    a, b = decode(req.SerializeToString(), window=Window(NOW)), decode_json(json.dumps(doc).encode(),
                                                                            window=Window(NOW))
    assert a.spans == b.spans and len(a.spans) == 1


def _span(tid: str, sid: int, raw: int = 0) -> SpanData:
    return SpanData(tid, f"{sid:016x}", "llm_request", 1, 2, attrs={Q: 0.001}, raw=b"r" * raw)


def test_held_spans_are_bounded_in_bytes_not_only_count() -> None:
    j = Joiner(max_orphans=100_000, max_bytes=1_000_000)
    j.add([_span(f"{i + 1:032x}", 1, raw=60_000) for i in range(50)], now=0.0)  # kept to be forwarded
    assert j.held_bytes <= 1_000_000 and j.spans["overflow"] >= 34
    assert span_bytes(_span(TID, 1, 60_000)) > 60_000


def test_a_record_outside_its_request_or_longer_than_it_is_not_joined() -> None:
    REJECTIONS.clear()
    t0 = time.time()
    result = ProbeResult(ts=t0, probe="p", target="t", model="m", api="chat", ok=True, ttft_s=0.05, e2e_s=0.2,
                         elapsed_s=0.2, trace_id=TID)
    j = Joiner(skew=1.0)
    j.offer([(result, "otlp", "vllm")], now=0.0)
    start = int(t0 * 1e9)
    far = SpanData(TID, "01" * 8, "llm_request", start + 3 * 10**9, start + 4 * 10**9, attrs={Q: 0.001})
    [r] = j.add([far], now=0.1)  # completes the result, with nothing valid left to read
    assert r.record == "" and REJECTIONS.snapshot()[("otlp", "outside_request")] == 1
    j.offer([(result, "otlp", "vllm")], now=0.0)
    long = SpanData(TID, "02" * 8, "llm_request", start, start + 10**8, attrs={Q: 3600.0})
    j._finished.clear()
    [r] = j.add([long], now=0.1)
    assert r.record == "" and REJECTIONS.snapshot()[("otlp", "longer_than_request")] == 1
