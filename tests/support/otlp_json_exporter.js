// One vLLM-shaped `llm_request` span continuing `traceparent` 00-TRACE-PARENT-01, exported by the OpenTelemetry
// JS SDK's OTLP/HTTP exporter (@opentelemetry/exporter-trace-otlp-http: OTLP JSON), as a JS service would.
// Usage: NODE_PATH=.tools/otel-js/node_modules node otlp_json_exporter.js URL TRACE PARENT START_MS AUTH
const api = require("@opentelemetry/api");
const { BasicTracerProvider, SimpleSpanProcessor } = require("@opentelemetry/sdk-trace-base");
const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-http");

async function main() {
  const [url, traceId, parent, startMs, auth] = process.argv.slice(2);
  const exporter = new OTLPTraceExporter({ url, headers: auth ? { Authorization: auth } : {} });
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = provider.getTracer("vllm.llm_engine");
  const remote = { traceId, spanId: parent, traceFlags: api.TraceFlags.SAMPLED, isRemote: true };
  const ctx = api.trace.setSpanContext(api.context.active(), remote);
  const start = Number(startMs);
  const span = tracer.startSpan("llm_request", {
    kind: api.SpanKind.SERVER, startTime: start,
    attributes: {
      "gen_ai.latency.time_to_first_token": 0.04, "gen_ai.latency.time_in_queue": 0.001,
      "gen_ai.latency.time_in_model_prefill": 0.035, "gen_ai.latency.time_in_model_decode": 0.3,
      "gen_ai.usage.completion_tokens": 16,
    },
  }, ctx);
  span.end(start + 350);
  await provider.forceFlush();
  await provider.shutdown();
}

main().catch((err) => { console.error(err); process.exit(1); });
