"""The simulator's own per-request spans, shaped like vLLM's: one SERVER `llm_request` span per request.

Like `vllm serve --otlp-traces-endpoint`, it continues the incoming `traceparent`, starts at the request's
arrival, and carries vLLM's attribute names (sloguard.traces.engines) with the engine model's times, plus
`sim.network_delay_s`: the network delay the simulator actually waited before receiving the request (the
`network_delay_s` fault), so a test can compare sloguard's measured network stage per request. Exported
through the OpenTelemetry SDK's batch processor and OTLP/HTTP exporter, as vLLM does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from sloguard.sim.engine import SimRequest

G = "gen_ai.latency."


class SimTracer:
    """Emit one vLLM-shaped span per finished request; `now` is the loop clock the engine stamps with."""

    def __init__(self, endpoint: str, schedule_delay_ms: int = 200, model: str = "") -> None:
        self._provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}), shutdown_on_exit=False)
        self._provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=2),
                                                             schedule_delay_millis=schedule_delay_ms))
        self._tracer = self._provider.get_tracer("vllm.llm_engine")
        self._model = model

    def emit(self, req: SimRequest, headers: Mapping[str, str], now: float, network_delay_s: float) -> None:
        """Record a finished request (arrival..now on the loop clock) as a span continuing `traceparent`."""
        if req.first_token is None or req.scheduled is None or req.queued is None or req.last_token is None:
            return
        wall = time.time() - now  # loop clock -> Unix time
        ctx = TraceContextTextMapPropagator().extract({k.lower(): v for k, v in headers.items()})
        attrs: dict[str, Any] = {
            G + "time_to_first_token": req.first_token - req.arrival, G + "e2e": now - req.arrival,
            G + "time_in_queue": req.scheduled - req.queued, "gen_ai.usage.prompt_tokens": req.prompt_tokens,
            "gen_ai.usage.completion_tokens": req.generated,
            G + "time_in_model_prefill": req.first_token - req.scheduled,
            G + "time_in_model_decode": req.last_token - req.first_token,
            G + "time_in_model_inference": req.last_token - req.scheduled,
            "gen_ai.request.id": req.rid, "gen_ai.request.max_tokens": req.max_tokens,
            "gen_ai.response.model": self._model, "sim.network_delay_s": network_delay_s,
        }
        span = self._tracer.start_span("llm_request", context=ctx, kind=SpanKind.SERVER,
                                       start_time=int((wall + req.arrival) * 1e9), attributes=attrs)
        span.end(end_time=int((wall + now) * 1e9))

    def close(self) -> None:
        """Export what is pending and stop."""
        self._provider.shutdown()
