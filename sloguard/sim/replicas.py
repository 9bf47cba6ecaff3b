"""Several simulated replicas behind one round-robin front: a service as a gateway and its engines see it.

The front (`/v1/chat/completions`, `/v1/completions`, `/v1/models`, `/health`, `/version`) sends each request to
the next replica in turn; replica i is also served whole under `/replicas/i/` (its own `/metrics`, `/sim/faults`,
`/v1/*`), so a fault can be injected into one replica (`POST /replicas/1/sim/faults`). `POST /sim/faults` on the
front applies to every replica.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from sloguard.sim import completion
from sloguard.sim.completion import SIM_KEY
from sloguard.sim.simulator import Simulator

REPLICAS_KEY = web.AppKey("replicas", list)


def parse_fault(value: str) -> tuple[int, dict[str, Any]]:
    """Parse `INDEX:JSON` (e.g. `1:{"gpu_clock_ratio": 0.3}`) into (index, faults); ValueError when malformed."""
    index, sep, body = value.partition(":")
    if not sep or not index.isdigit():
        raise ValueError(f"expected INDEX:JSON, got {value!r}")
    faults = json.loads(body)
    if not isinstance(faults, dict):
        raise ValueError("the faults must be a JSON object")
    return int(index), faults


def build_front(sims: Sequence[Simulator], sub_apps: Sequence[web.Application],
                shared: Sequence[web.RouteDef]) -> web.Application:
    """Return the front app over replicas `sims` (their apps mounted under /replicas/i/); `shared` routes answer
    from the first replica (model list, version: the replicas serve one model at one version)."""
    app = web.Application()
    app[REPLICAS_KEY] = list(sims)
    app[SIM_KEY] = sims[0]  # /v1/models, /version: the replicas serve one model at one version
    turn = itertools.cycle(range(len(sims)))

    async def _chat(request: web.Request) -> web.StreamResponse:
        return await completion.handle(request, "chat", sims[next(turn)])

    async def _completions(request: web.Request) -> web.StreamResponse:
        return await completion.handle(request, "completions", sims[next(turn)])

    async def _faults(request: web.Request) -> web.Response:
        if request.method == "DELETE":
            for sim in sims:
                sim.clear_faults()
        elif request.method == "POST":
            try:
                payload = await request.json()
                for sim in sims:
                    sim.set_faults(payload)
            except (json.JSONDecodeError, ValueError) as exc:
                return completion.error_response(str(exc), 400, "BadRequestError")
        return web.json_response([sim.faults.as_json() for sim in sims])

    async def _health(request: web.Request) -> web.Response:
        return web.Response(status=200)

    for i, sub in enumerate(sub_apps):
        app.add_subapp(f"/replicas/{i}/", sub)
    app.add_routes([*shared, web.post("/v1/chat/completions", _chat), web.post("/v1/completions", _completions),
                    web.get("/health", _health),
                    web.get("/sim/faults", _faults), web.post("/sim/faults", _faults),
                    web.delete("/sim/faults", _faults)])
    return app
