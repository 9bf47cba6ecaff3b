"""Engine span maps as data: which span attributes (or span durations) give each ServerRecord field.

Attribute names were read from each engine's source (look there when an engine renames them):
- vLLM (`vllm/tracing.py` SpanAttributes; one SERVER span `llm_request` per request, set in
  `v1/engine/output_processor.py::do_tracing`, started at the request's arrival): `gen_ai.latency.
  time_to_first_token` (arrival → first token), `time_in_queue`, `time_in_model_prefill` (scheduled →
  first token), `time_in_model_decode` (first → last token), `e2e`; `gen_ai.usage.{prompt,completion}_tokens`;
  all in seconds (floats).
- TensorRT-LLM (`tensorrt_llm/llmapi/tracing.py`, adapted from vLLM's): `gen_ai.latency.time_to_first_token`,
  `time_in_queue`, `e2e`, usage tokens; no prefill/decode split.
- TGI (router `server.rs`, tracing-opentelemetry): fields on the `generate_stream` / `chat_completions` /
  `completions` span recorded as Rust `Duration` Debug strings (`"1.234567ms"`): `queue_time`,
  `validation_time`, `inference_time`, `total_time`; no server TTFT.
- SGLang (`--enable-trace`, `srt/tracing/trace_metric_wrapper.py` RequestStage): one span per stage slice
  under a `Req <rid>` root: `prefill_waiting` (queue), `prefill_forward` (prefill), `decode_loop` (decode);
  server TTFT = end of the last `prefill_forward` − start of the `Req` span.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sloguard import untrusted
from sloguard.traces.record import ServerRecord
from sloguard.traces.span import AttrValue, SpanData

NS = 1e-9


@dataclass(frozen=True, slots=True)
class Rule:
    """How one ServerRecord field is read from a request's spans.

    With `attr`: the attribute's value (in `unit`: s, ms, or rust = a Rust Duration Debug string), from
    a span whose name is `name` (any span when empty). Without: the summed durations of spans named
    `name`; with `since` as well: from the start of the first span whose name contains `since` to the
    end of the last span named `name`.
    """

    field: str
    attr: str = ""
    unit: str = "s"
    name: str = ""
    since: str = ""


@dataclass(frozen=True, slots=True)
class EngineSpans:
    """One engine's map: its rules and the span (name substring) that arrives last for a request."""

    engine: str
    rules: tuple[Rule, ...]
    final: str = ""  # a span whose name contains this completes the record ("" = the first matching span)


_G = "gen_ai.latency."
ENGINE_SPANS: Mapping[str, EngineSpans] = {
    "vllm": EngineSpans("vllm", (
        Rule("ttft_s", _G + "time_to_first_token", name="llm_request"),
        Rule("queue_s", _G + "time_in_queue", name="llm_request"),
        Rule("prefill_s", _G + "time_in_model_prefill", name="llm_request"),
        Rule("decode_s", _G + "time_in_model_decode", name="llm_request"),
        Rule("e2e_s", _G + "e2e", name="llm_request"),
        Rule("output_tokens", "gen_ai.usage.completion_tokens", name="llm_request"),
        Rule("prompt_tokens", "gen_ai.usage.prompt_tokens", name="llm_request"),
    ), final="llm_request"),
    "trtllm": EngineSpans("trtllm", (
        Rule("ttft_s", _G + "time_to_first_token"), Rule("queue_s", _G + "time_in_queue"),
        Rule("e2e_s", _G + "e2e"), Rule("output_tokens", "gen_ai.usage.completion_tokens"),
        Rule("prompt_tokens", "gen_ai.usage.prompt_tokens"),
    )),
    "tgi": EngineSpans("tgi", (
        Rule("queue_s", "queue_time", unit="rust"), Rule("e2e_s", "total_time", unit="rust"),
    )),
    "sglang": EngineSpans("sglang", (
        Rule("queue_s", name="prefill_waiting"), Rule("prefill_s", name="prefill_forward"),
        Rule("decode_s", name="decode_loop"), Rule("ttft_s", name="prefill_forward", since="Req "),
    ), final="Req "),
}
# Attribute keys any map reads: a received span keeps only these (bounded memory per held span).
RELEVANT_ATTRS = frozenset(r.attr for m in ENGINE_SPANS.values() for r in m.rules if r.attr)
RELEVANT_NAMES = frozenset(r.name for m in ENGINE_SPANS.values() for r in m.rules if r.name and not r.attr)
RELEVANT_SUBSTRINGS = tuple({m.final for m in ENGINE_SPANS.values() if m.final} | {
    r.since for m in ENGINE_SPANS.values() for r in m.rules if r.since})

