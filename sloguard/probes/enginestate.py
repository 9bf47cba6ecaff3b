"""Read the engine's own request signals from its /metrics in the probe process, for the abort check.

Only the lines of the families that matter (running gauge, finished and abort counters of the target's
engine map) are parsed, so a poll every 100 ms costs little of the probe loop (a vLLM page: ~40 of 700
lines). The engine is detected from the first full page when the target says `auto`.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp

from sloguard.probes.checks import ABORT_REASONS, EngineState
from sloguard.sources.engines import ENGINES, detect_engine, normalise
from sloguard.sources.engines.schema import EngineMap
from sloguard.sources.parse import ParseError, parse_text

MAX_BYTES = 16 * 1024 * 1024


class CheckError(Exception):
    """The check could not be made (the reason is the probe result's error)."""


def families(emap: EngineMap) -> tuple[str, ...]:
    """Return the exposition name prefixes of an engine's running gauge, finished and abort counters."""
    aliases = (*emap.gauges.get("requests_running", ()), *emap.finished, *emap.counters.get("requests_aborted", ()))
    return tuple(sorted({name for a in aliases for name in (a.family, a.other) if name}))


def state(text: str, engine: str) -> EngineState:
    """Return running and aborted requests summed over the page's models (pure)."""
    view = normalise(parse_text(text), engine, "", time.time())
    running = [mv.gauges["requests_running"] for mv in view.models.values() if "requests_running" in mv.gauges]
    aborted = [sum(mv.finished_by_reason.get(r, 0.0) for r in ABORT_REASONS) + mv.counters.get("requests_aborted", 0.0)
               for mv in view.models.values()
               if any(r in mv.finished_by_reason for r in ABORT_REASONS) or "requests_aborted" in mv.counters]
    return EngineState(sum(running) if running else None, sum(aborted) if aborted else None)


async def read_capped(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """Return the whole body (`content.read(n)` may return only the first chunk); CheckError beyond `limit`."""
    parts, size = [], 0
    async for data in resp.content.iter_any():
        size += len(data)
        if size > limit:
            raise CheckError(f"response larger than {limit} bytes")
        parts.append(data)
    return b"".join(parts)


class EngineReader:
    """GET the target's /metrics and read its request signals; raise CheckError when that is not possible."""

    def __init__(self, url: str, engine: str, api_key: str | None) -> None:
        self.url, self.engine, self._headers = url, engine, {"Accept": "text/plain", "Accept-Encoding": "identity"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._prefixes: tuple[str, ...] | None = None

    async def read(self, session: aiohttp.ClientSession, timeout: float = 5.0) -> EngineState:
        """Return the engine's state now (one GET)."""
        if not self.url:
            raise CheckError("no engine signal: the target has no metrics_url")
        try:
            async with asyncio.timeout(timeout), session.get(self.url, headers=self._headers,
                                                             allow_redirects=False) as resp:
                if resp.status != 200:
                    raise CheckError(f"metrics: http {resp.status}")
                body = await read_capped(resp, MAX_BYTES)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise CheckError(f"metrics: {type(exc).__name__}: {exc}") from None
        return self._parse(body.decode("utf-8", "replace"))

    def _parse(self, text: str) -> EngineState:
        if self.engine in ("auto", "openai"):
            found = detect_engine(parse_text(text))
            if found is None:
                raise CheckError("no engine signal: /metrics names no known engine")
            self.engine = found
        if self._prefixes is None:
            self._prefixes = families(ENGINES[self.engine])
        kept = "\n".join(line for line in text.splitlines() if line.startswith(self._prefixes))
        try:
            got = state(kept, self.engine)
        except ParseError as exc:
            raise CheckError(f"metrics: {exc}") from None
        if not got.readable:
            raise CheckError(f"no engine signal: {self.engine}'s /metrics shows no running gauge or abort counter")
        return got

