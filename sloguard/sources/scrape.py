"""Scrape one engine's /metrics (http(s) or file://), parse, normalise; every failure is a SourceError.

Failure reasons (the `reason` label): connect, timeout, http_status, not_metrics (HTML, JSON, quoted
text), too_large (over TargetSpec.max_body_bytes, checked while reading, after decompression), parse
(malformed or truncated body), no_known_metrics (no engine signal found), and the scrape limits
sample_limit, label_limit, label_value_length_limit, series_limit (see sources/limits.py). Each distinct reason is
logged once per target until the target recovers, which is logged once too. The API key is sent as a
Bearer token and never logged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse

import aiohttp
from prometheus_client.core import GaugeMetricFamily

from sloguard.clock import Clock, SystemClock
from sloguard.config.spec import TargetSpec
from sloguard.families import declare
from sloguard.histogram import is_reset
from sloguard.model import ServerView
from sloguard.sources.base import SourceError, SourceOutput
from sloguard.sources.limits import Digest, ScrapeLimits
from sloguard.sources.parse import ParseError
from sloguard.sources.parsepool import (
    POOL,
    PROCESS_THRESHOLD,
    WBITS,
    Page,
    PageWriter,
    inflate,
    read_back,
    sniff,
)

log = logging.getLogger("sloguard.scrape")
ACCEPT = "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1"
_CHUNK = 65536
_TR = ("target", "replica")
BODY_BYTES = declare("sloguard_scrape_body_bytes", "gauge", "Size of the last scraped /metrics body.", _TR)
SAMPLES = declare("sloguard_scrape_samples", "gauge", "Samples parsed from the last /metrics scrape.", _TR)


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


def _session() -> aiohttp.ClientSession:
    # Compressed bodies go to the parser process, which inflates them bounded by max_body_bytes: aiohttp would
    # inflate a gzip bomb's 64 KB chunk into 64 MB in one call on the event loop (measured: /metrics GET p99
    # 121 ms). Plain text is asked for, so well-behaved servers do not compress at all.
    return aiohttp.ClientSession(auto_decompress=False)


def _read_page(page: Page, cap: int) -> bytes:
    """Return a page's plain bytes (read back and inflated when spooled), for inspect-metrics."""
    body = read_back(page, cap)
    return inflate(body, page.encoding, cap) if page.encoding else body


def _retrieve(fut: asyncio.Future[Digest]) -> None:
    """Mark a parse's outcome as seen, so a parse whose scrape timed out logs no 'never retrieved' noise."""
    if not fut.cancelled():
        fut.exception()


