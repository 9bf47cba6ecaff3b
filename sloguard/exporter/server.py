"""HTTP surface: /metrics from the cached snapshot, health, readiness, reload, JSON APIs, landing page."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from aiohttp import web

from sloguard import __version__
from sloguard.exporter import landing
from sloguard.snapshot import Snapshot
from sloguard.web.guard import Guard, Limits
from sloguard.web.site import start_site
from sloguard.web.webconfig import WebConfig

log = logging.getLogger("sloguard.exporter")
CONTENT_TYPE_TEXT = "text/plain; version=0.0.4; charset=utf-8"
CONTENT_TYPE_OM = "application/openmetrics-text; version=1.0.0; charset=utf-8"
JSONProvider = Callable[[], Any]
QueryProvider = Callable[[Mapping[str, str]], Any]  # gets the query string; ValueError -> 400

@dataclass
class Endpoints:
    """What the HTTP layer reads; the daemon fills it and swaps the providers on reload."""

    snapshot: Snapshot
    reload: Callable[[], Awaitable[bool]]
    ready: Callable[[], bool]
    json_providers: dict[str, JSONProvider] = field(default_factory=dict)
    # Why the daemon runs degraded ("" when it does not): /-/ready stays 200 and says so (see README).
    degraded: Callable[[], str] = field(default=lambda: "")
    query_providers: dict[str, QueryProvider] = field(default_factory=dict)  # paginated ones (/debug/probes)
    # A store slice as JSON lines for `sloguard report --daemon` (sloguard.reports.storeslice.stream): called
    # with the slice and a row limit, it checks and counts (raising for a bad or too large slice) and returns
    # an iterator that reads the store as it is advanced.
    results: Callable[[str, int], Iterator[str]] | None = None
    # POST /-/reload without credentials (--web.enable-lifecycle); with basic auth or client certificates on,
    # the web config decides who may reload.
    lifecycle: bool = False
    max_rows: int = 1_000_000


LIFECYCLE_OFF = ("Lifecycle API is not enabled: start with --web.enable-lifecycle, or require credentials in "
                 "--web.config.file (basic_auth_users or verified client certificates); SIGHUP reloads too.\n")
BATCH = 1000  # result lines per write


def _wants_openmetrics(request: web.Request) -> bool:
    return "application/openmetrics-text" in request.headers.get("Accept", "")


class _Renders:
    """Render the exposition in a worker thread, one render per snapshot version and format at a time.

    A render of ~7k samples took 0.5-1.4 s of a starved core: on the event loop it stalled probes' timers and
    sources for as long, and each timed-out scrape queued another render beside it.
    """

    def __init__(self) -> None:
        self._running: dict[bool, tuple[Snapshot, int, asyncio.Future[bytes]]] = {}

    async def body(self, snapshot: Snapshot, om: bool) -> bytes:
        cached = snapshot.cached(om)
        if cached is not None:
            return cached
        running = self._running.get(om)
        if running is None or running[0] is not snapshot or running[1] != snapshot.version:
            future = asyncio.ensure_future(asyncio.to_thread(snapshot.render, om))
            running = self._running[om] = (snapshot, snapshot.version, future)
        return await asyncio.shield(running[2])  # a scrape that gives up leaves the render to the next one


class _Handlers:
    """Request handlers over the daemon's Endpoints; none of them does source I/O."""

    def __init__(self, ep: Endpoints, web_config: WebConfig) -> None:
        self.ep, self.web_config = ep, web_config
        self.renders = _Renders()

    @web.middleware
    async def auth(self, request: web.Request,
                   handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if self.web_config.auth_required:
            ok = await self.web_config.auth.allowed(request.headers.get("Authorization"))
            if ok is None:
                return web.Response(status=503, text="too many authentication attempts at once; retry\n",
                                    headers={"Retry-After": "1"})
            if not ok:
                # Same answer for unknown users and wrong passwords: nothing to learn about who exists.
                return web.Response(status=401, text="Unauthorized\n",
                                    headers={"WWW-Authenticate": 'Basic realm="sloguard"'})
        response = await handler(request)
        response.headers.update(self.web_config.headers)
        return response

    async def metrics(self, request: web.Request) -> web.Response:
        om = _wants_openmetrics(request)
        body = await self.renders.body(self.ep.snapshot, om)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_OM if om else CONTENT_TYPE_TEXT})

    async def healthy(self, _: web.Request) -> web.Response:
        return web.Response(text="sloguard is healthy.\n")

    async def ready(self, _: web.Request) -> web.Response:
        if self.ep.ready():
            degraded = self.ep.degraded()
            return web.Response(text=f"sloguard is ready (degraded: {degraded}).\n" if degraded
                                else "sloguard is ready.\n")
        return web.Response(status=503, text="sloguard is not ready: first evaluation pending.\n")

    async def reload(self, _: web.Request) -> web.Response:
        if not (self.ep.lifecycle or self.web_config.authenticates):
            return web.Response(status=403, text=LIFECYCLE_OFF)
        if await self.ep.reload():
            return web.Response(text="config reloaded\n")
        return web.Response(status=500, text="config reload failed: old config still active; see the log\n")

    async def landing(self, _: web.Request) -> web.Response:
        data = landing.gather(__version__, self.ep.ready(), self.ep.json_providers, self.ep.snapshot.samples())
        return web.Response(text=landing.render(data), content_type="text/html", charset="utf-8")

    async def results(self, request: web.Request) -> web.StreamResponse:
        """Stream `?slice=store:...` as JSON lines (at most `?limit=` rows); 400 with the reason for a bad slice."""
        spec = request.query.get("slice", "")
        if self.ep.results is None or not spec.startswith("store:"):
            return web.Response(status=400, text="give ?slice=store:... (see `sloguard report --help`)\n")
        try:
            limit = int(request.query.get("limit", self.ep.max_rows))
            if not 0 < limit <= self.ep.max_rows:
                raise ValueError
        except ValueError:
            return web.Response(status=400, text=f"limit: a whole number from 1 to {self.ep.max_rows}\n")
        fn = self.ep.results
        try:
            lines = await asyncio.to_thread(fn, spec, limit)
        except Exception as exc:  # a bad slice, too many rows or an unreadable store: say why, never a traceback
            return web.Response(status=400, text=f"{exc}\n")
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        try:
            await resp.prepare(request)
            while batch := await asyncio.to_thread(lambda: "".join(islice(lines, BATCH))):
                await resp.write(batch.encode())  # waits while the client is slower than the store
            await resp.write_eof()
        except ConnectionError:  # the reader went away: nothing to answer, nothing to log
            pass
        finally:
            close = getattr(lines, "close", None)
            if close is not None:
                await asyncio.to_thread(close)
        return resp

    def provider(self, name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            paged = self.ep.query_providers.get(name)
            fn = self.ep.json_providers.get(name)
            try:
                if paged is not None:
                    body = paged(request.query)
                elif fn is not None:
                    body = fn()
                else:
                    return web.json_response({"error": f"{name} not enabled"}, status=404)
            except ValueError as exc:
                return web.json_response({"error": str(exc)}, status=400)
            return web.Response(text=json.dumps(body, default=str, indent=1), content_type="application/json")
        return handler


def build_app(ep: Endpoints, web_config: WebConfig, guard: Guard | None = None) -> web.Application:
    """Return the aiohttp application; basic auth (bcrypt) guards every path when users are configured."""
    h = _Handlers(ep, web_config)
    app = web.Application(middlewares=[*([guard.middleware] if guard else []), h.auth])
    app.router.add_get("/", h.landing)
    app.router.add_get("/metrics", h.metrics)
    app.router.add_get("/-/healthy", h.healthy)
    app.router.add_get("/-/ready", h.ready)
    app.router.add_post("/-/reload", h.reload)
    app.router.add_put("/-/reload", h.reload)
    for name, path in (("slos", "/api/v1/slos"), ("probes", "/debug/probes"), ("alerts", "/debug/alerts"),
                       ("releases", "/api/v1/releases")):
        app.router.add_get(path, h.provider(name))
    app.router.add_get("/api/v1/results", h.results)
    return app


async def start_server(ep: Endpoints, web_config: WebConfig, listen: str, guard: Guard | None = None
                       ) -> tuple[web.AppRunner, int]:
    """Start serving; return the runner and the bound port (port 0 picks a free one); raise ListenError."""
    guard = guard or Guard(Limits(), "web")
    return await start_site(build_app(ep, web_config, guard), guard, web_config, listen)
