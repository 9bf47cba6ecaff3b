"""Probe CLIENT spans, exported with the OpenTelemetry SDK's OTLP/HTTP exporter; optional engine-span forwarding.

Each probe request becomes the CLIENT span whose id sloguard sent in `traceparent` (traces.ids), so the
engine's span, continuing that header, nests under it. Sampled: every failed and every SLO-missing request,
plus `sample_ratio` of the rest (decided from the trace id's random low bits, like TraceIdRatioBased). A
bounded queue sits between the daemon's loop and one exporter thread: the loop only appends (never
blocks, never waits on the collector); spans beyond `queue_size` are dropped and counted.

Attribute names: OpenTelemetry GenAI semantic conventions (status "Development": they may still change)
where sloguard's value has their definition — `gen_ai.operation.name`, `gen_ai.request.model`,
`gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens` (from the server's `usage`), and `error.type`.
Timings use `sloguard.*` names: the conventions' time-to-first-chunk counts any chunk, sloguard's TTFT only
token-bearing events, so reusing that name would mislabel the value.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

from sloguard import __version__
from sloguard.config.traces import SpanExportSpec
from sloguard.model import ProbeResult
from sloguard.outcome import outcome
from sloguard.traces.ids import probe_span_id
from sloguard.traces.otlp import encode_spans
from sloguard.traces.span import SpanData

log = logging.getLogger("sloguard.traces")
BATCH = 512
FLUSH_EVERY_S = 1.0
_TIMINGS = (("ttft_s", "ttft_s"), ("ttfot_s", "ttfot_s"), ("tpot_s", "tpot_s"), ("e2e_s", "e2e_s"),
            ("connect_s", "connect_s"), ("itl.p50_s", "itl_p50_s"), ("itl.p99_s", "itl_p99_s"),
            ("itl.max_s", "itl_max_s"), ("stage.network_s", "network_s"), ("stage.queue_s", "queue_s"),
            ("stage.prefill_s", "prefill_s"), ("stage.decode_s", "server_decode_s"),
            ("server.ttft_s", "server_ttft_s"))


def sampled(result: ProbeResult, ratio: float, missed: bool) -> bool:
    """Return True for failures, SLO misses, and `ratio` of the rest (by the trace id's low 56 bits)."""
    if not result.ok or missed:
        return True
    if not result.trace_id or ratio <= 0.0:
        return False
    return int(result.trace_id[-14:], 16) < ratio * (1 << 56)


def attributes(r: ProbeResult) -> dict[str, Any]:
    """Return the span attributes of one probe request (absent values omitted)."""
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat" if r.api == "chat" else "text_completion",
        "sloguard.probe": r.probe, "sloguard.target": r.target, "sloguard.outcome": outcome(r),
        "sloguard.prompt_bucket": r.prompt_bucket,
    }
    if r.model:
        attrs["gen_ai.request.model"] = r.model
    for key, value in (("gen_ai.usage.input_tokens", r.prompt_tokens), ("gen_ai.usage.output_tokens",
                                                                         r.output_tokens)):
        if value is not None:
            attrs[key] = value
    for name, attr in _TIMINGS:
        value = getattr(r, attr)
        if value is not None:
            attrs[f"sloguard.{name}"] = value
    if r.record:
        attrs["sloguard.record"] = r.record
    if not r.ok:
        attrs["error.type"] = outcome(r) if outcome(r) == "timeout" else f"http_{r.status_code}" if (
            r.status_code and r.status_code != 200) else "error"
    return attrs


class _FixedIds(IdGenerator):
    """Hands the SDK the ids the probe already sent (set before each span starts; loop thread only)."""

    trace_id = 0
    span_id = 0

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id


class _Queue(SpanProcessor):
    def __init__(self, owner: ClientSpans) -> None:
        self._owner = owner

    def on_end(self, span: ReadableSpan) -> None:
        self._owner.enqueue(span)


