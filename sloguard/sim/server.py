"""aiohttp app of the simulated vLLM server: OpenAI API, vLLM `/metrics`, and `/sim/*` control routes.

Routes: `POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models`, `GET /health`,
`GET /metrics`, `GET /version`, `GET /sim/profile`, `GET|POST|DELETE /sim/faults`, `GET /sim/requests/{id}`
(a response id, or a client's trace id).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from sloguard.sim import completion, dcgm, receipt
from sloguard.sim.completion import SIM_KEY, error_response
from sloguard.sim.faults import garbage_body
from sloguard.sim.model import LatencyProfile
from sloguard.sim.profiles import render
from sloguard.sim.simulator import DEFAULT_BACKGROUND_RPS, DEFAULT_ENGINE_VERSION, DEFAULT_MODEL, Simulator

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SHUTDOWN_TIMEOUT_S = 1.0


async def _chat(request: web.Request) -> web.StreamResponse:
    return await completion.handle(request, "chat")


async def _completions(request: web.Request) -> web.StreamResponse:
    return await completion.handle(request, "completions")


async def _models(request: web.Request) -> web.Response:
    sim = request.app[SIM_KEY]
    card = {"id": sim.model, "object": "model", "created": sim.created, "owned_by": "vllm", "root": sim.model,
            "parent": None, "max_model_len": sim.max_model_len}
    return web.json_response({"object": "list", "data": [card]})


async def _version(request: web.Request) -> web.Response:
    """vLLM's `GET /version`: the engine version of a release (daemon identity, bench header)."""
    return web.json_response({"version": request.app[SIM_KEY].engine_version})


async def _health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def _metrics(request: web.Request) -> web.Response:
    sim = request.app[SIM_KEY]
    if sim.faults.garbage_metrics:
        body, ctype = garbage_body(sim.faults.garbage_metrics, sim.rng_faults)
        return web.Response(body=body, headers={"Content-Type": ctype})
    return web.Response(body=render(sim.engine_profile, sim.metrics.render()),
                        headers={"Content-Type": METRICS_CONTENT_TYPE})


async def _dcgm(request: web.Request) -> web.Response:
    sim = request.app[SIM_KEY]
    now = asyncio.get_running_loop().time()
    busy = sim.scheduler.busy_until(now)
    values = dcgm.readings(sim.gpu, now, busy, sim.faults.gpu_clock_ratio, sim.engine.kv_usage())
    return web.Response(body=dcgm.render(values), headers={"Content-Type": METRICS_CONTENT_TYPE})


async def _profile(request: web.Request) -> web.Response:
    return web.json_response(request.app[SIM_KEY].profile_json())


async def _faults(request: web.Request) -> web.Response:
    sim = request.app[SIM_KEY]
    if request.method == "DELETE":
        return web.json_response(sim.clear_faults().as_json())
    if request.method == "POST":
        try:
            sim.set_faults(await request.json())
        except (json.JSONDecodeError, ValueError) as exc:
            return error_response(str(exc), 400, "BadRequestError")
    return web.json_response(sim.faults.as_json())


async def _arrivals(request: web.Request) -> web.Response:
    return web.json_response(request.app[SIM_KEY].arrivals_json())


async def _request(request: web.Request) -> web.Response:
    found = request.app[SIM_KEY].request_json(request.match_info["rid"])
    if found is None:
        return error_response("unknown or expired request id", 404, "NotFoundError")
    return web.json_response(found)


def build_app(sim: Simulator) -> web.Application:
    """Return the app; its startup starts the simulator's loops and its cleanup stops them."""
    app = web.Application(middlewares=[receipt.middleware])
    app[SIM_KEY] = sim

    async def on_startup(_: web.Application) -> None:
        sim.start()

    async def on_shutdown(_: web.Application) -> None:
        sim.scheduler.close()

    async def on_cleanup(_: web.Application) -> None:
        await sim.stop()
        if sim.tracer is not None:
            sim.tracer.close()

    app.on_startup.append(on_startup)
    app.on_shutdown.append(on_shutdown)
    app.on_cleanup.append(on_cleanup)
    app.add_routes([
        web.post("/v1/chat/completions", _chat), web.post("/v1/completions", _completions),
        web.get("/v1/models", _models), web.get("/health", _health), web.get("/metrics", _metrics),
        web.get("/dcgm/metrics", _dcgm),
        web.get("/sim/profile", _profile), web.get("/sim/faults", _faults), web.post("/sim/faults", _faults),
        web.delete("/sim/faults", _faults), web.get("/sim/requests/{rid}", _request),
        web.get("/sim/arrivals", _arrivals),
    ])
    app.router.add_get("/version", _version)
    return app


def make_simulator(seed: int = 0, **opts: Any) -> Simulator:
    """Build a Simulator from options: model, background_rps, time_scale, and LatencyProfile fields."""
    model = str(opts.pop("model", None) or DEFAULT_MODEL)
    rps = float(opts.pop("background_rps", DEFAULT_BACKGROUND_RPS))
    scale = float(opts.pop("time_scale", 1.0))
    endpoint, delay_ms = opts.pop("otlp_traces_endpoint", None), int(opts.pop("otlp_schedule_delay_ms", 200))
    inband = bool(opts.pop("per_request_metrics", False))
    max_len, spec_tokens = opts.pop("max_model_len", None), int(opts.pop("spec_tokens", 0) or 0)
    opts_version = opts.pop("engine_version", None) or DEFAULT_ENGINE_VERSION
    engine_profile = str(opts.pop("engine_profile", None) or "vllm")
    profile = LatencyProfile(**{k: v for k, v in opts.items() if v is not None}).scaled(scale)
    sim = Simulator(seed=seed, model=model, profile=profile, background_rps=rps)
    sim.burner.slice_s *= scale
    sim.per_request_metrics = inband
    sim.engine_profile = engine_profile
    sim.engine_version = str(opts_version)
    if max_len:
        sim.max_model_len = int(max_len)
    if spec_tokens > 0:
        sim.enable_spec_decode(spec_tokens)
    if endpoint:
        from sloguard.sim.tracing import SimTracer

        sim.tracer = SimTracer(endpoint, delay_ms, model)
    return sim


async def start(host: str, port: int, seed: int = 0, replicas: int = 1,
                replica_faults: Sequence[tuple[int, dict[str, Any]]] = (), **opts: Any) -> tuple[web.AppRunner, int]:
    """Serve a new simulator on host:port (0 picks a free port); return the runner and the bound port.

    `replicas` > 1: that many simulators (seeds seed, seed+1, ...) behind a round-robin front (sim.replicas),
    each starting with the faults `replica_faults` names for its index.
    """
    if replicas > 1:
        from sloguard.sim.replicas import build_front

        sims = [make_simulator(seed + i, **dict(opts)) for i in range(replicas)]
        for index, faults in replica_faults:
            sims[index].set_faults(faults)
        app = build_front(sims, [build_app(sim) for sim in sims],
                          [web.get("/v1/models", _models), web.get("/version", _version)])
    else:
        app = build_app(make_simulator(seed, **opts))
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=SHUTDOWN_TIMEOUT_S,
                           access_log=None)
    await runner.setup()
    site = receipt.Site(runner, host, port)  # each request's kernel receipt stamped (sim.receipt)
    await site.start()
    return runner, int(runner.addresses[0][1])
