"""The server's own per-request records (OTLP spans, in-band timings) joined to probe requests by trace id.

Import cost matters: the probe process imports `inband` and `record` (plain dataclasses); protobuf and the
OpenTelemetry SDK are imported only by `otlp`, `receiver` and `client_spans`, when configured.
"""
