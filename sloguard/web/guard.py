"""Listener hygiene for the web listener and the OTLP receiver: a connection cap and read deadlines.

As Go's http.Server with Prometheus's and the OpenTelemetry Collector's settings: a request head must arrive
whole within `header_timeout` of the connection opening (or of its first byte after an idle keep-alive spell);
an idle keep-alive connection closes after `idle_timeout`; a TLS handshake must finish within `header_timeout`;
at most `max_connections` are open at once (Prometheus's --web.max-connections, 512). At the cap a new
connection evicts the oldest one still sending its request head (a slowloris), else the oldest idle one, else
it is closed at once: a scraper that sends its head at once is never the one evicted. Deadlines for reading a
body belong to the handlers that read one (the receiver), since aiohttp reads bodies on demand.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client.metrics_core import Metric

from sloguard.families import declare

HEAD, REQUEST, IDLE = "head", "request", "idle"


@dataclass(frozen=True, slots=True)
class Limits:
    """How long a peer may take and how many connections it may hold."""

    max_connections: int = 512
    header_timeout: float = 10.0
    idle_timeout: float = 60.0
    body_timeout: float = 30.0


class _Conn(asyncio.Protocol):
    """One accepted connection: aiohttp's protocol inside, its state and deadline beside it."""

    def __init__(self, guard: Guard, inner: Any) -> None:
        self.guard, self.inner = guard, inner
        self.state, self.timer = HEAD, None  # type: str, asyncio.TimerHandle | None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if not self.guard.admit(self):
            transport.abort()
            return
        self.inner.connection_made(transport)
        self.arm()

    def arm(self) -> None:
        """Start the head deadline (a new request's first byte, or a new connection)."""
        self.state = HEAD
        self.disarm()
        self.timer = asyncio.get_running_loop().call_later(self.guard.limits.header_timeout, self.expire)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def expire(self) -> None:
        self.timer = None
        if self.state == HEAD and self.transport is not None:
            self.guard.counts["header_timeout"] += 1
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.state == IDLE:
            self.arm()
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        result: bool | None = self.inner.eof_received()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        self.guard.forget(self)
        if self.transport is not None and self.inner.transport is not None:
            self.inner.connection_lost(exc)
        self.transport = None

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


class Guard:
    """Track a listener's connections; give aiohttp a protocol factory and a middleware."""

    def __init__(self, limits: Limits, listener: str) -> None:
        self.limits, self.listener = limits, listener
        self._conns: OrderedDict[_Conn, None] = OrderedDict()  # oldest first
        self._by_inner: dict[int, _Conn] = {}
        self.counts = {"refused": 0, "evicted": 0, "header_timeout": 0}

    @property
    def open(self) -> int:
        """Return how many connections are open."""
        return len(self._conns)

    def factory(self, inner: Callable[[], Any]) -> Callable[[], asyncio.Protocol]:
        """Wrap aiohttp's protocol factory."""
        return lambda: _Conn(self, inner())

    def admit(self, conn: _Conn) -> bool:
        if len(self._conns) >= self.limits.max_connections:
            victim = self._oldest(HEAD) or self._oldest(IDLE)
            if victim is None:
                self.counts["refused"] += 1
                return False
            self.counts["evicted"] += 1
            assert victim.transport is not None
            victim.transport.abort()
            self.forget(victim)
        self._conns[conn] = None
        self._by_inner[id(conn.inner)] = conn
        return True

    def _oldest(self, state: str) -> _Conn | None:
        return next((c for c in self._conns if c.state == state), None)

    def forget(self, conn: _Conn) -> None:
        if self._conns.pop(conn, 0) is None:
            self._by_inner.pop(id(conn.inner), None)

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        """Mark the connection busy while a handler runs (its head arrived: no head deadline, never evicted)."""
        conn = self._by_inner.get(id(request.protocol))
        if conn is not None:
            conn.state = REQUEST
            conn.disarm()
        try:
            return await handler(request)
        finally:
            if conn is not None and conn.state == REQUEST:
                conn.state = IDLE


class GuardedSite(web.BaseSite):
    """A TCP site whose connections pass through a Guard (aiohttp's TCPSite with a wrapped protocol factory)."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, guard: Guard,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=512)
        self.host, self.requested, self.guard, self.port = host, port, guard, port

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self.host}:{self.port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        handshake = self.guard.limits.header_timeout if self._ssl_context else None
        listening = await asyncio.get_running_loop().create_server(
            self.guard.factory(server), self.host, self.requested, ssl=self._ssl_context, backlog=self._backlog,
            reuse_address=True, ssl_handshake_timeout=handshake)
        self._server = listening
        if listening.sockets:
            self.port = int(listening.sockets[0].getsockname()[1])


def runner_options(limits: Limits) -> dict[str, Any]:
    """Return the aiohttp server options that go with a Guard (idle keep-alive close, no lingering past it)."""
    return {"keepalive_timeout": limits.idle_timeout, "lingering_time": min(10.0, limits.header_timeout)}


OPEN = declare("sloguard_listener_connections", "gauge", "Connections open on each listener (web, otlp).",
               ("listener",))
DROPPED = declare("sloguard_listener_connections_dropped", "counter", "Connections closed by the listener: refused or "
                  "evicted at max_connections, or header_timeout (no whole request head in time).",
                  ("listener", "reason"))


def families(guards: list[Guard]) -> list[Metric]:
    """Return the listeners' open connections and the connections they closed early, by reason."""
    open_, dropped = OPEN.gauge(), DROPPED.counter()
    for g in guards:
        open_.add_metric([g.listener], g.open)
        for reason, n in sorted(g.counts.items()):
            dropped.add_metric([g.listener, reason], n)
    return [open_, dropped]
