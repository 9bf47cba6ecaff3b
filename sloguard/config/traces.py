"""The `traces:` section: the OTLP receiver of engine spans, the join's bounds and the probe span export."""

from __future__ import annotations

from pydantic import Field

from sloguard.config.strict import PositiveDuration, Strict


class ReceiverSpec(Strict):
    listen: str = Field(pattern=r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]*):\d{1,5}$",
                        description="OTLP/HTTP listen address; engines export to http://HOST:PORT/v1/traces")
    web_config_file: str | None = Field(default=None, description="exporter-toolkit web config (TLS, basic auth) "
                                       "of the receiver; without one it uses the daemon's --web.config.file")
    max_body_bytes: int = Field(default=20 * 1024 * 1024, gt=0, le=256 * 1024 * 1024,
                                description="per request, as sent and after decompression (the OpenTelemetry "
                                "Collector's max_request_body_size, 20 MiB); larger: 413")
    max_decompression_ratio: float = Field(default=100.0, ge=1, description="decompressed / compressed size a "
                                           "gzip or deflate body may reach (real OTLP exports: 4-30); beyond: 413")
    max_connections: int = Field(default=128, gt=0, description="connections open at once; at the cap a new one "
                                 "evicts the oldest that has not sent its request head")
    header_timeout: PositiveDuration = Field(default=10.0, description="a request head must arrive whole within "
                                             "this of the connection opening (or of its first byte)")
    body_timeout: PositiveDuration = Field(default=30.0, description="a request body must arrive whole within this")
    clock_skew: PositiveDuration = Field(default=30.0, description="how far an engine's clock may be from "
                                         "sloguard's: spans outside their probe request's lifetime by more are "
                                         "dropped (counted in sloguard_invalid_input_total{source=\"otlp\"})")


class SpanExportSpec(Strict):
    endpoint: str = Field(pattern=r"^https?://.+", description="OTLP/HTTP traces URL, e.g. http://collector:4318/v1/traces")
    sample_ratio: float = Field(default=0.1, ge=0, le=1, description="share of good requests exported; every "
                                "failed or SLO-missing request is exported")
    queue_size: int = Field(default=2048, gt=0, description="spans waiting for export; beyond, dropped and counted")
    forward_engine_spans: bool = False
    timeout: PositiveDuration = 10.0


class TracesSpec(Strict):
    receiver: ReceiverSpec | None = None
    hold: PositiveDuration = Field(default=10.0, description="how long a result waits for its engine span")
    max_pending_spans: int = Field(default=4096, gt=0, description="spans held before their probe result arrives")
    max_pending_bytes: int = Field(default=16 * 1024 * 1024, gt=0, description="bytes those spans may hold (names, "
                                   "kept attributes, forwarded bytes); beyond, the oldest are dropped (overflow)")
    export: SpanExportSpec | None = None
