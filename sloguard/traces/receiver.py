"""The embedded OTLP/HTTP receiver: `POST /v1/traces`, protobuf or JSON, gzip/deflate or none, TLS/auth.

Engines point `--otlp-traces-endpoint` (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf) or an OpenTelemetry
Collector's `otlphttp` exporter (gzip by default) here. As the Collector's receiver: a body is read whole up to
`max_body_bytes` (20 MiB, as sent and after inflating; 413 beyond), within `body_timeout`; aiohttp's own
inflating is off, so a body is inflated exactly once, in the decoder process, bounded by bytes and by ratio.
Bodies being read or waiting for the decoder hold at most 2 x `max_body_bytes`: beyond, 503 with Retry-After,
which OTLP exporters retry. A body that is not OTLP is 400; another Content-Type or Content-Encoding 415.
gRPC is not served: it would add grpcio (a large native dependency) for what a Collector converts anyway.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from sloguard.config.traces import ReceiverSpec
from sloguard.traces.decoder import ENCODINGS, BodyLimits, Busy, Decoder, TooLarge
from sloguard.traces.otlp import Decoded, MalformedRequest, Window, response
from sloguard.untrusted import reject
from sloguard.web.guard import Guard, Limits
from sloguard.web.site import start_site
from sloguard.web.webconfig import WebConfig

log = logging.getLogger("sloguard.traces")
PROTOBUF, JSON = "application/x-protobuf", "application/json"
Sink = Callable[[Decoded], None]
OUTCOMES = ("ok", "malformed", "too_large", "unauthorized", "unsupported", "busy", "timeout", "aborted")
SINK_BATCH = 256  # spans joined per turn of the loop (~2.5 ms on an idle core)


@dataclass(frozen=True, slots=True)
class Settings:
    """The receiver's limits (ReceiverSpec's, without the listen address and the web config)."""

    max_body_bytes: int = 20 * 1024 * 1024
    max_decompression_ratio: float = 100.0
    max_connections: int = 128
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    clock_skew: float = 30.0

    @classmethod
    def of(cls, spec: ReceiverSpec) -> Settings:
        return cls(spec.max_body_bytes, spec.max_decompression_ratio, spec.max_connections, spec.header_timeout,
                   spec.body_timeout, spec.clock_skew)


class _Refused(Exception):
    def __init__(self, status: int, outcome: str, text: str) -> None:
        super().__init__(text)
        self.status, self.outcome = status, outcome


class Receiver:
    """Serve `POST /v1/traces`; every decoded request goes to `sink` on the event loop."""

    def __init__(self, sink: Sink, web_config: WebConfig, settings: Settings | None = None,
                 keep_raw: bool = False, decoder: Decoder | None = None) -> None:
        self._sink, self._web, self.settings = sink, web_config, settings or Settings()
        s = self.settings
        self._own_decoder = decoder is None  # a shared one (tests) is started and stopped by its owner
        self.decoder = decoder or Decoder(BodyLimits(s.max_body_bytes, s.max_decompression_ratio), keep_raw)
        self.guard = Guard(Limits(s.max_connections, s.header_timeout, 60.0, s.body_timeout), "otlp")
        self.requests: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        self.inflight = 0  # body bytes read and not yet decoded
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def _traces(self, request: web.Request) -> web.Response:
        json_body = request.content_type == JSON
        try:
            await self._admit(request)
            decoded = await self._decode(request, json_body)
        except _Refused as exc:
            self.requests[exc.outcome] += 1
            headers = {"WWW-Authenticate": 'Basic realm="sloguard"'} if exc.status == 401 else \
                {"Retry-After": "1"} if exc.status == 503 else {}
            refused = web.Response(status=exc.status, text=f"{exc}\n", headers=headers)
            refused.force_close()  # what is left of the body is not read (no lingering on a refused one)
            return refused
        self.requests["ok"] += 1
        for reason, n in decoded.invalid.items():
            reject("otlp", reason, "span", n)
        if decoded.unforwarded:
            reject("otlp", "too_large_to_forward", "span kept for the join, not forwarded", decoded.unforwarded)
        await self._deliver(decoded)
        rejected = decoded.malformed
        message = f"{rejected} spans invalid: " + ", ".join(sorted(decoded.invalid)) if rejected else ""
        if json_body:
            body = {"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message}} if rejected else {}
            return web.json_response(body)
        return web.Response(body=response(rejected, message), content_type=PROTOBUF)

    async def _deliver(self, decoded: Decoded) -> None:
        """Hand the spans to the sink SINK_BATCH at a time, letting the loop run between batches."""
        spans = decoded.spans
        decoded.spans = spans[:SINK_BATCH]
        self._sink(decoded)
        for i in range(SINK_BATCH, len(spans), SINK_BATCH):
            await asyncio.sleep(0)
            self._sink(Decoded(spans[i:i + SINK_BATCH]))

    async def _admit(self, request: web.Request) -> None:
        if self._web.auth_required:
            ok = await self._web.auth.allowed(request.headers.get("Authorization"))
            if ok is None:
                raise _Refused(503, "busy", "too many authentication attempts at once; retry")
            if not ok:
                raise _Refused(401, "unauthorized", "unauthorized")
        if request.content_type not in (PROTOBUF, JSON):
            raise _Refused(415, "unsupported", f"Content-Type must be {PROTOBUF} or {JSON}")
        if request.headers.get("Content-Encoding", "").strip().lower() not in ENCODINGS:
            raise _Refused(415, "unsupported", "Content-Encoding must be gzip, deflate or none")
        if (request.content_length or 0) > self.settings.max_body_bytes:
            raise _Refused(413, "too_large", f"body over {self.settings.max_body_bytes} bytes")

    async def _decode(self, request: web.Request, json_body: bool) -> Decoded:
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        window = Window(time.time_ns(), int(self.settings.clock_skew * 1e9))
        body = bytearray()
        try:
            async with asyncio.timeout(self.settings.body_timeout):
                async for chunk in request.content.iter_chunked(256 * 1024):
                    self._reserve(len(chunk))
                    body += chunk
                    if len(body) > self.settings.max_body_bytes:
                        raise _Refused(413, "too_large", f"body over {self.settings.max_body_bytes} bytes")
            return await self.decoder.decode(bytes(body), encoding, json_body, window)
        except TimeoutError:
            raise _Refused(408, "timeout", f"body not received within {self.settings.body_timeout:g}s") from None
        except ConnectionError:  # the sender went away mid-body: counted, never a logged traceback
            raise _Refused(400, "aborted", "connection lost") from None
        except TooLarge as exc:
            raise _Refused(413, "too_large", str(exc)) from None
        except MalformedRequest as exc:
            raise _Refused(400, "malformed", f"malformed: {exc}"[:300]) from None
        except Busy as exc:
            raise _Refused(503, "busy", str(exc)) from None
        finally:
            self.inflight -= len(body)

    def _reserve(self, n: int) -> None:
        if self.inflight + n > 2 * self.settings.max_body_bytes:
            raise _Refused(503, "busy", "too many bodies in flight; retry")
        self.inflight += n

    def app(self) -> web.Application:
        """Return the aiohttp application (one route)."""
        app = web.Application(middlewares=[self.guard.middleware])
        app.router.add_post("/v1/traces", self._traces)
        return app

    async def start(self, listen: str) -> int:
        """Start listening; return the bound port (port 0 picks a free one). Raise ListenError."""
        if self._own_decoder:
            self.decoder.start()
        self._runner, self.port = await start_site(self.app(), self.guard, self._web, listen,
                                                   auto_decompress=False)
        return self.port

    async def stop(self) -> None:
        """Stop listening and stop the decoder process."""
        if self._runner is not None:
            await self._runner.cleanup()
        if self._own_decoder:
            self.decoder.close()


__all__ = ["MalformedRequest", "Receiver", "Settings"]
