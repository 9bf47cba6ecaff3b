"""Arrival stamps: taken in data_received through aiohttp's real parser, cut per read, independent of scheduling.

These tests fail if an aiohttp upgrade stops calling the hook (or feeds the body outside data_received).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.client_proto import ResponseHandler

from sloguard.probes.arrival import Arrivals, Slicer, StampedResponse, install
from sloguard.probes.sse import split
from sloguard.probes.stream import READ_BUFSIZE, fetch, make_session

EV = [b'data: {"choices":[{"delta":{"content":"%d"}}]}\n\n' % i for i in range(4)]
CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
CLOSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def chunk(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(body), body)


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def counter(step: int = 1000) -> Callable[[], int]:
    """Return an injected clock 1000, 2000, ...: stamps name the read that took them."""
    it = itertools.count(step, step)
    return lambda: next(it)


async def parse(reads: list[bytes]) -> tuple[Arrivals, list[tuple[int, bytes]], Slicer]:
    """Feed raw reads through aiohttp's ResponseHandler, then read the body in one readany()."""
    proto = ResponseHandler(asyncio.get_running_loop())
    proto.connection_made(FakeTransport())
    proto.set_response_params(read_until_eof=True, auto_decompress=False)
    log = install(proto, counter())
    assert install(proto) is log  # idempotent: one wrapper per connection
    for data in reads:
        proto.data_received(data)
    _, payload = await proto.read()
    proto.connection_lost(None)
    assert log.payload is payload
    body, out, slicer = await payload.read(), list[tuple[int, bytes]](), Slicer(log.marks)
    slicer.cut(body, 999_999, out)
    return log, out, slicer


def events_of(pieces: list[tuple[int, bytes]]) -> list[int]:
    return [e.t_ns for e in split(pieces)[0]]


@pytest.mark.parametrize("head", [CHUNKED, CLOSE])
def test_each_read_stamped_at_feed_time_through_aiohttp_parser(head: bytes) -> None:
    frame = chunk if head is CHUNKED else (lambda b: b)
    whole = b"".join(frame(e) for e in EV) + (b"0\r\n\r\n" if head is CHUNKED else b"")
    # read 1: headers + event 0; read 2: event 1 split; read 3: rest of 1 + 2 + 3 packed (+ terminator)
    cut1, cut2 = len(frame(EV[0])), len(frame(EV[0])) + 20
    log, pieces, slicer = asyncio.run(parse([head + whole[:cut1], whole[cut1:cut2], whole[cut2:]]))
    assert [t for t, _ in log.marks] == [1000, 2000, 3000]
    assert [t for t, _ in pieces] == [1000, 2000, 3000] and slicer.late == 0
    assert b"".join(p for _, p in pieces) == b"".join(EV)
    assert events_of(pieces) == [1000, 3000, 3000, 3000]  # split event: the read that completed it


def test_bytes_aiohttp_held_back_keep_the_stamp_of_the_read_that_brought_them() -> None:
    """A read of more tiny chunks than aiohttp buffers is parsed in parts, as the body is read: one stamp for all."""
    async def scenario() -> tuple[Arrivals, bytes]:
        proto = ResponseHandler(asyncio.get_running_loop())
        proto.connection_made(FakeTransport())
        proto.set_response_params(read_until_eof=True, auto_decompress=False, read_bufsize=READ_BUFSIZE)
        log = install(proto, counter())
        proto.data_received(CHUNKED + chunk(b":\n\n") * 2000 + b"0\r\n\r\n")  # one read: stamp 1000
        _, payload = await proto.read()
        body = b""
        while not payload.at_eof():
            body += await payload.readany()  # each read lets aiohttp parse more of what it held back
        return log, body

    log, body = asyncio.run(scenario())
    assert body == b":\n\n" * 2000
    assert len(log.marks) > 1 and {t for t, _ in log.marks} == {1000}  # parsed in parts, all stamped 1000


def test_slicer_cuts_joined_reads_and_counts_unseen_bytes() -> None:
    marks = [(10, 5), (20, 8), (30, 12)]
    out: list[tuple[int, bytes]] = []
    s = Slicer(marks)
    s.cut(b"abc", 99, out)  # part of read 1
    s.cut(b"defghij", 99, out)  # rest of read 1, read 2, part of read 3
    s.cut(b"klmn", 77, out)  # rest of read 3, then 2 bytes the hook never saw
    assert out == [(10, b"abc"), (10, b"de"), (20, b"fgh"), (30, b"ij"), (30, b"kl"), (77, b"mn")]
    assert s.late == 1
    empty: list[tuple[int, bytes]] = []
    Slicer(()).cut(b"x", 5, empty)
    assert empty == [(5, b"x")]


def test_new_response_on_same_connection_starts_new_marks() -> None:
    class Body:
        total_bytes = 0

    log, first, second = Arrivals(), Body(), Body()
    first.total_bytes = 7
    log.record(1, first)
    kept = log.marks
    log.record(2, None)  # a read with no new body bytes (e.g. after release) adds nothing
    second.total_bytes = 3
    log.record(3, second)
    assert kept == [(1, 7)] and log.marks == [(3, 3)] and log.payload is second


async def serve_and_fetch(gap: float, seen: list[tuple[int, bytes, int]]) -> Any:
    """Fetch through the arrival hook; `seen` gets (stamp, bytes, when the sink ran) per piece."""
    async def sink(t_ns: int, data: bytes) -> None:
        seen.append((t_ns, data, time.perf_counter_ns()))

    async def handle(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for e in [*EV, b"data: [DONE]\n\n"]:
            await resp.write(e)
            await asyncio.sleep(gap)
        return resp

    app = web.Application()
    app.add_routes([web.post("/s", handle)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        async with make_session() as session:
            return await fetch(session, f"http://127.0.0.1:{runner.addresses[0][1]}/s", {}, {}, 5.0, sink)
    finally:
        await runner.cleanup()


def test_stamp_independent_of_reader_wakeup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Block the loop 30 ms after every read, before the reader resumes: stamps must precede the block."""
    hook_stamps: list[int] = []

    def clock() -> int:
        hook_stamps.append(time.perf_counter_ns())
        asyncio.get_running_loop().call_soon(time.sleep, 0.03)  # runs before the reader's wake-up
        return hook_stamps[-1]

    monkeypatch.setattr(StampedResponse, "clock", staticmethod(clock))
    seen: list[tuple[int, bytes, int]] = []
    f = asyncio.run(serve_and_fetch(0.05, seen))
    assert f.error is None and f.late == 0 and len(seen) >= len(EV)
    assert {t for t, _, _ in seen} <= set(hook_stamps)
    assert all(resumed - t >= 25_000_000 for t, _, resumed in seen)


def test_loopback_body_fully_covered_by_hook() -> None:
    seen: list[tuple[int, bytes, int]] = []
    f = asyncio.run(serve_and_fetch(0.0, seen))
    assert f.error is None and f.late == 0
    assert b"".join(d for _, d, _ in seen) == b"".join([*EV, b"data: [DONE]\n\n"])
