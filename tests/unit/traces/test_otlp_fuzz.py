"""Fuzz OTLP decoding (protobuf and JSON, inflated or not): only MalformedRequest/TooLarge escape, and every kept
span satisfies the bounds the join relies on."""

from __future__ import annotations

import contextlib
import gzip
import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from sloguard.traces.decoder import BodyLimits, TooLarge, work
from sloguard.traces.otlp import MAX_ATTR_TEXT, MAX_NAME, Decoded, MalformedRequest, Window

NOW = 1_800_000_000 * 10**9
WINDOW = Window(NOW)
# ~10 s in all on a loaded 2-core runner; raise max_examples locally for a longer hunt.
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEYS = ["gen_ai.latency.time_in_queue", "gen_ai.latency.e2e", "queue_time", "gen_ai.usage.completion_tokens", "x"]
NAMES = ["llm_request", "prefill_forward", "Req 1", "generate_stream", "other", ""]
times = st.one_of(st.integers(0, 2**64 - 1), st.integers(NOW - 10**12, NOW + 10**12))
values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**63), 2**63 - 1),
                   st.text(max_size=300), st.booleans())


def _check(d: Decoded) -> None:
    assert d.received == len(d.spans) + d.irrelevant + d.malformed + d.overflow
    assert d.malformed == sum(d.invalid.values())
    for s in d.spans:
        assert len(s.trace_id) == 32 and len(s.span_id) == 16 and len(s.parent_id) in (0, 16)
        assert 0 < s.start_ns <= s.end_ns <= NOW + WINDOW.skew_ns and len(s.name) <= MAX_NAME
        for v in s.attrs.values():
            if isinstance(v, str):
                assert len(v) <= MAX_ATTR_TEXT
            elif isinstance(v, float):
                assert math.isfinite(v) and v >= 0


def _run(body: bytes, encoding: str, json_body: bool) -> None:
    with contextlib.suppress(MalformedRequest, TooLarge):
        _check(work(body, encoding, json_body, BodyLimits(1 << 20), True, WINDOW))


@st.composite
def requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 3))):
        for _ in range(draw(st.integers(0, 3))):
            ss = req.resource_spans.add().scope_spans.add()
            for _ in range(draw(st.integers(0, 4))):
                s = ss.spans.add()
                s.trace_id, s.span_id = draw(st.binary(max_size=20)), draw(st.binary(max_size=10))
                s.parent_span_id = draw(st.binary(max_size=10))
                s.name = draw(st.sampled_from(NAMES) | st.text(max_size=50))
                s.start_time_unix_nano, s.end_time_unix_nano = draw(times), draw(times)
                for key, value in draw(st.lists(st.tuples(st.sampled_from(KEYS), values), max_size=4)):
                    a = s.attributes.add()
                    a.key = key
                    field = {str: "string_value", bool: "bool_value", int: "int_value", float: "double_value"}
                    setattr(a.value, field[type(value)], value)
    return req


@FUZZ
@given(requests(), st.sampled_from(["", "gzip"]), st.integers(0, 40), st.binary(max_size=8))
def test_protobuf_requests_even_mangled(req: ExportTraceServiceRequest, encoding: str, cut: int,
                                        noise: bytes) -> None:
    body = req.SerializeToString()
    for candidate in (body, body[: max(0, len(body) - cut)], noise + body):
        _run(gzip.compress(candidate) if encoding else candidate, encoding, False)


json_values = st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=3), max_leaves=10)


@st.composite
def json_requests(draw: st.DrawFn) -> Any:
    def pick(good: Any) -> Any:
        return draw(st.one_of(st.just(good), json_values))

    spans = [{"traceId": pick(draw(st.text("0123456789abcdefABCDEF", max_size=34))),
              "spanId": pick(draw(st.text("0123456789abcdef", max_size=18))),
              "name": pick(draw(st.sampled_from(NAMES))),
              "kind": pick(2), "startTimeUnixNano": pick(str(draw(times))), "endTimeUnixNano": pick(draw(times)),
              "attributes": pick([{"key": draw(st.sampled_from(KEYS)),
                                   "value": {draw(st.sampled_from(["doubleValue", "intValue", "stringValue"])):
                                             pick(str(draw(values)))}}])}
             for _ in range(draw(st.integers(0, 4)))]
    return pick({"resourceSpans": [pick({"scopeSpans": [pick({"spans": spans})]})]})


@FUZZ
@given(json_requests(), st.sampled_from(["", "gzip", "deflate"]))
def test_json_requests_of_any_shape(doc: Any, encoding: str) -> None:
    import zlib

    body = json.dumps(doc).encode()
    packed = {"": body, "gzip": gzip.compress(body), "deflate": zlib.compress(body)}[encoding]
    _run(packed, encoding, True)


@FUZZ
@given(st.binary(max_size=2000), st.sampled_from(["", "gzip", "deflate"]), st.booleans())
def test_random_bytes(body: bytes, encoding: str, json_body: bool) -> None:
    _run(body, encoding, json_body)