_RUST = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ns|µs|us|ms|s)\s*$")
_RUST_UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def relevant(span: SpanData) -> bool:
    """Return True if any engine map could read this span (others need not be held)."""
    return (span.name in RELEVANT_NAMES or any(k in RELEVANT_ATTRS for k in span.attrs)
            or any(s in span.name for s in RELEVANT_SUBSTRINGS))


def seconds(value: AttrValue, unit: str) -> float | None:
    """Return an attribute value in seconds, or None when it is not a number of that unit."""
    if unit == "rust":
        m = _RUST.match(value) if isinstance(value, str) else None
        return float(m.group(1)) * _RUST_UNITS[m.group(2)] if m else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) * (1e-3 if unit == "ms" else 1.0)


def _read(rule: Rule, spans: Sequence[SpanData]) -> float | None:
    if rule.attr:
        for s in spans:
            if (not rule.name or s.name == rule.name) and rule.attr in s.attrs:
                return seconds(s.attrs[rule.attr], rule.unit)
        return None
    named = [s for s in spans if s.name == rule.name]
    if not named:
        return None
    if not rule.since:
        return sum(s.duration_s for s in named)
    anchors = [s.start_ns for s in spans if rule.since in s.name]
    return (max(s.end_ns for s in named) - min(anchors)) * NS if anchors else None


_COUNTS = ("output_tokens", "prompt_tokens")


def from_spans(engine: str, spans: Sequence[SpanData]) -> ServerRecord | None:
    """Return the record an engine's spans of one request give, or None when no rule matched.

    Raise untrusted.Invalid when a value is not finite, negative, or beyond a week (seconds) or 2^53 (tokens).
    """
    values: dict[str, float] = {}
    for rule in ENGINE_SPANS[engine].rules:
        v = _read(rule, spans)
        if v is not None:
            values[rule.field] = float(untrusted.count(v, what=rule.field)) if rule.field in _COUNTS \
                else untrusted.seconds(v, what=rule.field)
    if not values:
        return None
    out, prompt = values.get("output_tokens"), values.get("prompt_tokens")
    return ServerRecord("otlp", engine, ttft_s=values.get("ttft_s"), queue_s=values.get("queue_s"),
                        prefill_s=values.get("prefill_s"), decode_s=values.get("decode_s"), e2e_s=values.get("e2e_s"),
                        output_tokens=None if out is None else int(out),
                        prompt_tokens=None if prompt is None else int(prompt))


def complete(engine: str, spans: Iterable[SpanData]) -> bool:
    """Return True once the span that ends an engine's record of a request has arrived."""
    m = ENGINE_SPANS[engine]
    if m.final:
        return any(m.final in s.name for s in spans)
    return any(r.attr in s.attrs for s in spans for r in m.rules if r.attr)


def best(engines: Iterable[str], spans: Sequence[SpanData]) -> ServerRecord | None:
    """Return the record of the engine map that reads the most fields (engine `auto`), None if none reads any.

    A map whose values are invalid is skipped; Invalid is raised only when every map that matched was invalid.
    """
    found: list[ServerRecord] = []
    bad: untrusted.Invalid | None = None
    for e in engines:
        try:
            record = from_spans(e, spans)
        except untrusted.Invalid as exc:
            bad = exc
            continue
        if record is not None:
            found.append(record)
    if not found and bad is not None:
        raise bad
    return max(found, key=_filled, default=None)


def _filled(record: ServerRecord) -> int:
    return sum(getattr(record, f) is not None for f in ("ttft_s", "queue_s", "prefill_s", "decode_s", "e2e_s"))
