"""Join engine spans to probe results by trace id; hold results a bounded time; count everything dropped.

Pure state machine, driven by the daemon's loop with an injected `now` (seconds). Memory is bounded:
held results by the probe rate × `hold`, each holding at most MAX_TRACE_SPANS spans; spans of not-yet-known
trace ids (an engine may export before the probe process hands its result over) by `max_orphans` spans and
`max_bytes` bytes per lane, each kept `orphan_ttl` seconds; finished trace ids remembered (to tell late and
duplicate spans from foreign ones) up to `remember` entries.

Two orphan lanes, so a flood of other traffic's spans cannot evict a probe's: a span whose parent is the
span id sloguard sent for its trace id (traces.ids: an HMAC of the trace id under a per-daemon key, so no
other sender can make one) marks its trace as a probe's, and that trace's spans wait in their own lane.

A joined record is checked against the request it describes (traces.lifetime): spans outside the probe
request's lifetime ± `skew`, and records with a value out of range or a stage longer than the request, are
dropped and counted in sloguard_invalid_input_total{source="otlp"}.

Span outcomes counted: joined, foreign (never matched a probe request), irrelevant (no engine map reads
it), malformed, duplicate (same span id twice), late (after its result was finalised), overflow (evicted
from a full orphan buffer, or beyond a trace's or a request's span bound).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sloguard.model import ProbeResult
from sloguard.sources.engines.capabilities import capability
from sloguard.traces.engines import ENGINE_SPANS, best, complete, from_spans
from sloguard.traces.ids import probe_span_id
from sloguard.traces.lifetime import check_record, span_bytes, spans_within
from sloguard.traces.record import ServerRecord, clear_record, finalise
from sloguard.traces.span import SpanData
from sloguard.untrusted import Invalid, reject

Mode = str  # "otlp" | "inband" | "none"
OUTCOMES = ("joined", "foreign", "irrelevant", "malformed", "duplicate", "late", "overflow")
MAX_TRACE_SPANS = 256  # spans one request's trace may hold (SGLang: one per stage slice)


@dataclass(slots=True)
class _Held:
    result: ProbeResult
    engine: str
    deadline: float
    spans: list[SpanData] = field(default_factory=list)


@dataclass(slots=True)
class _Lane:
    """Spans waiting for their probe result, oldest trace first: trace id -> (first seen, spans, their bytes)."""

    traces: OrderedDict[str, tuple[float, list[SpanData], list[int]]] = field(default_factory=OrderedDict)
    spans: int = 0
    bytes: int = 0

    def take(self, tid: str) -> list[SpanData]:
        _, spans, size = self.traces.pop(tid, (0.0, [], [0]))
        self.spans -= len(spans)
        self.bytes -= size[0]
        return spans

    def give(self, tid: str, seen: float, spans: list[SpanData]) -> None:
        size = sum(span_bytes(s) for s in spans)
        self.traces[tid] = (seen, spans, [size])
        self.spans += len(spans)
        self.bytes += size


def _engines(engine: str) -> tuple[str, ...]:
    return (engine,) if engine in ENGINE_SPANS else tuple(ENGINE_SPANS)


class Joiner:
    """Hold OTLP-mode results until their engine span arrives (or `hold` passes), then finalise them."""

    def __init__(self, hold: float = 10.0, orphan_ttl: float = 3.0, max_orphans: int = 4096,
                 remember: int = 20_000, max_bytes: int = 16 * 1024 * 1024, skew: float = 30.0) -> None:
        self.hold, self.orphan_ttl, self.max_orphans, self.remember = hold, orphan_ttl, max_orphans, remember
        self.max_bytes, self.skew = max_bytes, skew
        self._held: dict[str, _Held] = {}
        self._shared, self._own = _Lane(), _Lane()  # other traffic's traces; probes' traces
        self._finished: OrderedDict[str, None] = OrderedDict()
        self.spans: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        self.records: dict[tuple[str, str], int] = {}  # (target, "otlp"|"inband"|"missing") -> results
        self.negative: dict[tuple[str, str], int] = {}  # (target, stage) -> negative stages dropped
        self.forward: list[SpanData] = []  # joined spans kept with their bytes, for the collector
        self.completed: list[ProbeResult] = []  # for callers that collect add()'s results between polls

    @property
    def pending(self) -> int:
        """Return how many results wait for their engine span."""
        return len(self._held)

    @property
    def orphans(self) -> int:
        """Return how many spans wait for their probe result (both lanes)."""
        return self._shared.spans + self._own.spans

    @property
    def held_bytes(self) -> int:
        """Return the estimated bytes of the spans waiting for their probe result (both lanes)."""
        return self._shared.bytes + self._own.bytes

    def offer(self, results: Iterable[tuple[ProbeResult, Mode, str]], now: float) -> list[ProbeResult]:
        """Take `(result, mode, engine)` from the probe process; return those final now, hold the rest."""
        out = []
        for r, mode, engine in results:
            if mode == "otlp" and r.ok and r.trace_id:
                held = _Held(clear_record(r), engine, now + self.hold)
                early = self._shared.take(r.trace_id) + self._own.take(r.trace_id)
                self._held[r.trace_id] = held
                self._attach(held, early)
                if early and self._complete(held):
                    out.append(self._finish(r.trace_id))
            else:
                out.append(self._final(r if mode == "inband" else clear_record(r), None, count=mode != "none",
                                       engine=engine))
        return out

    def add(self, spans: Sequence[SpanData], now: float) -> list[ProbeResult]:
        """Take decoded spans; return results they completed."""
        touched: set[str] = set()
        for s in spans:
            held = self._held.get(s.trace_id)
            if held is not None:
                self._attach(held, [s])
                touched.add(s.trace_id)
            elif s.trace_id in self._finished:
                self.spans["late"] += 1
            else:
                self._orphan(s, now)
        return [self._finish(t) for t in touched if t in self._held and self._complete(self._held[t])]

    def due(self, now: float) -> list[ProbeResult]:
        """Finalise results whose hold has passed (with whatever arrived); expire unmatched spans."""
        out = [self._finish(t) for t, h in list(self._held.items()) if h.deadline <= now]
        for lane in (self._shared, self._own):
            while lane.traces:
                tid, (seen, _, _) = next(iter(lane.traces.items()))
                if seen + self.orphan_ttl > now:
                    break
                self.spans["foreign"] += len(lane.take(tid))
        return out

    def flush(self) -> list[ProbeResult]:
        """Finalise every held result now (shutdown)."""
        return [self._finish(t) for t in list(self._held)]

    def _attach(self, held: _Held, spans: Iterable[SpanData]) -> None:
        ids = {s.span_id for s in held.spans}
        for s in spans:
            if s.span_id in ids:
                self.spans["duplicate"] += 1
            elif len(held.spans) >= MAX_TRACE_SPANS:
                self.spans["overflow"] += 1
            else:
                ids.add(s.span_id)
                held.spans.append(s)
                self.spans["joined"] += 1

    def _complete(self, held: _Held) -> bool:
        return any(complete(e, held.spans) for e in _engines(held.engine))

    def _orphan(self, span: SpanData, now: float) -> None:
        tid = span.trace_id
        if tid not in self._own.traces and span.parent_id and span.parent_id == probe_span_id(tid):
            seen = self._shared.traces.get(tid, (now,))[0]  # a probe's trace: move it to its own lane
            self._own.give(tid, seen, self._shared.take(tid))
        lane = self._own if tid in self._own.traces else self._shared
        if tid not in lane.traces:
            lane.give(tid, now, [])
        _, spans, size = lane.traces[tid]
        if any(s.span_id == span.span_id for s in spans):
            self.spans["duplicate"] += 1
            return
        if len(spans) >= MAX_TRACE_SPANS:
            self.spans["overflow"] += 1
            return
        n = span_bytes(span)
        spans.append(span)
        size[0] += n
        lane.spans += 1
        lane.bytes += n
        for full in (self._shared, self._own):
            while full.traces and (full.spans > self.max_orphans or full.bytes > self.max_bytes):
                self.spans["overflow"] += len(full.take(next(iter(full.traces))))

    def _finish(self, tid: str) -> ProbeResult:
        held = self._held.pop(tid)
        self._finished[tid] = None
        while len(self._finished) > self.remember:
            self._finished.popitem(last=False)
        spans, outside = spans_within(held.result, held.spans, self.skew)
        if outside:
            reject("otlp", "outside_request", "span times outside their probe request's lifetime", outside)
        record = self._record(held, spans)
        if record is not None:
            self.forward.extend(s for s in spans if s.raw)
        return self._final(held.result, record, engine=held.engine)

    def _record(self, held: _Held, spans: Sequence[SpanData]) -> ServerRecord | None:
        engines = _engines(held.engine)
        try:
            record = from_spans(engines[0], spans) if len(engines) == 1 else best(engines, spans)
            if record is not None:
                check_record(record, held.result)
        except Invalid as exc:
            reject("otlp", exc.reason, str(exc))
            return None
        return record

    def _final(self, result: ProbeResult, record: ServerRecord | None, count: bool = True,
               engine: str = "auto") -> ProbeResult:
        final, negative = finalise(result, record, capability(engine).head)
        if result.ok and count:
            key = (result.target, final.record or "missing")
            self.records[key] = self.records.get(key, 0) + 1
        for stage in negative:
            self.negative[(result.target, stage)] = self.negative.get((result.target, stage), 0) + 1
        return final
