"""Join engine spans to probe results by trace id; hold results a bounded time; count everything dropped.

Pure state machine, driven by the daemon's loop with an injected `now` (seconds). Memory is bounded:
held results by the probe rate × `hold`; spans of not-yet-known trace ids (an engine may export before the
probe process hands its result over) by `max_orphans` per lane, each kept `orphan_ttl` seconds; finished
trace ids remembered (to tell late and duplicate spans from foreign ones) up to `remember` entries.

Two orphan lanes, so a flood of other traffic's spans cannot evict a probe's: a span whose parent is the
span id sloguard sent for its trace id (traces.ids: a keyed hash of the trace id, so this needs no state)
marks its trace as a probe's, and that trace's spans wait in their own lane; all others in the shared one.

Span outcomes counted: joined, foreign (never matched a probe request), irrelevant (no engine map reads
it), malformed, duplicate (same span id twice), late (after its result was finalised), overflow (evicted
from a full orphan buffer).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sloguard.model import ProbeResult
from sloguard.traces.engines import ENGINE_SPANS, best, complete, from_spans
from sloguard.traces.ids import probe_span_id
from sloguard.traces.record import ServerRecord, clear_record, finalise
from sloguard.traces.span import SpanData

Mode = str  # "otlp" | "inband" | "none"
OUTCOMES = ("joined", "foreign", "irrelevant", "malformed", "duplicate", "late", "overflow")


@dataclass(slots=True)
class _Held:
    result: ProbeResult
    engine: str
    deadline: float
    spans: list[SpanData] = field(default_factory=list)


def _engines(engine: str) -> tuple[str, ...]:
    return (engine,) if engine in ENGINE_SPANS else tuple(ENGINE_SPANS)


class Joiner:
    """Hold OTLP-mode results until their engine span arrives (or `hold` passes), then finalise them."""

    def __init__(self, hold: float = 10.0, orphan_ttl: float = 3.0, max_orphans: int = 4096,
                 remember: int = 20_000) -> None:
        self.hold, self.orphan_ttl, self.max_orphans, self.remember = hold, orphan_ttl, max_orphans, remember
        self._held: dict[str, _Held] = {}
        self._orphans: OrderedDict[str, tuple[float, list[SpanData]]] = OrderedDict()  # shared lane
        self._own: OrderedDict[str, tuple[float, list[SpanData]]] = OrderedDict()  # probes' traces
        self._orphan_spans = 0
        self._own_spans = 0
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
        return self._orphan_spans + self._own_spans

    def offer(self, results: Iterable[tuple[ProbeResult, Mode, str]], now: float) -> list[ProbeResult]:
        """Take `(result, mode, engine)` from the probe process; return those final now, hold the rest."""
        out = []
        for r, mode, engine in results:
            if mode == "otlp" and r.ok and r.trace_id:
                held = _Held(clear_record(r), engine, now + self.hold)
                early = self._pop_orphans(r.trace_id)
                self._held[r.trace_id] = held
                self._attach(held, early)
                if early and self._complete(held):
                    out.append(self._finish(r.trace_id))
            else:
                out.append(self._final(r if mode == "inband" else clear_record(r), None, count=mode != "none"))
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
        for lane in (self._orphans, self._own):
            while lane:
                tid, (seen, _) = next(iter(lane.items()))
                if seen + self.orphan_ttl > now:
                    break
                self._drop_orphan(lane, tid, "foreign")
        return out

    def flush(self) -> list[ProbeResult]:
        """Finalise every held result now (shutdown)."""
        return [self._finish(t) for t in list(self._held)]

    def _attach(self, held: _Held, spans: Iterable[SpanData]) -> None:
        ids = {s.span_id for s in held.spans}
        for s in spans:
            if s.span_id in ids:
                self.spans["duplicate"] += 1
                continue
            ids.add(s.span_id)
            held.spans.append(s)
            self.spans["joined"] += 1

    def _complete(self, held: _Held) -> bool:
        return any(complete(e, held.spans) for e in _engines(held.engine))

    def _orphan(self, span: SpanData, now: float) -> None:
        tid = span.trace_id
        if tid not in self._own and span.parent_id and span.parent_id == probe_span_id(tid):
            seen, spans = self._orphans.pop(tid, (now, []))  # a probe's trace: move it to its own lane
            self._orphan_spans -= len(spans)
            self._own[tid] = (seen, spans)
            self._own_spans += len(spans)
        lane = self._own if tid in self._own else self._orphans
        entry = lane.setdefault(tid, (now, []))
        if any(s.span_id == span.span_id for s in entry[1]):
            self.spans["duplicate"] += 1
            return
        entry[1].append(span)
        if lane is self._own:
            self._own_spans += 1
        else:
            self._orphan_spans += 1
        while self._orphan_spans > self.max_orphans:
            self._drop_orphan(self._orphans, next(iter(self._orphans)), "overflow")
        while self._own_spans > self.max_orphans:
            self._drop_orphan(self._own, next(iter(self._own)), "overflow")

    def _pop_orphans(self, tid: str) -> list[SpanData]:
        _, shared = self._orphans.pop(tid, (0.0, []))
        _, own = self._own.pop(tid, (0.0, []))
        self._orphan_spans -= len(shared)
        self._own_spans -= len(own)
        return shared + own

    def _drop_orphan(self, lane: OrderedDict[str, tuple[float, list[SpanData]]], tid: str, outcome: str) -> None:
        _, spans = lane.pop(tid)
        if lane is self._own:
            self._own_spans -= len(spans)
        else:
            self._orphan_spans -= len(spans)
        self.spans[outcome] += len(spans)

    def _finish(self, tid: str) -> ProbeResult:
        held = self._held.pop(tid)
        self._finished[tid] = None
        while len(self._finished) > self.remember:
            self._finished.popitem(last=False)
        engines = _engines(held.engine)
        record = from_spans(engines[0], held.spans) if len(engines) == 1 else best(engines, held.spans)
        if record is not None:
            self.forward.extend(s for s in held.spans if s.raw)
        return self._final(held.result, record)

    def _final(self, result: ProbeResult, record: ServerRecord | None, count: bool = True) -> ProbeResult:
        final, negative = finalise(result, record)
        if result.ok and count:
            key = (result.target, final.record or "missing")
            self.records[key] = self.records.get(key, 0) + 1
        for stage in negative:
            self.negative[(result.target, stage)] = self.negative.get((result.target, stage), 0) + 1
        return final
