"""Kernel receipt stamps of the simulator's requests (sloguard.sim.receipt): causal bounds, no timing claims."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
from typing import Any

import pytest
from aiohttp import web

from sloguard.sim import receipt

REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"


async def _app_site() -> tuple[web.AppRunner, int]:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"received": request[receipt.RECEIVED],
                                  "handler": asyncio.get_running_loop().time()})
    app = web.Application(middlewares=[receipt.middleware])
    app.router.add_get("/", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = receipt.Site(runner, "127.0.0.1", 0)
    await site.start()
    return runner, int(runner.addresses[0][1])


async def _answer(reader: asyncio.StreamReader) -> dict[str, Any]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
    doc: dict[str, Any] = json.loads(await reader.readexactly(length))
    return doc


def _hold_the_loop() -> None:
    """Keep this thread (and so the loop) busy without sleeping: a request arriving now waits for its handler."""
    hashlib.sha256(b"x" * 20_000_000).digest()


def test_the_stamp_is_when_the_bytes_arrived_not_when_the_loop_got_to_them() -> None:
    async def run() -> tuple[float, float, float, dict[str, Any]]:
        runner, port = await _app_site()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            loop = asyncio.get_running_loop()
            before = loop.time()
            writer.write(REQUEST)  # the send happens here (an empty buffer is written at once)
            sent = loop.time()
            _hold_the_loop()
            held = loop.time()
            got = await _answer(reader)
            writer.close()
            return before, sent, held, got
        finally:
            await runner.cleanup()
    before, sent, held, got = asyncio.run(run())
    assert got["received"] is not None and before <= got["received"] <= sent  # stamped inside the send
    assert got["handler"] >= held  # the handler ran only once the loop was free
    assert got["handler"] - got["received"] >= held - sent  # so the wait it reports holds the loop's delay


def test_each_request_on_a_kept_alive_connection_has_its_own_stamp() -> None:
    async def run() -> list[tuple[float, dict[str, Any]]]:
        runner, port = await _app_site()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            out = []
            for _ in range(3):
                before = asyncio.get_running_loop().time()
                writer.write(REQUEST)
                out.append((before, await _answer(reader)))
                _hold_the_loop()  # time passes between requests: a stale stamp would be older than `before`
            writer.close()
            return out
        finally:
            await runner.cleanup()
    for before, got in asyncio.run(run()):
        assert got["received"] is not None and before <= got["received"] <= got["handler"], (before, got)


def test_without_kernel_stamps_the_receipt_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLOGUARD_KERNEL_STAMPS", "0")

    async def run() -> dict[str, Any]:
        runner, port = await _app_site()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(REQUEST)
            got = await _answer(reader)
            writer.close()
            return got
        finally:
            await runner.cleanup()
    assert asyncio.run(run())["received"] is None


def test_the_simulator_reports_what_happened_outside_its_ttft() -> None:
    """A streamed chat request: its record holds the front wait, the head's and each token chunk's write."""
    from sloguard.sim.completion import SIM_KEY
    from sloguard.sim.server import start

    body = json.dumps({"model": "sim-llama-3-8b", "stream": True, "max_tokens": 4,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    async def run() -> tuple[float, float, dict[str, Any]]:
        runner, port = await start("127.0.0.1", 0, seed=1, background_rps=0.0)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            sent = time.monotonic()
            _hold_the_loop()
            held = time.monotonic()
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readuntil(b"data: [DONE]")
            writer.close()
            rid = next(h.split(b": ")[1] for h in head.split(b"\r\n") if h.startswith(b"x-sim-request-id")).decode()
            record = runner.app[SIM_KEY].request_json(rid)
            assert record is not None
            return sent, held, record
        finally:
            await runner.cleanup()
    sent, held, rec = asyncio.run(run())
    assert rec["front_s"] >= held - sent  # the loop was busy while the request waited in the socket
    (head_lo, head_hi), chunks = rec["head_sent_s"], rec["chunks_sent_s"]
    assert 0 <= head_lo <= head_hi <= chunks[0][0] and 1 <= len(chunks) <= rec["output_tokens"]
    assert rec["first_token_s"] <= chunks[0][0] <= chunks[0][1]  # a token is written after the engine made it
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(chunks))  # in order, one after another
