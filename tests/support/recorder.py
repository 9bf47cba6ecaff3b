"""A forwarding HTTP proxy that keeps every body it relayed: what a client (`sloguard status`) was served, exactly."""

from __future__ import annotations

import threading

import aiohttp
from aiohttp import web

from support.threadserver import ThreadServer


class Recorder(ThreadServer):
    """Relay GETs to `upstream` and keep (path, status, body) of each answer, in order."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self._lock = threading.Lock()
        self._seen: list[tuple[str, int, bytes]] = []
        super().__init__(self._app)

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._relay)
        return app

    async def _relay(self, request: web.Request) -> web.Response:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session, \
                session.get(self.upstream + request.path_qs) as upstream:
            body = await upstream.read()
            with self._lock:
                self._seen.append((request.path, upstream.status, body))
            return web.Response(status=upstream.status, body=body, content_type=upstream.content_type)

    def bodies(self, path: str) -> list[bytes]:
        """Return the bodies of the 200 answers relayed for `path`, oldest first."""
        with self._lock:
            return [body for p, status, body in self._seen if p == path and status == 200]
