"""When each request reached the simulator's host: the kernel's receive stamp, before any event-loop delay.

A busy host wakes the simulator's event loop late: a request's bytes can sit in the socket for tens of
milliseconds before its handler runs. That wait is outside the engine's TTFT, so a client rightly counts it
in the network/HTTP stage; the simulator reports it per request (`front_s` in `/sim/requests/{id}`) so a
test can hold the measured stage to all that happened, not to an injected delay alone. The stamp is
Linux's software receive stamp (sloguard.probes.rxstamp, on the loop's monotonic clock); where there is
none (another OS, `SLOGUARD_KERNEL_STAMPS=0`) the time is unknown (None), never guessed.

`Site` serves the app like aiohttp's TCPSite with every connection's protocol wrapped in a `Door`, which
remembers the stamp of the first read of each request; `middleware` hands it to the request as
`request[RECEIVED]` and forgets it when the request is done, so a kept-alive connection's next request
never inherits it (pipelined requests get None).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from sloguard.probes import rxstamp

# Kernel receive time of the request's first bytes (loop clock, seconds), or None where unknown.
RECEIVED: web.RequestKey[float | None] = web.RequestKey("received")
_DOORS: dict[asyncio.BaseTransport, Door] = {}


class Door(asyncio.Protocol):
    """Forward every call to aiohttp's protocol of one connection; remember the stamp of a request's first read."""

    def __init__(self, inner: asyncio.Protocol) -> None:
        self.inner = inner
        self.clock: rxstamp.RxClock | None = None
        self.transport: asyncio.BaseTransport | None = None
        self.first_ns = 0  # kernel stamp (perf_counter_ns clock) of the current request's first read; 0: none

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport, self.clock = transport, rxstamp.enable(transport)
        _DOORS[transport] = self
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            _DOORS.pop(self.transport, None)
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.first_ns and self.clock is not None:
            self.first_ns = self.clock.pending
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


@web.middleware
async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Give the request its receive stamp (RECEIVED); forget it once the request is answered."""
    door = _DOORS.get(request.transport) if request.transport is not None else None
    request[RECEIVED] = door.first_ns * 1e-9 if door is not None and door.first_ns else None
    try:
        response: web.StreamResponse = await handler(request)
        return response
    finally:
        if door is not None:
            door.first_ns = 0


class Site(web.BaseSite):
    """A TCP site (host, port; 0 picks a free one) whose connections stamp each request's arrival."""

    __slots__ = ("_host", "_port")

    def __init__(self, runner: web.BaseRunner, host: str, port: int) -> None:
        super().__init__(runner)
        self._host, self._port = host, port

    @property
    def name(self) -> str:
        """Return the URL the site serves."""
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        """Listen; every accepted connection's protocol is aiohttp's, wrapped in a Door."""
        await super().start()
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(lambda: Door(server()), self._host, self._port)
        for sock in self._server.sockets:  # stamped from the first byte, also before a busy loop accepts the connection
            rxstamp.enable_listener(sock)
        if self._server.sockets:
            self._port = int(self._server.sockets[0].getsockname()[1])
