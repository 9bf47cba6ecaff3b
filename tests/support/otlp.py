"""OTLP test helpers: replay engine-shaped span fixtures through the real OpenTelemetry SDK + OTLP/HTTP
exporter, and a local collector stand-in that keeps every span it receives (decoded with opentelemetry-proto).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "spans"
ENGINES = ("vllm", "trtllm", "tgi", "sglang")


def fixture(engine: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{engine}.json").read_text())
    return data


class Engine:
    """One engine's tracer: the SDK with a synchronous OTLP/HTTP exporter, as engines configure it."""

    def __init__(self, endpoint: str, service: str, **exporter: Any) -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}),
                                       shutdown_on_exit=False)
        self.exporter = OTLPSpanExporter(endpoint=endpoint, timeout=5, **exporter)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("engine")

    def emit(self, spans: Sequence[dict[str, Any]], trace_id: str, parent_span_id: str, start_ns: int) -> None:
        """Emit fixture spans continuing `traceparent` 00-trace_id-parent_span_id-01."""
        remote = SpanContext(int(trace_id, 16), int(parent_span_id, 16), is_remote=True,
                             trace_flags=TraceFlags(TraceFlags.SAMPLED))
        made: list[Any] = []
        for s in spans:
            parent = made[s["parent"]] if "parent" in s else NonRecordingSpan(remote)
            span = self.tracer.start_span(
                s["name"], context=trace.set_span_in_context(parent), kind=SpanKind[s["kind"]],
                start_time=start_ns + int(s["start_ms"] * 1e6), attributes=s["attributes"])
            made.append(span)
        for s, span in reversed(list(zip(spans, made, strict=True))):  # children end before their parents
            span.end(end_time=start_ns + int(s["end_ms"] * 1e6))

    def close(self) -> None:
        self.provider.shutdown()


class Collector:
    """A local OTLP/HTTP collector stand-in: `POST /v1/traces` keeps every span (with its resource)."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def _traces(self, request: web.Request) -> web.Response:
        req = ExportTraceServiceRequest.FromString(await request.read())
        for rs in req.resource_spans:
            service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), "")
            for ss in rs.scope_spans:
                for s in ss.spans:
                    self.spans.append({
                        "service": service, "name": s.name, "kind": s.kind, "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(), "parent_id": s.parent_span_id.hex(),
                        "start_ns": s.start_time_unix_nano, "end_ns": s.end_time_unix_nano,
                        "events": [e.name for e in s.events], "status": s.status.code,
                        "attributes": {a.key: getattr(a.value, a.value.WhichOneof("value"))
                                       for a in s.attributes if a.value.WhichOneof("value")},
                    })
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}/v1/traces"
        return self.url

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
