"""The simulator's unhappy paths: a client going away, and a prompt over the context length (with faults).

`release` runs when a request handler ends for any reason. Normally a client that went away cancels its
request, which leaves the batch when the step in flight ends (sloguard.sim.engine); with the fault
`leak_on_cancel` it keeps its slot and generates its full length for nobody, finishing `length`, as the
seed's incident did. `oversized` answers a ContextOverflow as the `oversized_prompt` fault says.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

from aiohttp import web

from sloguard.sim import wire
from sloguard.sim.engine import SimRequest

if TYPE_CHECKING:
    from sloguard.sim.simulator import Simulator


def release(sim: Simulator, req: SimRequest) -> None:
    """The handler of `req` ended: cancel what is still going, or leak it under `leak_on_cancel`."""
    if req.finished is not None or req.cancelled is not None:
        return
    if sim.faults.leak_on_cancel:
        req.sink = None  # nobody reads it any more; the engine keeps generating to its target length
        return
    sim.scheduler.cancel(req)


async def oversized(request: web.Request, sim: Simulator,
                    exc: wire.ContextOverflow) -> web.StreamResponse | wire.GenParams:
    """Answer a request over the context length: 400 (after the reject delay), a hang, or truncated params."""
    mode = sim.faults.oversized_prompt
    if mode == "truncate":  # keep the prompt's tail that fits, say nothing (usage shows the cut count)
        return replace(exc.params, prompt_tokens=max(1, exc.max_model_len - exc.params.max_tokens))
    if mode == "hang":
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        await sim.scheduler.closing.wait()  # cancelled by aiohttp when the client goes away
        return resp
    if sim.faults.oversized_reject_delay_s > 0:
        await asyncio.sleep(sim.faults.oversized_reject_delay_s)
    return web.json_response(wire.error_body(str(exc), 400, "BadRequestError"), status=400)