class ClientSpans:
    """Build, sample and export probe spans on one background thread; `counts` by outcome."""

    def __init__(self, spec: SpanExportSpec, exporter: Any = None) -> None:
        self.spec = spec
        self.counts: dict[str, int] = {"exported": 0, "dropped": 0, "failed": 0, "unsampled": 0,
                                       "forwarded": 0}
        self._ids = _FixedIds()
        self._provider = TracerProvider(resource=Resource.create({"service.name": "sloguard",
                                                                  "service.version": __version__}),
                                        id_generator=self._ids, shutdown_on_exit=False)
        self._provider.add_span_processor(_Queue(self))
        self._tracer = self._provider.get_tracer("sloguard.probes", __version__)
        self._exporter = exporter or OTLPSpanExporter(endpoint=spec.endpoint, timeout=spec.timeout)
        self._queue: deque[ReadableSpan] = deque()
        self._forward: deque[SpanData] = deque()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sloguard-span-export", daemon=True)
        self._thread.start()

    def offer(self, results: Iterable[ProbeResult], missed: Callable[[ProbeResult], bool]) -> None:
        """Turn sampled results into spans and queue them (never blocks)."""
        for r in results:
            if not r.trace_id or not sampled(r, self.spec.sample_ratio, missed(r)):
                self.counts["unsampled"] += 1
                continue
            self._span(r)

    def _span(self, r: ProbeResult) -> None:
        self._ids.trace_id, self._ids.span_id = int(r.trace_id, 16), int(probe_span_id(r.trace_id), 16)
        start = int(r.ts * 1e9)
        t0 = start + int((r.connect_s or 0.0) * 1e9)
        span = self._tracer.start_span(f"{'chat' if r.api == 'chat' else 'text_completion'} {r.model}".strip(),
                                       kind=SpanKind.CLIENT, start_time=start, attributes=attributes(r))
        if r.ttft_s is not None:
            span.add_event("first_token", timestamp=t0 + int(r.ttft_s * 1e9))
        elapsed = getattr(r, "elapsed_s", None) or r.e2e_s or r.ttft_s or 0.0
        end = t0 + int(elapsed * 1e9)
        span.add_event("end", timestamp=end)
        if not r.ok:
            span.set_status(Status(StatusCode.ERROR, r.error or "error"))
        span.end(end_time=max(end, start))

    def forward(self, spans: Sequence[SpanData]) -> None:
        """Queue joined engine spans for the same collector (when `forward_engine_spans`)."""
        for s in spans:
            if len(self._forward) >= self.spec.queue_size:
                self.counts["dropped"] += 1
            else:
                self._forward.append(s)

    def enqueue(self, span: ReadableSpan) -> None:
        """Append one finished span, or count it dropped when the queue is full."""
        if len(self._queue) >= self.spec.queue_size:
            self.counts["dropped"] += 1
            return
        self._queue.append(span)
        if len(self._queue) >= BATCH:
            self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(FLUSH_EVERY_S)
            self._wake.clear()
            self._flush()
        self._flush()

    def _flush(self) -> None:
        while self._queue:
            batch = [self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))]
            try:
                ok = self._exporter.export(batch) == SpanExportResult.SUCCESS
            except Exception:  # the collector's problem must never reach the daemon
                ok = False
            self.counts["exported" if ok else "failed"] += len(batch)
        if self._forward:
            self._post_forward()

    def _post_forward(self) -> None:
        import requests

        batch = [self._forward.popleft() for _ in range(min(BATCH, len(self._forward)))]
        try:
            resp = requests.post(self.spec.endpoint, data=encode_spans(batch), timeout=self.spec.timeout,
                                 headers={"Content-Type": "application/x-protobuf"})
            ok = resp.status_code == 200
        except requests.RequestException:
            ok = False
        self.counts["forwarded" if ok else "failed"] += len(batch)

    def close(self, timeout: float = 2.0) -> None:
        """Export what is queued (bounded by `timeout`), then stop the thread."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)
        self._exporter.shutdown()
