"""Probes over real loopback HTTP: request shape, chunked and connection-close bodies, truncation, timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from sloguard.model import ProbeResult
from sloguard.outcome import outcome
from sloguard.probes import PROBES
from sloguard.probes.job import ProbeJob
from sloguard.probes.prefill import PREFILLED
from sloguard.probes.stream import make_session
from sloguard.probes.workload import Prompt
from tests.support import hostile_streams

CHAT_BODY = (b'data: {"choices":[{"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
             b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":null}]}\n\n'
             b'data: {"choices":[{"delta":{"content":"b"},"finish_reason":"stop"}]}\n\n'
             b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\n\ndata: [DONE]\n\n')
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def job(url: str, api: str = "chat", timeout: float = 5.0, **kw: Any) -> ProbeJob:
    return ProbeJob(name="p", target="t", api=api, url=url, model="m", timeout=timeout, **kw)


async def probe(j: ProbeJob) -> ProbeResult:
    async with make_session() as session:
        return await PROBES[j.api](session, j, Prompt("hello", 64, "short"))


async def with_app(routes: list[web.RouteDef], j: Callable[[str], ProbeJob]) -> ProbeResult:
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        return await probe(j(f"http://127.0.0.1:{runner.addresses[0][1]}"))
    finally:
        await runner.cleanup()


async def with_raw(handler: Handler, j: Callable[[str], ProbeJob]) -> ProbeResult:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        return await probe(j(f"http://127.0.0.1:{port}"))


def sse_handler(body: bytes, seen: dict[str, Any]) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        seen["path"], seen["json"], seen["headers"] = request.path, await request.json(), dict(request.headers)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for line in body.split(b"\n\n")[:-1]:
            await resp.write(line + b"\n\n")
        await resp.write_eof()
        return resp
    return handle


def test_chat_request_shape_and_result() -> None:
    seen: dict[str, Any] = {}
    r = asyncio.run(with_app([web.post("/v1/chat/completions", sse_handler(CHAT_BODY, seen))],
                             lambda u: job(u, api_key="sk-1", ignore_eos=True, max_tokens=7)))
    assert (r.ok, r.status_code, r.output_tokens, r.prompt_tokens, r.error) == (True, 200, 2, 9, None)
    assert r.ttft_s is not None and r.e2e_s is not None and 0 < r.ttft_s <= r.e2e_s
    assert r.connect_s is not None and r.connect_s >= 0
    body, headers = seen["json"], seen["headers"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert (body["model"], body["max_tokens"], body["ignore_eos"]) == ("m", 7, True)
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert headers["Authorization"] == "Bearer sk-1"
    assert headers["traceparent"] == f"00-{r.trace_id}-{headers['traceparent'][36:52]}-01"


@pytest.mark.parametrize(("api", "path", "body", "key"), [
    ("completions", "/v1/completions",
     b'data: {"choices":[{"text":"a","finish_reason":"stop"}],"usage":{"completion_tokens":1}}\n\n', "prompt"),
    ("tgi", "/generate_stream",
     b'data: {"token":{"text":"a","special":false},"generated_text":"a","details":{"generated_tokens":1}}\n\n',
     "inputs"),
    ("triton", "/v2/models/m/generate_stream", b'data: {"text_output":"a"}\n\n', "text_input"),
])
def test_other_apis(api: str, path: str, body: bytes, key: str) -> None:
    seen: dict[str, Any] = {}
    r = asyncio.run(with_app([web.post(path, sse_handler(body, seen))], lambda u: job(u, api=api)))
    assert (r.ok, r.error, seen["path"], seen["json"][key]) == (True, None, path, "hello")


def test_http_error_status() -> None:
    async def fail(_: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "nope"}}, status=503)
    r = asyncio.run(with_app([web.post("/v1/chat/completions", fail)], job))
    assert (r.ok, r.status_code) == (False, 503)
    assert r.error is not None and r.error.startswith("http 503: ")


async def _read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
    await reader.readexactly(length)


def test_non_chunked_connection_close_stream() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        for line in CHAT_BODY.split(b"\n\n")[:-1]:
            writer.write(line + b"\n\n")
            await writer.drain()
        writer.close()
    r = asyncio.run(with_raw(handle, job))
    assert (r.ok, r.output_tokens, r.error) == (True, 2, None)


def test_truncated_chunked_stream_is_an_error() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        event = CHAT_BODY.split(b"\n\n")[1] + b"\n\n"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        await writer.drain()
        writer.close()  # no terminating zero-length chunk
    r = asyncio.run(with_raw(handle, job))
    assert r.ok is False and r.error is not None
    assert r.ttft_s is not None  # what arrived is still measured
    assert r.elapsed_s is not None and r.elapsed_s >= r.ttft_s  # and how long it ran before it broke


def test_timeout_closes_the_connection() -> None:
    closed = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        if await reader.read() == b"":  # EOF: the client went away
            closed.set()

    async def scenario() -> ProbeResult:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        j = job(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", timeout=0.2)
        async with server, make_session() as session:
            r = await PROBES["chat"](session, j, Prompt("hello", 64, "short"))
            await asyncio.wait_for(closed.wait(), 10)  # while the session (and its pool) is still open
        return r
    r = asyncio.run(scenario())
    assert (r.ok, r.error, r.status_code) == (False, "timeout after 0.2s", 200)
    # censored at the time it ran: the timeout, less connection set-up (t0 is taken once connected)
    assert r.ttft_s is None and r.elapsed_s is not None and r.elapsed_s >= 0.15


async def _hostile(kind: str, timeout: float, n: int = 1, **kw: Any) -> tuple[list[ProbeResult], int]:
    server = await hostile_streams.serve()
    port = server.sockets[0].getsockname()[1]
    async with server, make_session() as session:
        j = job(f"http://127.0.0.1:{port}/{kind}", timeout=timeout, **kw)
        return [await PROBES["chat"](session, j, Prompt("hello", 64, "short")) for _ in range(n)], port


@pytest.mark.parametrize(("kind", "timeout", "status", "error", "kind_out"), [
    ("healthy", 5.0, 200, None, "success"),
    ("redirect", 5.0, 302, "redirect 302 to http://127.0.0.1:{port}/healthy/v1/chat/completions (query removed)",
     "redirect"),
    ("html", 5.0, 200, "not an event stream (text/html)", "error"),
    ("garbage", 5.0, 200, "not an event stream (application/octet-stream)", "error"),
    ("reset", 5.0, 200, "connection reset after", "error"),
    ("badchunk", 5.0, 200, "protocol error: Invalid character in chunk size", "error"),
    ("slowloris", 0.6, 200, "timeout after 0.6s", "timeout"),
    ("silent", 0.3, None, "timeout after 0.3s", "timeout"),
    ("flood", 5.0, 200, "event flood: more than 100 events", "event_flood"),
])
def test_hostile_streams(kind: str, timeout: float, status: int | None, error: str | None, kind_out: str) -> None:
    (r,), port = asyncio.run(_hostile(kind, timeout, max_events=100))
    assert (r.status_code, outcome(r)) == (status, kind_out), r.error
    if kind == "reset":  # two events arrived before the reset: their bytes are counted, their timings kept
        events = len(hostile_streams.stamped_event(0)) * 2
        assert r.error is not None and r.error.startswith(f"{error} ") and r.error.endswith(" bytes")
        assert abs(int(r.error.split()[3]) - events) <= 2 and r.ttft_s is not None
    else:
        assert r.error == (None if error is None else error.format(port=port))
    assert "hunter2" not in str(r.error) and "sk-leak" not in str(r.error)


def test_body_longer_than_content_length_keeps_the_status() -> None:
    (r,), _ = asyncio.run(_hostile("clen", 5.0))
    assert (r.ok, r.status_code) == (False, 200) and r.error is not None
    assert r.error.startswith(("protocol error", "truncated stream")), r.error


def test_a_server_closing_after_each_response_never_fails_the_next_probe() -> None:
    results, _ = asyncio.run(_hostile("llamaclose", 5.0, n=6))
    assert [(r.ok, r.error) for r in results] == [(True, None)] * 6


def test_first_token_reported_while_the_stream_runs() -> None:
    """The PREFILLED hook fires once, on the first output token, not on the role chunk, before the stream ends."""
    heard: list[tuple[str, int]] = []
    told = asyncio.Event()
    before: list[bool] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunks = CHAT_BODY.split(b"\n\n")[:-1]
        await resp.write(chunks[0] + b"\n\n")  # role only, empty content: the prefill may not have ended
        await asyncio.sleep(0.1)
        before.append(told.is_set())
        await resp.write(chunks[1] + b"\n\n")
        await asyncio.wait_for(told.wait(), 5.0)  # the hook must fire before the rest is sent
        for line in chunks[2:]:
            await resp.write(line + b"\n\n")
        await resp.write_eof()
        return resp

    def hook(trace_id: str, tokens: int) -> None:
        heard.append((trace_id, tokens))
        told.set()

    async def run() -> ProbeResult:
        PREFILLED.set(hook)
        return await with_app([web.post("/v1/chat/completions", handle)], job)

    r = asyncio.run(run())
    assert r.ok and before == [False] and heard == [(r.trace_id, 64)]


def test_first_token_reported_for_a_probe_cut_short() -> None:
    """A probe timed out after its first token has no usage chunk; the engine counted its prefill, the hook too."""
    heard: list[tuple[str, int]] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for line in CHAT_BODY.split(b"\n\n")[:2]:
            await resp.write(line + b"\n\n")
        await asyncio.sleep(1.0)  # stalls past the probe's timeout
        return resp

    async def run() -> ProbeResult:
        PREFILLED.set(lambda trace_id, tokens: heard.append((trace_id, tokens)))
        return await with_app([web.post("/v1/chat/completions", handle)], lambda u: job(u, timeout=0.5))

    r = asyncio.run(run())
    assert not r.ok and r.prompt_tokens is None and r.ttft_s is not None and heard == [(r.trace_id, 64)]
