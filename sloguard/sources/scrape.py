"""Scrape one engine's /metrics (http(s) or file://), parse, normalise; every failure is a SourceError.

Failure reasons (the `reason` label): connect, timeout, http_status, not_metrics (HTML, JSON, quoted
text), too_large (over TargetSpec.max_body_bytes, checked while reading, after decompression), parse
(malformed or truncated body), no_known_metrics (no engine signal found). Each distinct reason is
logged once per target until the target recovers, which is logged once too. The API key is sent as a
Bearer token and never logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse

import aiohttp
from prometheus_client.core import GaugeMetricFamily

from sloguard.clock import Clock, SystemClock
from sloguard.config.spec import TargetSpec
from sloguard.model import ServerView
from sloguard.sources.base import SourceError, SourceOutput
from sloguard.sources.engines import normalise
from sloguard.sources.parse import ParseError, parse_text
from sloguard.windows.histo import is_reset

log = logging.getLogger("sloguard.scrape")
ACCEPT = "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1"
_CHUNK = 65536


def sniff(body: str, content_type: str = "") -> str | None:
    """Return why `body` is not exposition text (HTML, JSON, JSON-quoted text), or None if it may be."""
    ctype = content_type.split(";")[0].strip().lower()
    if ctype in ("text/html", "application/json", "application/xhtml+xml"):
        return f"content type {ctype}"
    head = body.lstrip()[:1]
    kinds = {"<": "HTML or XML", "{": "JSON", "[": "JSON", '"': "JSON-quoted text"}
    return f"body looks like {kinds[head]}" if head in kinds else None


def went_backwards(old: ServerView, new: ServerView) -> bool:
    """Return True when any histogram or counter of a model present in both scrapes decreased."""
    for model, mv in new.models.items():
        prev = old.models.get(model)
        if prev is None:
            continue
        if any(s in prev.histograms and is_reset(prev.histograms[s], h) for s, h in mv.histograms.items()):
            return True
        if any(v < prev.counters.get(s, v) for s, v in mv.counters.items()):
            return True
    return False


class ScrapeSource:
    """Source of kind "scrape" for one target; payload is the ServerView of each scrape."""

    kind = "scrape"

    def __init__(
        self,
        target: TargetSpec,
        session_factory: Callable[[], aiohttp.ClientSession] | None = None,
        clock: Clock = SystemClock(),  # noqa: B008 - stateless default
        secrets: dict[str, str] | None = None,
    ) -> None:
        self.spec = target
        self.target = target.name
        self.interval = target.scrape_interval
        self.timeout = target.scrape_timeout
        self.clock = clock
        self.restarts = 0
        self._api_key = (secrets or {}).get(target.name)
        self._factory = session_factory or aiohttp.ClientSession
        self._session: aiohttp.ClientSession | None = None
        self._logged: set[str] = set()
        self._last: ServerView | None = None

    async def collect(self) -> SourceOutput:
        """Scrape once; raise SourceError(reason, msg) for any failure, nothing else but cancellation."""
        try:
            text = await self._fetch()
            samples = parse_text(text)
            view = normalise(samples, self.spec.engine, self.target, self.clock.now(), self.spec.model or "default")
            if not view.models:
                raise SourceError("no_known_metrics", f"no {self.spec.engine} engine metrics in {len(samples)} samples")
        except SourceError as exc:
            self._failed(exc)
            raise
        except ParseError as exc:
            self._failed(err := SourceError("parse", str(exc)))
            raise err from None
        except Exception as exc:  # garbage of any shape is a reported failure, never a crash
            self._failed(err := SourceError("parse", f"{type(exc).__name__}: {exc}"))
            raise err from None
        self._succeeded(view)
        return SourceOutput(families=self._families(len(text), len(samples)), payload=view)

    async def close(self) -> None:
        """Close the HTTP session, if one was opened."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch_text(self) -> str:
        """Return the body of one scrape; raise SourceError for transport and content-type failures."""
        return await self._fetch()

    async def _fetch(self) -> str:
        url = self.spec.metrics_url or ""
        if url.startswith("file://"):
            return await asyncio.to_thread(self._read_file, Path(unquote(urlparse(url).path)))
        try:
            return await asyncio.wait_for(self._get(url), self.timeout)
        except TimeoutError:
            raise SourceError("timeout", f"no complete response within {self.timeout:g}s") from None
        except aiohttp.ClientPayloadError as exc:
            raise SourceError("parse", f"truncated body: {type(exc).__name__}") from None
        except aiohttp.ClientError as exc:
            raise SourceError("connect", f"{type(exc).__name__}: {exc}") from None

    async def _get(self, url: str) -> str:
        if self._session is None:
            self._session = self._factory()
        headers = {"Accept": ACCEPT}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        cap = self.spec.max_body_bytes
        async with self._session.get(url, headers=headers, allow_redirects=True) as resp:
            if resp.status != 200:
                raise SourceError("http_status", f"HTTP {resp.status}")
            if resp.content_length is not None and resp.content_length > cap:
                raise SourceError("too_large", f"Content-Length {resp.content_length} > {cap} bytes")
            chunks, size = [], 0
            async for chunk in resp.content.iter_chunked(_CHUNK):
                size += len(chunk)
                if size > cap:
                    raise SourceError("too_large", f"body over {cap} bytes")
                chunks.append(chunk)
            text = b"".join(chunks).decode("utf-8", errors="replace")
            why = sniff(text, resp.headers.get("Content-Type", ""))
        if why:
            raise SourceError("not_metrics", why)
        return text

    def _read_file(self, path: Path) -> str:
        try:
            with path.open("rb") as fh:
                data = fh.read(self.spec.max_body_bytes + 1)
        except OSError as exc:
            raise SourceError("connect", f"cannot read {path.name}: {exc.strerror}") from None
        if len(data) > self.spec.max_body_bytes:
            raise SourceError("too_large", f"file over {self.spec.max_body_bytes} bytes")
        text = data.decode("utf-8", errors="replace")
        if why := sniff(text):
            raise SourceError("not_metrics", why)
        return text

    def _failed(self, exc: SourceError) -> None:
        if exc.reason not in self._logged:
            self._logged.add(exc.reason)
            log.warning("scrape failed target=%s reason=%s: %s", self.target, exc.reason, exc)

    def _succeeded(self, view: ServerView) -> None:
        if self._logged:
            log.info("scrape recovered target=%s after %s", self.target, ",".join(sorted(self._logged)))
            self._logged.clear()
        if self._last is not None and went_backwards(self._last, view):
            self.restarts += 1
            log.info("engine restart detected target=%s (counters went backwards), restarts=%d",
                     self.target, self.restarts)
        self._last = view

    def _families(self, size: int, samples: int) -> list[GaugeMetricFamily]:
        body = GaugeMetricFamily("sloguard_scrape_body_bytes", "Size of the last scraped /metrics body.",
                                 labels=["target"])
        body.add_metric([self.target], float(size))
        count = GaugeMetricFamily("sloguard_scrape_samples", "Samples parsed from the last /metrics scrape.",
                                  labels=["target"])
        count.add_metric([self.target], float(samples))
        return [body, count]