class ScrapeSource:
    """Source of kind "scrape" for one target; payload is the ServerView of each scrape."""

    kind = "scrape"

    def __init__(
        self,
        target: TargetSpec,
        session_factory: Callable[[], aiohttp.ClientSession] | None = None,
        clock: Clock = SystemClock(),  # noqa: B008 - stateless default
        secrets: dict[str, str] | None = None,
        replica: str | None = None,
    ) -> None:
        self.spec = target
        self.target = target.name
        self.replica = replica if replica is not None else replica_name(target.name, target.metrics_url)
        self.interval = target.scrape_interval
        self.timeout = target.scrape_timeout
        self.clock = clock
        self.restarts = 0
        self._api_key = (secrets or {}).get(target.name)
        self._factory = session_factory or _session
        self._session: aiohttp.ClientSession | None = None
        self._logged: set[str] = set()
        self._last: ServerView | None = None
        self._parsing: asyncio.Future[Digest] | None = None
        self.limits = ScrapeLimits.of(target)
        # (target, scrape time, body) of every page fetched whole in memory: sloguard.recording's tap
        self.on_page: Callable[[str, float, bytes], None] | None = None

    async def collect(self) -> SourceOutput:
        """Scrape once; raise SourceError(reason, msg) for any failure, nothing else but cancellation.

        Parsing and normalising run in a worker thread, so a large page never holds the event loop (and
        with it /metrics) for its whole parse; a page still being parsed from an earlier, timed-out run
        fails this run with reason `timeout` instead of starting a second parse beside it.
        """
        try:
            if self._parsing is not None and not self._parsing.done():
                raise SourceError("timeout", "the previous page is still being parsed")
            page = await self._fetch()
            ts = self.clock.now()
            if self.on_page is not None and not page.path and not page.encoding:
                self.on_page(self.target, ts, page.data)
            self._parsing = asyncio.ensure_future(POOL.digest(page, self.spec, ts, self.limits))
            self._parsing.add_done_callback(_retrieve)
            if page.size >= PROCESS_THRESHOLD:  # once the parse let go of the page (even after a timeout)
                self._parsing.add_done_callback(lambda _: POOL.trim_soon())
            done = await asyncio.shield(self._parsing)
            view = dataclasses.replace(done.view, replica=self.replica)
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
        return SourceOutput(families=self._families(page.size, done.samples), payload=view)

    async def close(self) -> None:
        """Close the HTTP session, if one was opened."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch_text(self) -> str:
        """Return the body of one scrape (inflated); raise SourceError for transport and content failures."""
        page = await self._fetch()
        try:
            body = await asyncio.to_thread(_read_page, page, self.spec.max_body_bytes)
        finally:
            page.discard()
        return body.decode("utf-8", errors="replace")

    async def _fetch(self) -> Page:
        url = self.spec.metrics_url or ""
        if url.startswith("file://"):
            return await asyncio.to_thread(self._read_file, Path(unquote(urlparse(url).path)))
        try:
            async with asyncio.timeout(self.timeout):
                return await self._get(url)
        except TimeoutError:
            raise SourceError("timeout", f"no complete response within {self.timeout:g}s") from None
        except aiohttp.ClientPayloadError as exc:
            raise SourceError("parse", f"truncated body: {type(exc).__name__}") from None
        except aiohttp.ClientError as exc:
            raise SourceError("connect", f"{type(exc).__name__}: {exc}") from None

    async def _get(self, url: str) -> Page:
        if self._session is None:
            self._session = self._factory()
        headers = {"Accept": ACCEPT, "Accept-Encoding": "identity"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        cap = self.spec.max_body_bytes
        async with self._session.get(url, headers=headers, allow_redirects=True) as resp:
            if resp.status != 200:
                raise SourceError("http_status", f"HTTP {resp.status}")
            if resp.content_length is not None and resp.content_length > cap:
                raise SourceError("too_large", f"Content-Length {resp.content_length} > {cap} bytes")
            if why := sniff("", resp.headers.get("Content-Type", "")):
                raise SourceError("not_metrics", why)
            writer = PageWriter(cap, self._encoding(resp.headers.get("Content-Encoding", "identity")))
            try:
                async for chunk in resp.content.iter_chunked(_CHUNK):
                    writer.add(chunk)
                if not writer.encoding and (why := sniff(writer.head())):
                    raise SourceError("not_metrics", why)
            except BaseException:
                writer.abort()
                raise
        return writer.finish()

    def _encoding(self, header: str) -> str:
        """Return the Content-Encoding the parser must undo ("" for none or already undone)."""
        encoding = header.strip().lower()
        if encoding == "identity" or (self._session is not None and self._session.auto_decompress):
            return ""  # never compressed, or a custom session's aiohttp inflated it already
        if encoding not in WBITS:
            raise SourceError("not_metrics", f"unsupported Content-Encoding {encoding[:32]!r}")
        return encoding

    def _read_file(self, path: Path) -> Page:
        """Return a file:// page: read when small, handed to the parser process by path when large."""
        try:
            size = path.stat().st_size
            with path.open("rb") as fh:
                data = fh.read(PROCESS_THRESHOLD if size >= PROCESS_THRESHOLD else self.spec.max_body_bytes + 1)
        except OSError as exc:
            raise SourceError("connect", f"cannot read {path.name}: {exc.strerror}") from None
        if max(size, len(data)) > self.spec.max_body_bytes:
            raise SourceError("too_large", f"file over {self.spec.max_body_bytes} bytes")
        if why := sniff(data[:4096].lstrip()[:64].decode("utf-8", errors="replace")):
            raise SourceError("not_metrics", why)
        if size >= PROCESS_THRESHOLD:
            return Page(path=str(path), size=size, owned=False)
        return Page(data=data, size=len(data))

    def _failed(self, exc: SourceError) -> None:
        if exc.reason not in self._logged:
            self._logged.add(exc.reason)
            log.warning("scrape failed target=%s replica=%s reason=%s: %s", self.target, self.replica, exc.reason, exc)

    def _succeeded(self, view: ServerView) -> None:
        if self._logged:
            log.info("scrape recovered target=%s replica=%s after %s", self.target, self.replica,
                     ",".join(sorted(self._logged)))
            self._logged.clear()
        if self._last is not None and went_backwards(self._last, view):
            self.restarts += 1
            log.info("engine restart detected target=%s replica=%s (counters went backwards), restarts=%d",
                     self.target, self.replica, self.restarts)
        self._last = view

    def _families(self, size: int, samples: int) -> list[GaugeMetricFamily]:
        body = BODY_BYTES.gauge()
        body.add_metric([self.target, self.replica], float(size))
        count = SAMPLES.gauge()
        count.add_metric([self.target, self.replica], float(samples))
        return [body, count]


def replica_name(target: str, metrics_url: str | None) -> str:
    """Return a plain target's `replica` label: its /metrics host:port (Prometheus's `instance`), else its name."""
    netloc = urlparse(metrics_url or "").netloc
    return netloc or target
