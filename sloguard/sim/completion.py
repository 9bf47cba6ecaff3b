"""`/v1/chat/completions` and `/v1/completions` handlers: faults, engine submission, SSE or JSON."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

from aiohttp import web

from sloguard.sim import unhappy, wire
from sloguard.sim.engine import CHUNKS_KEPT, SimRequest
from sloguard.sim.faults import roll
from sloguard.sim.profiles import HEAD_AT_SLOT_START, timings
from sloguard.sim.receipt import RECEIVED
from sloguard.sim.simulator import Simulator

SIM_KEY = web.AppKey("sim", Simulator)
TokenQueue = asyncio.Queue[tuple[int, str | None]]


def error_response(message: str, status: int, kind: str, headers: dict[str, str] | None = None) -> web.Response:
    """Return an OpenAI-style JSON error."""
    return web.json_response(wire.error_body(message, status, kind), status=status, headers=headers)


async def handle(request: web.Request, api: wire.Api, sim: Simulator | None = None) -> web.StreamResponse:
    """Serve one completion request (on `sim`, else the app's); client disconnect cancels it in the engine."""
    sim = sim or request.app[SIM_KEY]
    loop = asyncio.get_running_loop()
    delayed, received = loop.time(), request.get(RECEIVED)
    if sim.faults.network_delay_s > 0:  # the request is still on the wire: before arrival, outside server TTFT
        await asyncio.sleep(sim.faults.network_delay_s)
    arrival = loop.time()
    try:
        params = wire.parse(api, await request.json(), sim.model, sim.max_model_len)
    except wire.ContextOverflow as exc:
        answer = await unhappy.oversized(request, sim, exc)
        if isinstance(answer, web.StreamResponse):
            return answer
        params = answer
    except json.JSONDecodeError:
        return error_response("request body is not valid JSON", 400, "BadRequestError")
    except wire.BadRequest as exc:
        kind = "NotFoundError" if exc.status == 404 else "BadRequestError"
        return error_response(str(exc), exc.status, kind)
    faults = sim.faults
    if faults.hang:
        # Cancelled by aiohttp when the client goes away (handler_cancellation), so nothing leaks;
        # released at shutdown so the server stops at once.
        await sim.scheduler.closing.wait()
        return error_response("server shutting down", 503, "ServiceUnavailableError")
    if roll(faults.error_rate, sim.rng_faults):
        sim.metrics.errored()
        return error_response("injected fault: internal server error", 500, "InternalServerError")
    queue: TokenQueue = asyncio.Queue()
    req = sim.new_request(params, arrival, lambda n, fin: queue.put_nowait((n, fin)))
    req.network_delay_s, req.trace_id = arrival - delayed, _trace_id(request.headers.get("traceparent", ""))
    req.front_s = None if received is None else delayed - received
    midstream = params.stream and roll(faults.midstream_error_rate, sim.rng_faults)
    headers = {"x-sim-request-id": req.rid}
    try:
        await sim.scheduler.submit(req)
        if params.stream:
            return await _stream(request, sim, params, req, queue, midstream, headers)
        return await _collect(sim, params, req, queue, headers)
    except ConnectionResetError:
        # The client hung up between two writes (before aiohttp cancelled the handler): a disconnect, not a
        # server error; `release` below cancels the request (or leaks it under `leak_on_cancel`).
        return web.Response(status=499)
    finally:
        unhappy.release(sim, req)
        if sim.tracer is not None and req.finished == req.finish_reason:
            sim.tracer.emit(req, request.headers, loop.time(), arrival - delayed)


def _trace_id(traceparent: str) -> str:
    """Return the trace id of a W3C `traceparent` (version-traceid-parentid-flags), or ""."""
    parts = traceparent.strip().split("-")
    return parts[1].lower() if len(parts) == 4 and len(parts[1]) == 32 else ""


async def _next(queue: TokenQueue) -> tuple[int, str | None]:
    # Tokens that piled up while the writer was busy go out together, as a multi-token chunk does.
    n, finish = await queue.get()
    while finish is None and not queue.empty():
        more, finish = queue.get_nowait()
        n += more
    return n, finish


async def _stream(request: web.Request, sim: Simulator, p: wire.GenParams, req: SimRequest,
                  queue: TokenQueue, midstream: bool, headers: dict[str, str]) -> web.StreamResponse:
    resp = web.StreamResponse(headers={**headers, "Content-Type": "text/event-stream",
                                       "Cache-Control": "no-cache"})
    llama = sim.engine_profile == "llamacpp"
    if llama:  # llama-server closes the connection after each stream: every request opens a new one
        resp.headers["Connection"] = "close"
    if sim.engine_profile in HEAD_AT_SLOT_START:
        await _slot(req)
    clock = asyncio.get_running_loop().time
    before = clock()
    await resp.prepare(request)
    req.head_sent = (before, clock())
    text_rng = random.Random(f"{sim.seed}/{req.rid}")
    error_after = req.target_tokens // 2 if midstream else None
    sent = 0
    finish: str | None = None
    while finish is None:
        n, finish = await _next(queue)
        # Aborted (shutdown): end the stream without [DONE], as a dropped connection would; also when tokens that
        # piled up on a busy host arrive coalesced with the abort (they would otherwise end it "normally").
        if n == 0 or finish == "abort":
            return resp
        before = clock()
        if sent == 0 and p.api == "chat" and not llama:
            # vLLM sends the role-only chunk with the first output, not with the headers.
            await resp.write(wire.chunk(p, req.rid, sim.created, None, None))
        if error_after is not None and sent >= error_after:
            sim.scheduler.cancel(req, "error")
            await resp.write(wire.sse(wire.error_body("injected fault: mid-stream error", 500,
                                                      "InternalServerError")))
            await resp.write(wire.DONE)  # vLLM's serving_chat/serving_completion end an error with [DONE] too
            await resp.write_eof()
            return resp
        await resp.write(wire.chunk(p, req.rid, sim.created, wire.token_text(text_rng, n), finish))
        if len(req.chunks_sent) < CHUNKS_KEPT:
            req.chunks_sent.append((before, clock()))
        sent += n
    if llama:
        await resp.write(_llama_usage(p, req, sim.created, sent))
    elif p.include_usage:
        metrics = per_request_metrics(req) if sim.per_request_metrics else None
        await resp.write(wire.usage_chunk(p, req.rid, sim.created, sent, metrics))
    await resp.write(wire.DONE)
    await resp.write_eof()
    return resp


async def _slot(req: SimRequest) -> None:
    """Wait until a slot takes the request (llama-server sends its response head then)."""
    if req.scheduled is not None:
        return
    started = asyncio.Event()
    req.on_scheduled = started.set
    await started.wait()


def _llama_usage(p: wire.GenParams, req: SimRequest, created: int, sent: int) -> bytes:
    """Return llama-server's last event: `usage` (always) and its `timings` (prefill and decode, ms)."""
    prefill = (req.first_token - req.scheduled) * 1e3 if req.first_token and req.scheduled else 0.0
    decode = (req.last_token - req.first_token) * 1e3 if req.last_token and req.first_token else 0.0
    body = json.loads(wire.usage_chunk(p, req.rid, created, sent)[6:])
    body["timings"] = timings(req.prompt_tokens - req.cached_tokens, req.cached_tokens, prefill, sent, decode)
    return wire.sse(body)


def per_request_metrics(req: SimRequest) -> dict[str, float] | None:
    """Return vLLM's `--enable-per-request-metrics` object (ms): queue, scheduled → first token, generation."""
    if req.queued is None or req.scheduled is None or req.first_token is None or req.last_token is None:
        return None
    gen = req.last_token - req.first_token
    return {"time_to_first_token_ms": (req.first_token - req.scheduled) * 1e3, "generation_time_ms": gen * 1e3,
            "queue_time_ms": (req.scheduled - req.queued) * 1e3,
            **({"mean_itl_ms": gen * 1e3 / (req.generated - 1)} if req.generated > 1 else {}),
            "tokens_per_second": req.generated / max(req.last_token - req.scheduled, 1e-9)}


async def _collect(sim: Simulator, p: wire.GenParams, req: SimRequest, queue: TokenQueue,
                   headers: dict[str, str]) -> web.Response:
    total = 0
    finish: str | None = None
    while finish is None:
        n, finish = await _next(queue)
        total += n
    if finish == "abort":
        return error_response("server shutting down", 503, "ServiceUnavailableError", headers)
    text = wire.token_text(random.Random(f"{sim.seed}/{req.rid}"), total)
    body: dict[str, Any] = wire.full_response(p, req.rid, sim.created, text, finish, total)
    return web.json_response(body, headers=headers)
