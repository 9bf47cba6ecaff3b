"""http_sd: Prometheus's HTTP service discovery contract, as a client.

Every `refresh_interval`: GET the URL, expect 200 with `Content-Type: application/json` and a list of target
groups: the full list each time (an empty list removes every target). Any failure (connect, timeout, status,
content type, body over `max_body_bytes`, not JSON, too many targets) keeps the last good list and is counted
in sloguard_sd_http_failures_total and sloguard_sd_refresh_failures_total.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable

import aiohttp

from sloguard import __version__
from sloguard.config.fleet import DiscoverySpec
from sloguard.discovery import groups
from sloguard.discovery.groups import Target
from sloguard.discovery.metrics import SDStats
from sloguard.untrusted import Invalid

log = logging.getLogger("sloguard.discovery")
Publish = Callable[[list[Target]], None]


class RefreshError(Exception):
    """One failed refresh; the message is logged once per distinct reason."""


class HTTPSD:
    """Fetches one discovery's URL on its interval; publishes each good answer."""

    def __init__(self, spec: DiscoverySpec, publish: Publish, stats: SDStats, token: str | None = None) -> None:
        assert spec.http_sd is not None
        self.spec, self.sd, self.publish, self.stats, self._token = spec, spec.http_sd, publish, stats, token
        self._said: str | None = None

    async def run(self) -> None:
        """Refresh until cancelled."""
        async with aiohttp.ClientSession() as session:
            while True:
                await self.refresh(session)
                await asyncio.sleep(self.sd.refresh_interval)

    async def refresh(self, session: aiohttp.ClientSession) -> bool:
        """Fetch once; publish on success, keep the last good list on failure. Return success."""
        start = time.perf_counter()
        try:
            found = await self._fetch(session)
        except RefreshError as exc:
            self.stats.failures["http"] += 1
            self.stats.refreshed(time.perf_counter() - start, False, time.time())
            if str(exc) != self._said:
                log.warning("http_sd refresh failed; keeping the last good list",
                            extra={"discovery": self.spec.name, "error": str(exc), "kept": self.stats.discovered})
                self._said = str(exc)
            return False
        if self._said is not None:
            log.info("http_sd refresh recovered", extra={"discovery": self.spec.name, "targets": len(found)})
            self._said = None
        self.stats.refreshed(time.perf_counter() - start, True, time.time())
        self.stats.discovered = len(found)
        self.publish(found)
        return True

    async def _fetch(self, session: aiohttp.ClientSession) -> list[Target]:
        headers = {"Accept": "application/json", "User-Agent": f"sloguard/{__version__}",
                   "X-Prometheus-Refresh-Interval-Seconds": f"{self.sd.refresh_interval:g}"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        try:
            async with asyncio.timeout(self.sd.timeout), session.get(self.sd.url, headers=headers) as resp:
                if resp.status != 200:
                    raise RefreshError(f"HTTP {resp.status}")
                if resp.content_type != "application/json":
                    raise RefreshError(f"Content-Type {resp.content_type[:64]!r}, not application/json")
                body = await resp.content.read(self.sd.max_body_bytes + 1)
        except TimeoutError:
            raise RefreshError(f"no answer within {self.sd.timeout:g}s") from None
        except aiohttp.ClientError as exc:
            raise RefreshError(f"{type(exc).__name__}: {exc}") from None
        if len(body) > self.sd.max_body_bytes:
            raise RefreshError(f"answer over {self.sd.max_body_bytes} bytes")
        try:
            return groups.parse(json.loads(body), self.spec)
        except (ValueError, RecursionError) as exc:
            reason = exc.reason if isinstance(exc, Invalid) else "not JSON"
            raise RefreshError(f"unusable answer: {reason}") from None
