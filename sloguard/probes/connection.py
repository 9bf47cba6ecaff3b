"""Probe connections: reuse an idle keep-alive connection only if the server has not closed it.

llama.cpp's server answers `Keep-Alive: timeout=5` and then closes the socket right after each streamed
response; its FIN reaches the kernel before the next probe starts, but the event loop has not read it yet,
so aiohttp's pool (which checks only `transport.is_closing()`) would hand out the dead connection and the
request would fail ("Can not write request body"). Before each request the idle connections for its host
are peeked (`recv(MSG_PEEK | MSG_DONTWAIT)`, one syscall each): end of file, a reset, or unexpected bytes
on an idle connection close it, so the request opens a new one. Nothing is retried.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import aiohttp

from sloguard.probes.arrival import install, reset_status

SETTLE_S = 0.010  # a connection idle for less than this is not reused (its server may be about to close it)


def closed_by_peer(transport: Any) -> bool:
    """Return True if the peer closed or reset the connection, or sent bytes nobody asked for."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return False
    raw = socket.socket(fileno=sock.fileno())  # a view of the same descriptor; detached, never closed here
    try:
        raw.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return False  # open, nothing pending: reusable
    except OSError:
        return True
    finally:
        raw.detach()
    return True  # b"": the peer's FIN; data: a response nobody asked for


class FreshConnector(aiohttp.TCPConnector):
    """TCPConnector that drops pooled connections the server closed before reusing one (no retries).

    `settle_s`: a connection idle for less than this is not reused (SETTLE_S for probes; a load generator
    against a server that keeps connections alive passes 0, sloguard.bench).
    """

    def __init__(self, *args: Any, settle_s: float = SETTLE_S, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settle_s = settle_s

    async def connect(self, req: Any, traces: Any, timeout: Any) -> aiohttp.connector.Connection:
        """Close idle connections to `req`'s host that the server closed or may be closing, then connect."""
        now = time.monotonic()  # aiohttp stamps a released connection with it (3.9: loop.time(), the same clock)
        for proto, released in tuple(self._conns.get(req.connection_key, ())):
            if proto.is_connected() and (now - released < self.settle_s or closed_by_peer(proto.transport)):
                proto.close()
        conn = await super().connect(req, traces, timeout)
        reset_status(conn.protocol)
        if conn.protocol is not None:  # before the request is written: its writes are stamped (the probe's t0)
            install(conn.protocol, getattr(getattr(req, "response_class", None), "clock", time.perf_counter_ns))
        return conn
