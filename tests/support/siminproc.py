"""Serve a simulator in this process on a loopback port for the length of one async scenario."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from sloguard.sim.server import start

Scenario = Callable[[aiohttp.ClientSession, str], Awaitable[None]]
# Fast, jitter-free profile: prefill 10 ms + 0.1 ms/token, decode 5 ms + 0.5 ms/seq.
FAST = {"background_rps": 0.0, "jitter_sigma": 0.0, "prefill_base_s": 0.010, "prefill_per_token_s": 0.0001,
        "decode_base_s": 0.005, "decode_per_seq_s": 0.0005}


def run(scenario: Scenario, **opts: Any) -> None:
    """Start a simulator on port 0, run `scenario(session, base_url)`, always clean up."""
    async def main() -> None:
        runner, port = await start("127.0.0.1", 0, seed=7, **{**FAST, **opts})
        try:
            async with aiohttp.ClientSession() as session:
                await scenario(session, f"http://127.0.0.1:{port}")
        finally:
            await runner.cleanup()
    asyncio.run(main())
