"""The embedded OTLP/HTTP receiver: `POST /v1/traces` (protobuf, optionally gzip), the exporter's TLS/auth.

Engines point `--otlp-traces-endpoint` (with `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf`) or an
OpenTelemetry Collector's `otlphttp` exporter here. A body over `max_body_bytes` (before or after gzip) is
refused with 413, a body that is not protobuf with 400 (counted malformed); JSON-encoded OTLP gets 415.
gRPC is not served: it would add grpcio (a large native dependency) for what a Collector converts anyway.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable

from aiohttp import web

from sloguard.exporter.server import parse_listen
from sloguard.exporter.webconfig import WebConfig
from sloguard.traces.otlp import EMPTY_RESPONSE, Decoded, MalformedRequest, decode

log = logging.getLogger("sloguard.traces")
PROTOBUF = "application/x-protobuf"
Sink = Callable[[Decoded], None]


class _TooLarge(ValueError):
    pass


def _gunzip(body: bytes, limit: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(body, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        raise _TooLarge
    return out


class Receiver:
    """Serve `POST /v1/traces`; every decoded request goes to `sink` on the event loop."""

    def __init__(self, sink: Sink, web_config: WebConfig, max_body_bytes: int, keep_raw: bool = False) -> None:
        self._sink, self._web, self._limit, self._keep_raw = sink, web_config, max_body_bytes, keep_raw
        self.requests: dict[str, int] = {"ok": 0, "malformed": 0, "too_large": 0, "unauthorized": 0,
                                         "unsupported": 0}
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def _traces(self, request: web.Request) -> web.Response:
        if self._web.auth_required and not await asyncio.to_thread(
                self._web.check_header, request.headers.get("Authorization")):
            self.requests["unauthorized"] += 1
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="sloguard"'})
        if request.content_type != PROTOBUF:
            self.requests["unsupported"] += 1
            return web.Response(status=415, text="only application/x-protobuf OTLP is accepted\n")
        try:
            body = await request.content.read(self._limit + 1)
            if len(body) > self._limit:
                raise _TooLarge
            if request.headers.get("Content-Encoding", "").lower() == "gzip":
                body = _gunzip(body, self._limit)
            decoded = decode(body, self._keep_raw)
        except (_TooLarge, ValueError, zlib.error) as exc:
            kind = "too_large" if isinstance(exc, _TooLarge) else "malformed"
            self.requests[kind] += 1
            return web.Response(status=413 if kind == "too_large" else 400, text=f"{kind.replace('_', ' ')}\n")
        self.requests["ok"] += 1
        self._sink(decoded)
        return web.Response(body=EMPTY_RESPONSE, content_type=PROTOBUF)

    def app(self) -> web.Application:
        """Return the aiohttp application (one route)."""
        app = web.Application(client_max_size=self._limit + 1)
        app.router.add_post("/v1/traces", self._traces)
        return app

    async def start(self, listen: str) -> int:
        """Start listening; return the bound port (port 0 picks a free one)."""
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        host, port = parse_listen(listen)
        site = web.TCPSite(self._runner, host, port, ssl_context=self._web.ssl_context, reuse_address=True)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        return self.port

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()


__all__ = ["MalformedRequest", "Receiver"]
